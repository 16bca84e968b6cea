// The bookkeeping of a job that ends behind its workflow's back (the stale-task reaper, a
// connection workflow's start-up cleanup, the reconcile tick) and the Idempotency-Key check of a
// requested job, against a real, freshly migrated Postgres. Temporal is an in-memory stand-in that
// says which workflows run (these cases need a workflow that is NOT running).
import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { claimJob } from '../activities/claim-job';
import { failAbandonedJobs } from '../activities/fail-abandoned-jobs';
import { markJobRetrying } from '../activities/mark-job-retrying';
import { reapStaleTasks } from '../activities/reap-stale-tasks';
import { reconcileConnections } from '../activities/reconcile-connections';
import { presentJob } from '../api/present';
import type { CommandDeps } from '../commands/deps';
import { cancelJob, getJob, requestJob, type JobRequest } from '../commands/jobs';
import { findConnection } from '../db/models/connections';
import { syncJobWorkflowId } from '../temporal/ids';
import type { Client } from '@temporalio/client';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();
beforeEach(async () => {
  await db.pool.query('truncate connections, sync_seen cascade');
});

const commandDeps = (temporal: Client): CommandDeps => testCommandDeps(db.pool, temporal);

async function connection(config: Record<string, unknown> = { resource_types: ['issues', 'users'] }): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, $2) returning id`,
    [`app_${randomUUID().slice(0, 8)}`, config],
  );
  return rows[0]!.id;
}

async function insertJob(connectionId: string, opts: { status: string; trigger: string; workflowId?: string | null; runId?: string }): Promise<string> {
  const id = randomUUID();
  const createdAt = new Date(Date.now() - 10 * 60_000);
  await db.pool.query(
    `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id, created_at, started_at, scheduler_run_id)
     values ($1, $2, 'acme', 'incremental', $3, $4, $5, $6, $6, $7)`,
    [id, connectionId, opts.trigger, opts.status, opts.workflowId === undefined ? syncJobWorkflowId(id) : opts.workflowId, createdAt, opts.runId ?? null],
  );
  return id;
}

async function insertTask(jobId: string, resourceType: string, status: string, heartbeatAt: Date | null = null): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into sync_tasks (job_id, resource_type, status, heartbeat_at, started_at) values ($1, $2, $3, $4, $4) returning id`,
    [jobId, resourceType, status, heartbeatAt],
  );
  return rows[0]!.id;
}

async function jobRow(id: string) {
  const { rows } = await db.pool.query('select status, failed_tasks, retry_count, rate_limit_retry_count from sync_jobs where id = $1', [id]);
  return rows[0];
}

