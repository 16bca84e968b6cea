// Churn: 200 connections at 60 s for 10 simulated minutes on the time-skipping server with real
// Postgres, the reconcile tick running, and every 30 s random cancels, pauses and resumes,
// sync-now signals, API syncs and, every three minutes, a worker restart (each costs up to a
// minute of real time: work the stopped worker held times out on the server's clock). All along,
// every active job has a live workflow; afterwards no slot ran twice and no connection's history
// passed 2,000 events. CHURN_MINUTES=15 (or more) runs it longer. Its real time depends on what
// each restarted worker held, hence the 30-minute limit.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelJob, requestJob } from '../../commands/jobs';
import { getConnection, pauseConnection, resumeConnection } from '../../commands/connections';
import type { CommandDeps } from '../../commands/deps';
import { CommandRefused } from '../../commands/errors';
import { jobOwner } from '../../activities/reconcile-connections';
import type { ActiveJobToCheck } from '../../db/models/jobs';
import { ensureConnectionWorkflow, ensureReconcileWorkflow, isWorkflowRunning, signalConnectionWorkflow } from '../../temporal/client';
import { syncNowSignal } from '../../temporal/connection';
import { connectionWorkflowId } from '../../temporal/ids';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { TEST_KEYRING } from '../helpers/deps';
import { startNonStickyProxy, type NonStickyProxy } from '../helpers/non-sticky-proxy';
import { createTimeSkippingEnv } from '../helpers/temporal';
import { mulberry32 } from '../helpers/random';
import { createTestWorker } from '../helpers/worker';
import { DEFAULT_TENANT_LIMITS } from '../../policy/tenant-limits';

const TASK_QUEUE = 'faults-churn';
const CONNECTIONS = 200;
const INTERVAL_SECONDS = 60;
const MINUTES = Number(process.env.CHURN_MINUTES ?? 10);
const STEP_SECONDS = 30;
const ACTIONS_PER_STEP = 8;
const RESTART_EVERY_STEPS = Number(process.env.CHURN_RESTART_EVERY ?? 6);
const MAX_HISTORY_EVENTS = 2000;


