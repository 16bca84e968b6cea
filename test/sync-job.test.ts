// Running sync jobs on the Temporal dev server with real Postgres and the demo
// connector: full, incremental and immediate modes, deletion, resume after a failed page,
// failing resources and cancellation by signal and by the `temporal` CLI.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { createDemoWorld, demoConnector, demoFetchLog, resetDemoFailures, resetDemoFetchLog, demoConnectionRows } from './helpers/demo';
import { demoRecords } from '../connectors/demo';
import { registerConnector } from '../connectors/registry';
import { upsertRecords } from '../db/models/records';
import { ensureConnectionWorkflow } from '../temporal/client';
import type { ConnectionState } from '../temporal/connection';
import { connectionWorkflowId, syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobResult } from '../temporal/sync-job';
import type { TestDatabase } from './helpers/database';
import { useWorkerStack } from './helpers/stack';
import { sealedTestCredentials } from './helpers/deps';
import { startFakeGitHub } from './helpers/fake-github';
import { recordHistory } from './helpers/histories';
import { eventually, type LogLines } from './helpers/worker';

const run = promisify(execFile);
const TASK_QUEUE = 'sync-jobs';

describe('sync jobs', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let lines: LogLines;
  beforeAll(() => {
    ({ env, db, lines } = stack);
  });
  beforeEach(() => {
    resetDemoFetchLog();
    resetDemoFailures();
  });

  const { insert: connection, setConfig } = demoConnectionRows(() => db.pool, 'jobs');

  async function newJob(connectionId: string, jobType: 'incremental' | 'full') {
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', $3, 'manual')`,
      [jobId, connectionId, jobType],
    );
    return jobId;
  }

  /** Runs one job workflow to its end, as the connection workflow's child would. */
  async function runJob(connectionId: string, jobType: 'incremental' | 'full'): Promise<{ jobId: string; result: SyncJobResult }> {
    const jobId = await newJob(connectionId, jobType);
    const result = await env.client.workflow.execute<(i: { jobId: string; connectionId: string }) => Promise<SyncJobResult>>(
      'syncJobWorkflow',
      { taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId }] },
    );
    return { jobId, result };
  }

  const job = async (jobId: string) => (await db.pool.query('select * from sync_jobs where id = $1', [jobId])).rows[0];
  const tasks = async (jobId: string) =>
    (await db.pool.query('select * from sync_tasks where job_id = $1 order by resource_type', [jobId])).rows;
  const recordCount = async (connectionId: string) =>
    (await db.pool.query('select count(*)::int as n from records where connection_id = $1 and deleted_at is null', [connectionId])).rows[0].n as number;

  const FULL_10K = {
    resource_types: ['issues', 'pull_requests', 'users'],
    records_per_resource: { issues: 5000, pull_requests: 3000, users: 2000 },
    page_size: 500,
  };

  it('full sync of 10,000 records across 3 resource types; a second pass deletes 100 dropped and rewrites only 50 changed', async () => {
    const id = await connection(FULL_10K);
    const first = await runJob(id, 'full');
    expect(first.result.status).toBe('completed');
    expect(await recordCount(id)).toBe(10_000);
    expect(await job(first.jobId)).toMatchObject({
      status: 'completed', total_tasks: 3, completed_tasks: 3, failed_tasks: 0, processed_entities: '10000',
    });
    expect((await tasks(first.jobId)).map((t) => [t.resource_type, t.status, t.entity_count])).toEqual([
      ['issues', 'completed', 5000],
      ['pull_requests', 'completed', 3000],
      ['users', 'completed', 2000],
    ]);
    const logs = await db.pool.query('select outcome, processed_count from sync_job_logs where job_id = $1', [first.jobId]);
    expect(logs.rows).toEqual([{ outcome: 'completed', processed_count: '10000' }]);
    expect((await tasks(first.jobId)).map((t) => [t.added_count, t.updated_count, t.unchanged_count, t.deleted_count])).toEqual([
      [5000, 0, 0, 0], [3000, 0, 0, 0], [2000, 0, 0, 0],
    ]);

    const dropped = Array.from({ length: 100 }, (_, i) => i);
    const changed = Array.from({ length: 50 }, (_, i) => 100 + i);
    await setConfig(id, { ...FULL_10K, revision: 1, changes: { deleted: { issues: dropped }, changed: { issues: changed } } });
    const before = await db.pool.query(`select external_id, synced_at from records where connection_id = $1`, [id]);
    const second = await runJob(id, 'full');
    expect(second.result.status).toBe('completed');
    expect(await recordCount(id)).toBe(9_900);
    const issues = (await tasks(second.jobId)).find((t) => t.resource_type === 'issues');
    expect(issues).toMatchObject({ deleted_count: 100, written_count: 50, entity_count: 4900, added_count: 0, updated_count: 50, unchanged_count: 4850 });
    // A deletion leaves a tombstone: the row stays, marked deleted, for the change feed.
    const tombstones = await db.pool.query(`select count(*)::int as n from records where connection_id = $1 and change = 'delete'`, [id]);
    expect(tombstones.rows[0].n).toBe(100);
    const after = await db.pool.query(`select external_id, synced_at from records where connection_id = $1 and deleted_at is null`, [id]);
    const was = new Map(before.rows.map((r) => [r.external_id, r.synced_at.getTime()]));
    const rewritten = after.rows.filter((r) => r.synced_at.getTime() !== was.get(r.external_id)).map((r) => r.external_id);
    expect(rewritten.sort()).toEqual(changed.map((i) => `issues-${i}`).sort());
  });

  it('incremental after full fetches only what changed since the cursor', async () => {
    const config = { resource_types: ['issues'], records_per_resource: 1000, page_size: 100 };
    const id = await connection(config);
    // With no sync_state at all, an incremental job runs as full.
    const first = await runJob(id, 'incremental');
    expect((await tasks(first.jobId))[0]).toMatchObject({ entity_count: 1000, status: 'completed' });
    await setConfig(id, { ...config, revision: 1, changes: { changed: { issues: [10, 20, 30, 40, 50] } } });
    const second = await runJob(id, 'incremental');
    // The 5 changed records, plus the record at the cursor itself (`since` is inclusive).
    expect((await tasks(second.jobId))[0]).toMatchObject({ entity_count: 6, written_count: 5, deleted_count: 0 });
    const state = await db.pool.query('select cursor from sync_state where connection_id = $1', [id]);
    expect(state.rows[0].cursor.toISOString()).toBe('2025-01-02T00:00:50.000Z');
  });

  it('does not lose a change made during a sync: the next incremental has it', async () => {
    const world = createDemoWorld(`during-${randomUUID()}`);
    for (let i = 0; i < 600; i++) {
      world.upsert('issues', `issues-${i}`, { title: `v0 ${i}` }, new Date(Date.UTC(2025, 0, 1, 0, 0, i)));
    }
    const id = await connection({ world: world.id, resource_types: ['issues'], page_size: 100, latency_ms: 50 });
    await runJob(id, 'full');
    // An incremental pass during which records change: one it has already served, one ahead.
    const jobId = await newJob(id, 'incremental');
    const pass = env.client.workflow.execute('syncJobWorkflow', {
      taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId: id }],
    });
    const fetchesBefore = demoFetchLog.length;
    await eventually(async () => (demoFetchLog.length >= fetchesBefore + 1 ? true : undefined));
    world.upsert('issues', 'issues-599', { title: 'changed during the pass' }, new Date(Date.UTC(2025, 5, 1)));
    world.upsert('issues', 'issues-3', { title: 'changed during the pass too' }, new Date(Date.UTC(2025, 5, 2)));
    await pass;
    await runJob(id, 'incremental');
    const { rows } = await db.pool.query(
      `select external_id, data ->> 'title' as title from records where connection_id = $1 and external_id in ('issues-3', 'issues-599') order by 1`,
      [id],
    );
    expect(rows).toEqual([
      { external_id: 'issues-3', title: 'changed during the pass too' },
      { external_id: 'issues-599', title: 'changed during the pass' },
    ]);
    expect(await recordCount(id)).toBe(600);
  });

  it('resumes a retried task after its last stored page: no page served twice, no record duplicated', async () => {
    const id = await connection({
      resource_types: ['issues'], records_per_resource: 2000, page_size: 100,
      fail: { resource: 'issues', at_page: 8, kind: 'transient', times: 1 },
    });
    const { jobId, result } = await runJob(id, 'full');
    expect(result.status).toBe('completed');
    expect(await recordCount(id)).toBe(2000);
    expect((await tasks(jobId))[0]).toMatchObject({ entity_count: 2000, pages_done: 20 });
    // 21 fetches: pages 1–7, page 8 failing once, then pages 8–20 after the retry resumed.
    const tokens = demoFetchLog.filter((e) => e.resource === 'issues').map((e) => e.pageToken);
    expect(tokens).toHaveLength(21);
    expect(new Set(tokens).size).toBe(20);
    expect(tokens[7]).toBe(tokens[8]);
  });

  it('a backfill stores only records updated inside [window start, window end), even from a connector that ignores both bounds', async () => {
    // A provider that serves everything whatever the window, plus one record without updated_at.
    registerConnector({
      slug: 'demo-unbounded',
      resourceTypes: (config) => demoConnector.resourceTypes(config),
      async fetchPage(input) {
        const page = await demoConnector.fetchPage({ ...input, since: null, until: null });
        if (input.pageToken !== null) return page;
        return { ...page, records: [...page.records, { externalId: 'undated', updatedAt: null, data: {} }] };
      },
    });
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo-unbounded', 'unbounded', $1) returning id`,
      [{ resource_types: ['issues'], records_per_resource: 30, page_size: 4 }],
    );
    const connectionId = rows[0]!.id;
    const jobId = randomUUID();
    // Record i is updated at 2025-01-01T00:00:00Z + i s: the window holds records 10–19.
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, window_start, window_end)
       values ($1, $2, 'acme', 'incremental', 'backfill', '2025-01-01T00:00:10Z', '2025-01-01T00:00:20Z')`,
      [jobId, connectionId],
    );
    const result = await env.client.workflow.execute('syncJobWorkflow', {
      taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId }],
    });
    expect(result).toMatchObject({ status: 'completed' });
    const stored = await db.pool.query<{ external_id: string }>(
      `select external_id from records where connection_id = $1 order by (data ->> 'index')::int`,
      [connectionId],
    );
    expect(stored.rows.map((r) => r.external_id)).toEqual(Array.from({ length: 10 }, (_, i) => `issues-${10 + i}`));
    expect((await tasks(jobId))[0]).toMatchObject({ status: 'completed', entity_count: 10, written_count: 10, deleted_count: 0 });
    expect(await job(jobId)).toMatchObject({ status: 'completed', processed_entities: '10' });
  });

  it('fails the job when one resource fails, naming it, and completes the others (two tasks at a time)', async () => {
    const id = await connection({
      resource_types: ['issues', 'pull_requests', 'users'], records_per_resource: 50, max_parallel_tasks: 2,
      fail: { resource: 'users', at_page: 1, kind: 'permanent' },
    });
    const { jobId, result } = await runJob(id, 'full');
    expect(result.status).toBe('failed');
    const rows = await tasks(jobId);
    expect(rows.map((t) => t.status)).toEqual(['completed', 'completed', 'failed']);
    expect(rows[2].error_message).toMatch(/users/i);
    const saved = await job(jobId);
    expect(saved).toMatchObject({ status: 'failed', completed_tasks: 2, failed_tasks: 1 });
    expect(saved.last_error).toMatch(/^1 of 3 resource types failed: users: /);
    expect(saved.last_error).not.toMatch(/at .*\.ts|stack|select /i);
  });

  it('syncs GitHub issues across Link pages, and fails at once on a rejected token that appears in no log', async () => {
    const github = await startFakeGitHub({ token: 'ghp_valid_token_1234567890', repos: { 'acme/app': { issues: 250, pulls: 40 } } });
    try {
      const config = { base_url: github.baseUrl, repositories: ['acme/app'], per_page: 100 };
      const [okId, badId] = [randomUUID(), randomUUID()];
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials)
         values ($4, 'acme', 'github', 'gh-ok', $1, $2), ($5, 'acme', 'github', 'gh-bad', $1, $3) returning id`,
        [config, sealedTestCredentials(okId, { token: 'ghp_valid_token_1234567890' }), sealedTestCredentials(badId, { token: 'ghp_wrong_token_0987654321' }), okId, badId],
      );
      const ok = await runJob(rows[0]!.id, 'full');
      expect(ok.result.status).toBe('completed');
      const counts = await db.pool.query(
        `select resource_type, count(*)::int as n from records where connection_id = $1 group by 1 order by 1`,
        [rows[0]!.id],
      );
      expect(counts.rows).toEqual([{ resource_type: 'issues', n: 250 }, { resource_type: 'pull_requests', n: 40 }]);

      const bad = await runJob(rows[1]!.id, 'full');
      expect(bad.result.status).toBe('failed');
      const saved = await job(bad.jobId);
      expect(saved.last_error).toMatch(/GitHub rejected the credentials \(401\)/);
      expect((await db.pool.query('select count(*)::int as n from sync_job_logs where job_id = $1', [bad.jobId])).rows[0].n).toBe(1);
      const everything = JSON.stringify(lines) + JSON.stringify(saved) + JSON.stringify(bad.result);
      expect(everything).not.toContain('ghp_wrong_token_0987654321');
      expect(everything).not.toContain('ghp_valid_token_1234567890');
    } finally {
      await github.close();
    }
  });

  it('immediate mode returns counts and creates no job or task rows', async () => {
    const id = await connection({ resource_types: ['issues', 'users'], records_per_resource: 120, page_size: 50 });
    const count = async () =>
      (await db.pool.query('select (select count(*) from sync_jobs)::int as j, (select count(*) from sync_tasks)::int as t')).rows[0];
    const before = await count();
    const result = await env.client.workflow.execute('immediateSyncWorkflow', {
      taskQueue: TASK_QUEUE,
      workflowId: `immediate-sync:${id}:${randomUUID()}`,
      args: [{ connectionId: id, mode: 'full' }],
    });
    expect(result).toMatchObject({
      connectionId: id,
      resources: [
        { resourceType: 'issues', entityCount: 120, pages: 3 },
        { resourceType: 'users', entityCount: 120, pages: 3 },
      ],
    });
    expect(await count()).toEqual(before);
    expect(await recordCount(id)).toBe(240);
  });

  it('immediate mode counts a provider rate limit once in rate_limited_total{provider}', async () => {
    const id = await connection({
      resource_types: ['issues'], records_per_resource: 30, page_size: 10, seed: 'immediate-rate-limit',
      fail: { resource: 'issues', at_page: 2, kind: 'rate_limited', retry_after_seconds: 7 },
    });
    const counted = async () =>
      (await stack.registry.getSingleMetric('rate_limited_total')!.get()).values.find((v) => v.labels.provider === 'demo')?.value ?? 0;
    const before = await counted();
    const failed = await env.client.workflow
      .execute('immediateSyncWorkflow', { taskQueue: TASK_QUEUE, workflowId: `immediate-sync:${id}:${randomUUID()}`, args: [{ connectionId: id, mode: 'full' }] })
      .catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect(await counted()).toBe(before + 1);
  });

  it('cancels a running job with `temporal workflow cancel`: job and open tasks cancelled, no page fetched after', async () => {
    const id = await connection({ resource_types: ['issues', 'users'], records_per_resource: 5000, page_size: 100, latency_ms: 100 });
    const jobId = await newJob(id, 'full');
    const handle = await env.client.workflow.start('syncJobWorkflow', {
      taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId: id }],
    });
    await eventually(async () => (demoFetchLog.length >= 3 ? true : undefined));
    await run(inject('temporalCliPath'), ['workflow', 'cancel', '--workflow-id', syncJobWorkflowId(jobId), '--address', env.address]);
    expect(await handle.result()).toMatchObject({ status: 'cancelled' });
    const fetchedAtEnd = demoFetchLog.length;
    expect(await job(jobId)).toMatchObject({ status: 'cancelled' });
    expect((await tasks(jobId)).map((t) => t.status)).toEqual(['cancelled', 'cancelled']);
    expect(fetchedAtEnd).toBeLessThan(50);
    await new Promise((r) => setTimeout(r, 500));
    expect(demoFetchLog.length).toBe(fetchedAtEnd);
    await recordHistory(env.client, 'sync-job-cancelled', syncJobWorkflowId(jobId));
  });

  it('cancels the running job of a connection with the cancelJob signal', async () => {
    const config = { resource_types: ['issues'], records_per_resource: 5000, page_size: 100, latency_ms: 100 };
    const id = await connection(config);
    // The records are already stored as the provider serves them: a full pass adds to its
    // seen-set only the ids it does not rewrite itself, so these make it keep one.
    await upsertRecords(db.pool, { connectionId: id, resourceType: 'issues', jobId: null, fetchedAt: new Date(Date.now() - 60_000) }, demoRecords(config, 'issues'));
    const handle = await ensureConnectionWorkflow(env.client, TASK_QUEUE, { id, tenantId: 'acme', providerSlug: 'demo' });
    await eventually(async () => (demoFetchLog.length >= 3 ? true : undefined));
    const state = await handle.query<ConnectionState>('state');
    expect(state.phase).toBe('running');
    // The bootstrap is a full pass: it keeps a seen-set while it runs…
    const seen = async () =>
      (await db.pool.query(
        'select count(*)::int as n from sync_seen s join sync_tasks t on t.id = s.task_id where t.job_id = $1',
        [state.current_job_id],
      )).rows[0].n as number;
    await eventually(async () => ((await seen()) > 0 ? true : undefined));
    await handle.signal('cancelJob');
    const after = await eventually(async () => {
      const s = await env.client.workflow.getHandle(connectionWorkflowId(id)).query<ConnectionState>('state');
      return s.last_outcome === 'cancelled' ? s : undefined;
    });
    expect(after.cycles).toBe(1);
    expect(await job(state.current_job_id!)).toMatchObject({ status: 'cancelled' });
    expect((await tasks(state.current_job_id!)).map((t) => t.status)).toEqual(['cancelled']);
    // …which the cancellation deletes (sync_seen has no foreign key to clean up after it).
    expect(await seen()).toBe(0);
    await handle.terminate('test done');
  });
});
