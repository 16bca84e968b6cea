// What a job waits for between attempts, on the time-skipping server: a job claimed again after a
// rate-limit wait waits out a circuit-breaker pause that another job of its connection opened
// meanwhile (real activities and Postgres), and INTERRUPTED_RETRY_CAP counts interruptions in a
// row, a rate-limited or failed attempt ending the row (in-memory activities).
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { recordAttemptFailure } from '../activities/record-attempt';
import { BREAKER_THRESHOLD } from '../policy/breaker';
import { INTERRUPTED_RETRY_CAP } from '../policy/retry';
import { syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobResult } from '../temporal/sync-job';
import { resetDemoFailures, resetDemoFetchLog } from './helpers/demo';
import { sealedTestCredentials, testActivityDeps } from './helpers/deps';
import { patchIds, recordHistory } from './helpers/histories';
import { useWorkerStack } from './helpers/stack';
import { stubActivities } from './helpers/stub-activities';
import { createTimeSkippingEnv } from './helpers/temporal';
import { eventually, synctideBundle } from './helpers/worker';

describe('a job waiting out a rate limit while the breaker opens (time-skipping)', () => {
  const TASK_QUEUE = 'job-waits-breaker';
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  beforeEach(() => {
    resetDemoFailures();
    resetDemoFetchLog();
  });

  it("does not run its next attempt while the connection's circuit breaker is open (\"a job waits for the pause to end\")", async () => {
    const { env, db } = stack;
    const connectionId = randomUUID();
    await db.pool.query(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials)
       values ($1, 'acme', 'demo', 'rl-breaker', $2, $3)`,
      [
        connectionId,
        { seed: 'rl-breaker', resource_types: ['issues'], records_per_resource: 10, fail: { resource: 'issues', at_page: 1, kind: 'rate_limited', retry_after_seconds: 120, times: 1 } },
        sealedTestCredentials(connectionId, { token: 's3cret-token-value' }),
      ],
    );
    const jobId = randomUUID();
    await db.pool.query(`insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', 'full', 'manual')`, [jobId, connectionId]);
    const handle = await env.client.workflow.start<(i: { jobId: string; connectionId: string }) => Promise<SyncJobResult>>('syncJobWorkflow', {
      taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId }],
    });
    // The first attempt met the provider's rate limit: the job waits 120 s on a durable timer.
    await eventually(async () => {
      const { rows } = await db.pool.query<{ status: string }>('select status from sync_jobs where id = $1', [jobId]);
      return rows[0]?.status === 'retrying' ? true : undefined;
    });
    // Meanwhile another job of the connection (e.g. its scheduled incremental) fails for the 5th
    // time in a row: the breaker opens and pauses the connection for 30 minutes.
    const { deps } = testActivityDeps({ pool: db.pool });
    const record = recordAttemptFailure(deps);
    const at = await env.currentTimeMs();
    let pausedUntil: number | null = null;
    for (let i = 0; i < BREAKER_THRESHOLD; i++) {
      pausedUntil = (await record({ connectionId, at: at + i, error: 'the provider answered 502', attemptKey: `other-job:${i}` })).pausedUntil;
    }
    expect(pausedUntil).not.toBeNull();

    expect((await handle.result()).status).toBe('completed');
    const { rows } = await db.pool.query<{ outcome: string; started_at: Date }>(
      'select outcome, started_at from sync_job_logs where job_id = $1 order by attempt',
      [jobId],
    );
    expect(rows[0]!.outcome).toBe('retrying');
    expect(rows.at(-1)!.outcome).toBe('completed');
    // The retry after the rate limit must wait for the breaker's pause, like every other job of
    // the connection: the provider is failing, and the pause is what protects it.
    expect(rows.at(-1)!.started_at.getTime()).toBeGreaterThanOrEqual(pausedUntil!);
    const history = await handle.fetchHistory();
    expect(patchIds(history.events ?? [])).toContain('reclaim-waits-for-breaker');
    await recordHistory(env.client, 'sync-job-reclaim-waits-for-breaker', syncJobWorkflowId(jobId));
  });
});

describe('interruptions "in a row" (stub activities, time-skipping)', () => {
  const TASK_QUEUE = 'job-waits-interruptions';
  const store = stubActivities();
  /** What each syncTask call answers, in order; success once the script is spent. */
  const script: ('shutdown' | 'rate_limited')[] = [];
  let env: TestWorkflowEnvironment;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  beforeAll(async () => {
    env = await createTimeSkippingEnv();
    const activities = {
      ...store.activities,
      syncTask: async () => {
        const next = script.shift();
        if (next === 'shutdown') throw ApplicationFailure.create({ type: 'WorkerShutdown', message: 'stub: worker shut down', nonRetryable: true });
        if (next === 'rate_limited') {
          throw ApplicationFailure.create({ type: 'rate_limited', message: 'stub: rate limited', nonRetryable: true, details: [{ retryAfterSeconds: 1 }] });
        }
        return { status: 'completed' as const, entityCount: 1, writtenCount: 1, deletedCount: 0, pages: 1 };
      },
    };
    worker = await Worker.create({ connection: env.nativeConnection, taskQueue: TASK_QUEUE, workflowBundle: await synctideBundle(), activities });
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await env?.teardown();
  });

  it('an interruption after a rate-limited attempt is not counted as a failure (the 20 before it were not in a row with it)', async () => {
    const connectionId = '00000000-0000-4000-8000-0000000000aa';
    store.addConnection(connectionId, await env.currentTimeMs());
    const jobId = '00000000-0000-4000-8000-0000000000bb';
    store.jobs.set(jobId, {
      id: jobId, connectionId, jobType: 'incremental', trigger: 'manual', status: 'queued',
      scheduledAt: await env.currentTimeMs(), finishedAt: null, abandoned: false,
    });
    // A long job through many rolling deploys: INTERRUPTED_RETRY_CAP interrupted attempts, then an
    // attempt the provider rate-limited (ending that row of interruptions), then one more deploy.
    script.push(...Array.from({ length: INTERRUPTED_RETRY_CAP }, () => 'shutdown' as const), 'rate_limited', 'shutdown');
    const result = await env.client.workflow.execute<(i: { jobId: string; connectionId: string }) => Promise<SyncJobResult>>('syncJobWorkflow', {
      taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId }],
    });
    expect(result.status).toBe('completed');
    expect(script).toEqual([]);
    // "Interrupted attempts a job may retry in a row before an interruption counts as a failure"
    // (policy/retry.ts): the last interruption was the first of its row, so it counts nowhere:
    // neither toward the circuit breaker nor as a failure retry.
    expect(store.calls.get('recordAttemptFailure') ?? 0).toBe(0);
    const history = await env.client.workflow.getHandle(syncJobWorkflowId(jobId)).fetchHistory();
    expect(patchIds(history.events ?? [])).toContain('interruptions-in-a-row');
    await recordHistory(env.client, 'sync-job-interruptions-in-a-row', syncJobWorkflowId(jobId));
  });
});