describe('churn: 200 connections, random signals and worker restarts', () => {
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let proxy: NonStickyProxy;
  let worker: { worker: Worker; run: Promise<void>; connection: NativeConnection } | undefined;
  beforeAll(async () => {
    [env, db] = await Promise.all([createTimeSkippingEnv(), createTestDatabase()]);
    // Workers reach the server through a proxy that keeps workflows off sticky queues: the
    // time-skipping server would strand the tasks queued for a stopped worker's sticky queue.
    proxy = await startNonStickyProxy(env.address);
  });
  afterAll(async () => {
    await stopWorker();
    await proxy?.close();
    await env?.teardown();
    await db?.drop();
  });

  /** Stops the worker as a deploy does: in-flight tasks get a second, then the process is gone. */
  async function stopWorker(): Promise<void> {
    if (!worker) return;
    worker.worker.shutdown();
    await worker.run;
    await worker.connection.close();
    worker = undefined;
  }

  async function startWorker() {
    const connection = await NativeConnection.connect({ address: proxy.address });
    // One tenant holds all 200 connections: its running-jobs limit would shape the load this test
    // is about (per-tenant limits are tested in test/tenant-limits.test.ts).
    const created = await createTestWorker({
      connection, client: env.client, pool: db.pool, taskQueue: TASK_QUEUE, shutdownGraceSeconds: 1,
      tenantLimits: { ...DEFAULT_TENANT_LIMITS, runningJobs: CONNECTIONS },
    });
    worker = { worker: created.worker, run: created.worker.run(), connection };
    return created.metrics;
  }

  /**
   * Active jobs with no live workflow: neither the one that runs them (their own `sync-job:` run,
   * or their connection's for a scheduled job run inline) nor, queued by the scheduler, their connection's.
   */
  async function jobsWithoutWorkflow(): Promise<string[]> {
    const { rows } = await db.pool.query<Pick<ActiveJobToCheck, 'id' | 'status' | 'trigger' | 'connection_id' | 'workflow_id'>>(
      `select id, status, trigger, connection_id, workflow_id from sync_jobs where status in ('queued', 'running', 'retrying')`,
    );
    const orphans: string[] = [];
    for (const job of rows) {
      const owner = jobOwner(job);
      if (await isWorkflowRunning(env.client, owner)) continue;
      // It may have finished between the read and the question: only a job still active counts.
      const { rows: now } = await db.pool.query(`select 1 from sync_jobs where id = $1 and status in ('queued', 'running', 'retrying')`, [job.id]);
      if (now.length > 0 && !(await isWorkflowRunning(env.client, owner))) orphans.push(`${job.id} (${job.trigger}/${job.status})`);
    }
    return orphans;
  }

  it('keeps every active job on a live workflow, runs no slot twice and keeps histories small', async () => {
    const rand = mulberry32(20261123);
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config, metadata, created_at)
       select 'acme', 'demo', 'churn-' || i, $2, $3, $4 from generate_series(1, $1) i returning id`,
      [CONNECTIONS, { resource_types: ['items'], records_per_resource: 2, page_size: 2 }, { sync: { interval_seconds: INTERVAL_SECONDS } },
        new Date(await env.currentTimeMs())],
    );
    const ids = rows.map((r) => r.id);
    const metrics = await startWorker();
    const deps: CommandDeps = { pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE, metrics, credentials: TEST_KEYRING, maxIntervalSeconds: 86_400, immediateSyncTimeoutMs: 60_000 };
    for (const id of ids) await ensureConnectionWorkflow(env.client, TASK_QUEUE, { id, tenantId: 'acme', providerSlug: 'demo' });
    await ensureReconcileWorkflow(env.client, TASK_QUEUE, 60, 7);

    const done = { cancels: 0, pauses: 0, resumes: 0, syncNows: 0, apiJobs: 0, refused: 0, restarts: 0, samples: 0 };
    const violations: string[] = [];
    for (let step = 0; step < (MINUTES * 60) / STEP_SECONDS; step++) {
      for (let a = 0; a < ACTIONS_PER_STEP; a++) {
        const id = ids[Math.floor(rand() * ids.length)]!;
        const action = rand();
        try {
          if (action < 0.25) {
            const { rows: active } = await db.pool.query<{ id: string }>(
              `select id from sync_jobs where connection_id = $1 and status in ('queued', 'running', 'retrying') limit 1`,
              [id],
            );
            if (active[0]) {
              await cancelJob(deps, active[0].id);
              done.cancels += 1;
            }
          } else if (action < 0.4) {
            await pauseConnection(deps, id);
            done.pauses += 1;
          } else if (action < 0.6) {
            await resumeConnection(deps, id);
            done.resumes += 1;
          } else if (action < 0.85) {
            await signalConnectionWorkflow(env.client, TASK_QUEUE, { id, tenantId: 'acme', providerSlug: 'demo' }, syncNowSignal, {
              mode: rand() < 0.3 ? 'full' : 'incremental',
            });
            done.syncNows += 1;
          } else {
            await requestJob(deps, { connection: await getConnection(deps, id), mode: 'full' });
            done.apiJobs += 1;
          }
        } catch (err) {
          // A paused connection refuses syncs; a job may finish before its cancel: both are answers.
          if (!(err instanceof CommandRefused)) throw err;
          done.refused += 1;
        }
      }
      if (step > 0 && step % RESTART_EVERY_STEPS === 0) {
        await stopWorker();
        await startWorker();
        done.restarts += 1;
      }
      const t0 = Date.now();
      violations.push(...(await jobsWithoutWorkflow()));
      done.samples += 1;
      const t1 = Date.now();
      await env.sleep(STEP_SECONDS * 1000);
      if (process.env.CHURN_TRACE) process.stderr.write(`[churn] step ${step}: sample ${t1 - t0} ms, sleep ${Date.now() - t1} ms\n`);
    }
    violations.push(...(await jobsWithoutWorkflow()));
    done.samples += 1;

    // No slot ran twice: a scheduled job is planned a full interval after the schedule's last run
    // before it (finished, failed or cancelled; abandoned ones aside), never onto the same slot.
    const { rows: twice } = await db.pool.query(
      `select j.id, j.scheduled_at, prev.finished_at as previous_finished_at
         from sync_jobs j
         join lateral (select max(p.finished_at) as finished_at from sync_jobs p
                        where p.connection_id = j.connection_id and p.trigger in ('schedule', 'manual')
                          and p.status in ('completed', 'failed', 'cancelled') and p.abandoned_at is null
                          and p.finished_at <= j.created_at) prev on true
        where j.trigger = 'schedule' and j.started_at is not null and prev.finished_at is not null
          and j.scheduled_at < prev.finished_at + make_interval(secs => $1) - interval '1 second'`,
      [INTERVAL_SECONDS],
    );
    let longest = 0;
    for (const id of ids) {
      const history = await env.client.workflow.getHandle(connectionWorkflowId(id)).fetchHistory();
      longest = Math.max(longest, history.events?.length ?? 0);
    }
    const { rows: counts } = await db.pool.query<{ status: string; trigger: string; n: number }>(
      'select status, trigger, count(*)::int as n from sync_jobs group by 1, 2 order by 1, 2',
    );
    console.log(
      `[churn] ${CONNECTIONS} connections, ${MINUTES} simulated minutes: ${JSON.stringify(done)}; jobs ${counts.map((c) => `${c.trigger}/${c.status}=${c.n}`).join(' ')}; ` +
        `active jobs without a live workflow: ${violations.length} in ${done.samples} samples; slots run twice: ${twice.length}; longest history: ${longest} events`,
    );
    expect(violations).toEqual([]);
    expect(twice).toEqual([]);
    expect(longest).toBeLessThanOrEqual(MAX_HISTORY_EVENTS);
    expect(done.restarts).toBeGreaterThanOrEqual(3);
    const completed = counts.filter((c) => c.status === 'completed').reduce((n, c) => n + c.n, 0);
    expect(completed).toBeGreaterThan(CONNECTIONS * 5);
  }, 1_800_000);
});