async function failedTaskCount(jobId: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from sync_tasks where job_id = $1 and status = 'failed'`, [jobId]);
  return rows[0]!.n;
}

describe('the stale-task reaper logs the failed attempt of a job that had rate-limit retries', () => {
  it("writes a 'failed' sync_job_logs row for the attempt it ends, not one numbered as an earlier retrying attempt", async () => {
    const conn = await connection();
    const jobId = await insertJob(conn, { status: 'running', trigger: 'api' });
    await insertTask(jobId, 'issues', 'completed');
    await insertTask(jobId, 'users', 'processing');
    const { deps } = testActivityDeps({ pool: db.pool, temporal: fakeTemporal().client });
    // Attempt 1 was rate-limited: the workflow recorded it and waited (job retrying, attempt 1 logged).
    const t0 = Date.now() - 20 * 60_000;
    await markJobRetrying(deps)({
      jobId, at: t0, startedAt: t0 - 1000, retryAfter: t0 + 1000, kind: 'rate_limited', error: 'users: rate limited', failedCount: 1,
      retryCount: 0, rateLimitRetryCount: 1,
    });
    // Attempt 2 claimed the job and its task started, then the workflow went away (terminated) and
    // the task's worker stopped: no heartbeat since.
    expect(await claimJob(deps)({ jobId, workflowId: syncJobWorkflowId(jobId), at: t0 + 2000 })).not.toBeNull();
    await db.pool.query(`update sync_tasks set status = 'processing', heartbeat_at = $2, started_at = $2 where job_id = $1 and resource_type = 'users'`, [jobId, new Date(t0 + 3000)]);

    await expect(reapStaleTasks(deps)({ at: Date.now() })).resolves.toEqual({ tasks: 1, jobs: 1 });
    expect(await jobRow(jobId)).toMatchObject({ status: 'failed', retry_count: 0, rate_limit_retry_count: 1 });

    const { rows } = await db.pool.query<{ attempt: number; outcome: string }>('select attempt, outcome from sync_job_logs where job_id = $1 order by attempt', [jobId]);
    // Numbered as finishJob numbers the last attempt: retry_count + rate_limit_retry_count + 1 = 2.
    expect(rows).toEqual([{ attempt: 1, outcome: 'retrying' }, { attempt: 2, outcome: 'failed' }]);
  });
});

describe('a job failed as abandoned counts the tasks it failed in failed_tasks (and the API names them)', () => {
  it("the connection workflow's start-up cleanup (failAbandonedJobs)", async () => {
    const conn = await connection();
    const jobId = await insertJob(conn, { status: 'running', trigger: 'schedule', workflowId: `connection:${conn}`, runId: 'run-1' });
    await insertTask(jobId, 'issues', 'completed');
    await insertTask(jobId, 'users', 'processing', new Date());
    const { deps } = testActivityDeps({ pool: db.pool, temporal: fakeTemporal().client });
    await expect(failAbandonedJobs(deps)({ connectionId: conn, at: Date.now(), runId: 'run-2' })).resolves.toEqual([jobId]);

    expect(await failedTaskCount(jobId)).toBe(1);
    expect(await jobRow(jobId)).toMatchObject({ status: 'failed', failed_tasks: 1 });
  });

  it('the reconcile tick (a requested job whose workflow is gone)', async () => {
    const conn = await connection();
    const jobId = await insertJob(conn, { status: 'running', trigger: 'api' });
    await insertTask(jobId, 'issues', 'completed');
    await insertTask(jobId, 'users', 'processing', new Date());
    // Only the connection's workflow runs; the job's own workflow has ended.
    const temporal = fakeTemporal(new Set([`connection:${conn}`]));
    const { deps } = testActivityDeps({ pool: db.pool, temporal: temporal.client });
    const result = await reconcileConnections(deps)({ at: Date.now() });
    expect(result.abandoned).toBe(1);

    expect(await failedTaskCount(jobId)).toBe(1);
    expect(await jobRow(jobId)).toMatchObject({ status: 'failed', failed_tasks: 1 });
    // What GET /jobs/:id shows: the failed task is named in the error.
    const { job, tasks } = await getJob(commandDeps(temporal.client), jobId, false);
    expect(presentJob(job, tasks).error?.failed_tasks).toEqual([{ resource_type: 'users', message: expect.any(String) }]);
  });

  it("the start-up cleanup forgets the seen-set of a full pass it failed, as every path that ends a task does", async () => {
    const conn = await connection();
    const jobId = await insertJob(conn, { status: 'running', trigger: 'schedule', workflowId: `connection:${conn}`, runId: 'run-1' });
    const failing = await insertTask(jobId, 'users', 'processing', new Date());
    const other = randomUUID(); // a task of another job, whose seen-set stays
    await db.pool.query(`insert into sync_seen (task_id, external_id) values ($1, 'a'), ($1, 'b'), ($2, 'a')`, [failing, other]);
    const { deps } = testActivityDeps({ pool: db.pool, temporal: fakeTemporal().client });
    await expect(failAbandonedJobs(deps)({ connectionId: conn, at: Date.now(), runId: 'run-2' })).resolves.toEqual([jobId]);

    const { rows } = await db.pool.query<{ task_id: string }>('select task_id from sync_seen order by task_id');
    expect(rows).toEqual([{ task_id: other }]);
  });
});

describe('POST /jobs/:id/cancel of a requested job whose workflow is no longer running', () => {
  // Its sync-job workflow was terminated (`temporal workflow terminate`) after it claimed the job:
  // no workflow will ever run or cancel it, so the cancel ends it at once, as it ends a scheduler
  // job whose connection run is gone.
  for (const status of ['running', 'retrying'] as const) {
    it(`ends a ${status} job cancelled at once, with its open tasks and its sync.cancelled event`, async () => {
      const conn = await connection();
      const jobId = await insertJob(conn, { status, trigger: 'api' });
      await insertTask(jobId, 'issues', 'completed');
      await insertTask(jobId, 'users', status === 'running' ? 'processing' : 'pending', new Date());
      await db.pool.query(
        `insert into webhooks (tenant_id, url, event_types, secret) values ('acme', 'http://127.0.0.1:9/hook', '{sync.cancelled,sync.failed}', 'whsec_x')`,
      );
      const temporal = fakeTemporal(new Set([`connection:${conn}`]));

      const answered = await cancelJob(commandDeps(temporal.client), jobId);
      expect(answered.id).toBe(jobId);
      expect(await jobRow(jobId)).toMatchObject({ status: 'cancelled' });
      const { rows: tasks } = await db.pool.query('select resource_type, status from sync_tasks where job_id = $1 order by resource_type', [jobId]);
      expect(tasks).toEqual([{ resource_type: 'issues', status: 'completed' }, { resource_type: 'users', status: 'cancelled' }]);
      const { rows: events } = await db.pool.query(`select event_type from webhook_events where payload->'job'->>'id' = $1`, [jobId]);
      expect(events.map((e) => e.event_type)).toEqual(['sync.cancelled']);
    });
  }
});

describe('Idempotency-Key of POST /jobs/schedule', () => {
  const window = { start: new Date('2025-01-01T00:00:00Z'), end: new Date('2025-01-02T00:00:00Z') };
  /** A backfill request as the route makes it: resource types taken from the payload. */
  const backfill = (connection: JobRequest['connection'], payload: Record<string, unknown>, priority = 0): JobRequest => ({
    connection,
    mode: 'incremental',
    resourceTypes: Array.isArray(payload.resource_types) ? payload.resource_types.map(String) : undefined,
    idempotencyKey: 'k-1',
    backfill: { window, priority, payload },
  });

  it('refuses a repeat of the key for a backfill of other resource types (a different request), instead of answering the first job', async () => {
    const row = (await findConnection(db.pool, await connection()))!;
    const deps = commandDeps(fakeTemporal().client);
    expect((await requestJob(deps, backfill(row, { resource_types: ['issues'] }))).created).toBe(true);
    await expect(requestJob(deps, backfill(row, { resource_types: ['users'] }))).rejects.toMatchObject({ code: 'idempotency_key_reused' });
  });

  it('refuses a repeat with another payload or priority, and answers a true repeat (its keys in any order, its types repeated or in another order) with the first job', async () => {
    const row = (await findConnection(db.pool, await connection()))!;
    const deps = commandDeps(fakeTemporal().client);
    const first = await requestJob(deps, backfill(row, { reason: 'manual', resource_types: ['users', 'issues'] }, 5));
    expect(first.created).toBe(true);

    const repeat = await requestJob(deps, backfill(row, { resource_types: ['users', 'issues', 'users'], reason: 'manual' }, 5));
    expect({ id: repeat.job.id, created: repeat.created }).toEqual({ id: first.job.id, created: false });
    // The same types in another order are the same request (a client may build the list from a set).
    const reordered = await requestJob(deps, backfill(row, { resource_types: ['issues', 'users'], reason: 'manual' }, 5));
    expect({ id: reordered.job.id, created: reordered.created }).toEqual({ id: first.job.id, created: false });
    await expect(requestJob(deps, backfill(row, { reason: 'other', resource_types: ['users', 'issues'] }, 5))).rejects.toMatchObject({ code: 'idempotency_key_reused' });
    await expect(requestJob(deps, backfill(row, { reason: 'manual', resource_types: ['users', 'issues'] }, 6))).rejects.toMatchObject({ code: 'idempotency_key_reused' });
    await expect(requestJob(deps, backfill(row, { reason: 'manual' }, 5))).rejects.toMatchObject({ code: 'idempotency_key_reused' });
    const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from sync_jobs where idempotency_key = 'k-1'`);
    expect(rows[0]!.n).toBe(1);
  });
});

