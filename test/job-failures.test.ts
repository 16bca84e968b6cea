// Failure policy of a job on the time-skipping server: retries after
// 1, 2, 4, 8, 16 min, the circuit breaker and its alert, and rate limits that wait for the
// provider's hint without touching the breaker. Each job runs as its own workflow here.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { resetDemoFailures, resetDemoFetchLog } from './helpers/demo';
import { syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobResult } from '../temporal/sync-job';
import type { TestDatabase } from './helpers/database';
import { useWorkerStack } from './helpers/stack';
import { recordHistory } from './helpers/histories';
import { sealedTestCredentials, testActivityDeps } from './helpers/deps';
import { eventually } from './helpers/worker';
import { reapStaleTasks } from '../activities/reap-stale-tasks';

const TASK_QUEUE = 'job-failures';
const MINUTE = 60_000;

describe('job failure policy (time-skipping)', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  beforeAll(() => {
    ({ env, db } = stack);
  });
  beforeEach(() => {
    resetDemoFailures();
    resetDemoFetchLog();
  });

  let seq = 0;
  async function runJob(config: Record<string, unknown>) {
    seq += 1;
    const id = randomUUID();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials)
       values ($3, 'acme', 'demo', $1, $2, $4) returning id`,
      [`f${seq}`, { seed: `s${seq}`, resource_types: ['issues'], records_per_resource: 10, ...config }, id, sealedTestCredentials(id, { token: 's3cret-token-value' })],
    );
    const connectionId = rows[0]!.id;
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', 'full', 'manual')`,
      [jobId, connectionId],
    );
    const result = await env.client.workflow.execute<(i: { jobId: string; connectionId: string }) => Promise<SyncJobResult>>(
      'syncJobWorkflow',
      { taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId }] },
    );
    return { connectionId, jobId, result };
  }

  const logs = async (jobId: string) =>
    (await db.pool.query('select attempt, outcome, started_at, finished_at, error_summary from sync_job_logs where job_id = $1 order by attempt', [jobId])).rows;
  const stats = async (connectionId: string) =>
    (await db.pool.query('select consecutive_failures, paused_until, last_failure_at from connector_failure_stats where connection_id = $1', [connectionId])).rows[0];
  const alerts = async (connectionId: string) =>
    (await db.pool.query('select category, severity, context, resolved_at from alerts where connection_id = $1 order by created_at', [connectionId])).rows;

  it('retries a failing job after 1, 2, 4, 8, 16 min (±10 %), then fails it with a terminal log row and an alert', async () => {
    const { connectionId, jobId, result } = await runJob({ fail: { resource: 'issues', at_page: 1, kind: 'transient' } });
    expect(result.status).toBe('failed');
    const rows = await logs(jobId);
    expect(rows.map((r) => r.outcome)).toEqual(['retrying', 'retrying', 'retrying', 'retrying', 'retrying', 'failed']);
    // The wait after attempt n is the gap between its end and the next attempt's start.
    const gaps = rows.slice(1).map((r, i) => (r.started_at.getTime() - rows[i]!.finished_at.getTime()) / MINUTE);
    const expected = [1, 2, 4, 8, 16];
    gaps.forEach((gap, i) => {
      // The 5th failure opens the breaker (30 min), so the last wait is the pause, not 16 min.
      const want = i === 4 ? 30 : expected[i]!;
      expect(gap).toBeGreaterThanOrEqual(want * 0.9 - 0.01);
      expect(gap).toBeLessThanOrEqual(want * 1.1 + 0.5);
    });
    const job = (await db.pool.query('select status, retry_count, last_error from sync_jobs where id = $1', [jobId])).rows[0];
    expect(job).toMatchObject({ status: 'failed', retry_count: 5 });
    expect(job.last_error).toMatch(/issues: /);
    const raised = await alerts(connectionId);
    expect(raised.map((a) => a.category).sort()).toEqual(['sync_circuit_breaker', 'sync_job_failed']);
    expect(JSON.stringify(raised)).not.toContain('s3cret-token-value');
    expect((await stats(connectionId)).consecutive_failures).toBe(6);
  });

  it('opens the breaker after 5 failed attempts with one alert, and a later success closes it', async () => {
    // Each attempt's fetch fails twice (the activity's one quick retry), for five attempts.
    const { connectionId, jobId, result } = await runJob({ fail: { resource: 'issues', at_page: 1, kind: 'transient', times: 10 } });
    expect(result.status).toBe('completed');
    const rows = await logs(jobId);
    expect(rows.map((r) => r.outcome)).toEqual(['retrying', 'retrying', 'retrying', 'retrying', 'retrying', 'completed']);
    // The 5th failed attempt paused the connection for 30 min: the 6th attempt waited for it.
    const fifthEnd = rows[4]!.finished_at.getTime();
    expect(rows[5]!.started_at.getTime() - fifthEnd).toBeGreaterThanOrEqual(30 * MINUTE - 1000);
    const breaker = await alerts(connectionId);
    expect(breaker).toHaveLength(1);
    expect(breaker[0]).toMatchObject({ category: 'sync_circuit_breaker', severity: 'warning' });
    expect(breaker[0].context).toMatchObject({ connection_id: connectionId, consecutive_failures: 5 });
    expect(breaker[0].resolved_at).not.toBeNull();
    expect(await stats(connectionId)).toMatchObject({ consecutive_failures: 0, paused_until: null });
    await recordHistory(env.client, 'sync-job-retries-breaker', syncJobWorkflowId(jobId));
  });

  it('waits at least Retry-After for a rate limit and does not touch the breaker', async () => {
    const { connectionId, jobId, result } = await runJob({
      fail: { resource: 'issues', at_page: 1, kind: 'rate_limited', retry_after_seconds: 120, times: 1 },
    });
    expect(result.status).toBe('completed');
    const rows = await logs(jobId);
    expect(rows.map((r) => r.outcome)).toEqual(['retrying', 'completed']);
    const waitedSeconds = (rows[1]!.started_at.getTime() - rows[0]!.finished_at.getTime()) / 1000;
    expect(waitedSeconds).toBeGreaterThanOrEqual(120);
    expect(waitedSeconds).toBeLessThanOrEqual(132 + 1);
    const job = (await db.pool.query('select retry_count, rate_limit_retry_count from sync_jobs where id = $1', [jobId])).rows[0];
    expect(job).toEqual({ retry_count: 0, rate_limit_retry_count: 1 });
    expect(await stats(connectionId)).toBeUndefined();
    expect(await alerts(connectionId)).toEqual([]);
    await recordHistory(env.client, 'sync-job-rate-limited', syncJobWorkflowId(jobId));
  });

  it("waits out a rate-limited task's Retry-After when another task of the attempt failed too", async () => {
    const { jobId, result } = await runJob({
      resource_types: ['issues', 'users'],
      fail: [
        { resource: 'issues', at_page: 1, kind: 'rate_limited', retry_after_seconds: 600, times: 1 },
        { resource: 'users', at_page: 1, kind: 'transient', times: 2 },
      ],
    });
    expect(result.status).toBe('completed');
    const rows = await logs(jobId);
    expect(rows.map((r) => r.outcome)).toEqual(['retrying', 'completed']);
    // The ordinary failure retry alone would come about a minute later: the provider asked for 600 s.
    const waitedSeconds = (rows[1].started_at.getTime() - rows[0].finished_at.getTime()) / 1000;
    expect(waitedSeconds).toBeGreaterThanOrEqual(600);
    await recordHistory(env.client, 'sync-job-failure-retry-after', syncJobWorkflowId(jobId));
  });

  it('fails at once on a permanent error with its message', async () => {
    const { jobId, result } = await runJob({ fail: { resource: 'issues', at_page: 1, kind: 'permanent' } });
    expect(result.status).toBe('failed');
    expect((await logs(jobId)).map((r) => r.outcome)).toEqual(['failed']);
  });

  /** The value of `rate_limited_total{provider="demo"}` on this file's worker. */
  const rateLimitedTotal = async () =>
    (await stack.metrics.rateLimited.get()).values.find((v) => v.labels.provider === 'demo')?.value ?? 0;

  it('counts a rate limit in rate_limited_total also when other resources failed in the same attempt', async () => {
    const before = await rateLimitedTotal();
    const { result } = await runJob({
      resource_types: ['issues', 'users'],
      fail: [
        { resource: 'issues', at_page: 1, kind: 'rate_limited', retry_after_seconds: 1, times: 1 },
        { resource: 'users', at_page: 1, kind: 'transient', times: 2 },
      ],
    });
    expect(result.status).toBe('completed');
    expect((await rateLimitedTotal()) - before).toBe(1);
  });

  it('counts the rate limit that exhausts the retry cap in rate_limited_total', async () => {
    const before = await rateLimitedTotal();
    const { result, jobId } = await runJob({ fail: { resource: 'issues', at_page: 1, kind: 'rate_limited', retry_after_seconds: 1, times: 21 } });
    expect(result.status).toBe('failed');
    const job = (await db.pool.query('select rate_limit_retry_count from sync_jobs where id = $1', [jobId])).rows[0];
    expect(job.rate_limit_retry_count).toBe(20);
    expect((await rateLimitedTotal()) - before).toBe(21);
  });
  describe('a job ended behind its workflow', () => {
    /** Starts a job whose pages take `latency_ms` each and waits until its task is processing. */
    async function startSlowJob(config: Record<string, unknown>) {
      seq += 1;
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, $2) returning id`,
        [`behind${seq}`, { seed: `behind${seq}`, resource_types: ['issues'], records_per_resource: 10, page_size: 5, latency_ms: 1000, ...config }],
      );
      const connectionId = rows[0]!.id;
      const jobId = randomUUID();
      await db.pool.query(
        `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', 'full', 'manual')`,
        [jobId, connectionId],
      );
      const handle = await env.client.workflow.start<(i: { jobId: string; connectionId: string }) => Promise<SyncJobResult>>(
        'syncJobWorkflow',
        { taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId }] },
      );
      await eventually(async () => {
        const { rows: tasks } = await db.pool.query(`select 1 from sync_tasks where job_id = $1 and status = 'processing'`, [jobId]);
        return tasks.length > 0 ? true : undefined;
      });
      return { connectionId, jobId, handle };
    }
    /** What an earlier reaper did to a job whose task went silent: the task and the job failed. */
    async function failBehindItsBack(jobId: string) {
      await db.pool.query(`update sync_tasks set status = 'failed', completed_at = now(), error_message = 'reaped' where job_id = $1`, [jobId]);
      await db.pool.query(`update sync_jobs set status = 'failed', finished_at = now(), failed_tasks = 1, last_error = 'reaped behind its back' where id = $1`, [jobId]);
    }
    /** The run's result, or 'still running' when it has not ended within 30 s of real time (it would retry for days). */
    const resultOrStuck = (handle: { result(): Promise<SyncJobResult> }) =>
      Promise.race([handle.result(), new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 30_000))]);

    it('a step that finds its job ended ends the workflow with the job\'s status instead of retrying for ever', async () => {
      const { jobId, handle } = await startSlowJob({ fail: { resource: 'issues', at_page: 2, kind: 'transient', times: 1 } });
      await failBehindItsBack(jobId);
      const result = await resultOrStuck(handle);
      if (result === 'still running') await handle.terminate('test: stuck');
      const job = (await db.pool.query('select status, last_error from sync_jobs where id = $1', [jobId])).rows[0];
      expect({ result: result === 'still running' ? result : result.status, job }).toEqual({
        result: 'failed',
        job: { status: 'failed', last_error: 'reaped behind its back' },
      });
    }, 60_000);

    it('a task that ended behind its run is no success: the breaker stays and the alert stays open', async () => {
      const { connectionId, jobId, handle } = await startSlowJob({});
      await db.pool.query(
        `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures) values ($1, 'demo', 3)`,
        [connectionId],
      );
      await db.pool.query(`insert into alerts (category, severity, connection_id) values ('sync_job_failed', 'critical', $1)`, [connectionId]);
      await failBehindItsBack(jobId);
      const result = await resultOrStuck(handle);
      if (result === 'still running') await handle.terminate('test: stuck');
      expect({
        result: result === 'still running' ? result : result.status,
        breaker: (await stats(connectionId)).consecutive_failures,
        open: (await alerts(connectionId)).filter((a) => a.resolved_at === null).map((a) => a.category),
      }).toEqual({ result: 'failed', breaker: 3, open: ['sync_job_failed'] });
    }, 60_000);

    it('the stale-task reaper leaves a job whose workflow runs to that workflow', async () => {
      const { jobId, handle } = await startSlowJob({});
      const reaped = await reapStaleTasks(testActivityDeps({ pool: db.pool, temporal: env.client }).deps)({ at: Date.now() + 10 * MINUTE });
      const result = await handle.result();
      const job = (await db.pool.query('select status from sync_jobs where id = $1', [jobId])).rows[0];
      expect({ reaped, result: result.status, job: job.status }).toEqual({ reaped: { tasks: 0, jobs: 0 }, result: 'completed', job: 'completed' });
    }, 60_000);
  });
});