describe('the reconcile tick over more active jobs than it checks at once', () => {
  it('fails an abandoned job newer than the 5,000 oldest active jobs (all alive), and starts a requested job whose start failed', async () => {
    // 5,001 connections, each with a queued scheduler job ten minutes old whose connection workflow runs.
    const { rows: fleet } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key) select 'acme', 'demo', 'fleet_' || n from generate_series(1, 5001) n returning id`,
    );
    await db.pool.query(
      `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, created_at, scheduled_at, scheduler_run_id)
       select id, 'acme', 'incremental', 'schedule', 'queued', now() - interval '10 minutes', now() + interval '1 hour', 'run-1' from connections`,
    );
    const running = new Set(fleet.map((c) => `connection:${c.id}`));
    // Newer than all of them (five minutes old): an API job whose workflow ended, and a requested
    // job still queued whose workflow start failed.
    const conn = await connection();
    running.add(`connection:${conn}`);
    const abandoned = randomUUID();
    const unstarted = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id, created_at, started_at)
       values ($1::uuid, $3, 'acme', 'incremental', 'api', 'running', 'sync-job:' || $1::text, now() - interval '5 minutes', now() - interval '5 minutes'),
              ($2::uuid, $3, 'acme', 'full', 'api', 'queued', null, now() - interval '5 minutes', null)`,
      [abandoned, unstarted, conn],
    );
    const temporal = fakeTemporal(running);
    const { deps } = testActivityDeps({ pool: db.pool, temporal: temporal.client });
    const result = await reconcileConnections(deps)({ at: Date.now() });

    expect(await jobRow(abandoned)).toMatchObject({ status: 'failed' });
    expect(temporal.started).toContain(syncJobWorkflowId(unstarted));
    expect(result).toMatchObject({ abandoned: 1, adopted: 1 });
  });
});
