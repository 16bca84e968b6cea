// A pause (the connection's row written paused, then its queued scheduler jobs cancelled, in one
// transaction) meeting a workflow step that writes the same two rows: the move of a queued job
// (after a schedule change or a sync-now: the job moved, then the plan written into the
// connection's row), and a run's first step that ends a job an earlier run left and stores a
// pending pause or resume (openCycle with cleanup and status). Taken in opposite orders the rows
// deadlock, and the pause answered 500: every writer of both takes the connection's row first.
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { describe, expect, it } from 'vitest';
import { openCycle } from '../activities/open-cycle';
import { rescheduleQueuedJob } from '../activities/reschedule-queued-job';
import { CONNECTION_STATUS, CONNECTION_STATUSES } from '../policy/vocabulary';
import { setStatusFrom } from '../db/models/connections';
import { cancelQueuedSchedulerJobs } from '../db/events';
import { feedCursors } from '../lib/feed-cursors';
import type { PlannedRun } from '../policy/schedule';
import { lockWaits, until, useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

describe('a pause meeting a workflow step that writes its connection and its queued job', () => {
  const db = useTestDatabase();

  /** An active connection with one queued scheduler job (queued by run `runId` when given). */
  async function connectionWithQueuedJob(runId: string | null = null): Promise<{ connectionId: string; jobId: string }> {
    const tenant = `tenant-${randomUUID().slice(0, 8)}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'github', $2, 'active') returning id`,
      [tenant, `app_${randomUUID().slice(0, 8)}`],
    );
    const connectionId = rows[0]!.id;
    const job = await db.pool.query<{ id: string }>(
      `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at, scheduler_run_id)
       values ($1, $2, 'incremental', 'schedule', 'queued', now() + interval '10 minutes', $3) returning id`,
      [connectionId, tenant, runId],
    );
    return { connectionId, jobId: job.rows[0]!.id };
  }

  /**
   * The pause's first step (the connection's row written paused, not committed), then `step` started
   * and seen waiting for it, then the pause's second step (its queued scheduler jobs cancelled) and
   * its commit. Returns what each ended with.
   */
  async function pauseAround<T>(connectionId: string, step: () => Promise<T>): Promise<{ paused: unknown; step: T | { code: string } }> {
    const { deps } = testActivityDeps({ pool: db.pool });
    const pause: PoolClient = await db.pool.connect();
    try {
      await pause.query('begin');
      const statuses = CONNECTION_STATUSES.filter((s) => s !== CONNECTION_STATUS.disabled);
      expect(await setStatusFrom(pause, connectionId, CONNECTION_STATUS.paused, statuses)).not.toBeNull();
      const settled = step().then((value) => value, (err: Error & { code?: string }) => ({ code: err.code ?? err.message }));
      await until(async () => (await lockWaits(db.pool)) >= 1);
      const paused = await cancelQueuedSchedulerJobs(pause, connectionId, new Date(), 'connection paused', null, feedCursors(deps.credentials)).then(
        (ended) => ({ cancelled: ended.jobs.map((j) => j.id) }),
        (err: Error & { code?: string }) => ({ code: err.code ?? err.message }),
      );
      await pause.query('commit').catch(() => pause.query('rollback'));
      return { paused, step: await settled };
    } finally {
      pause.release();
    }
  }

  const jobStatus = async (jobId: string) => (await db.pool.query<{ status: string }>('select status from sync_jobs where id = $1', [jobId])).rows[0]!.status;

  it("meets the move of its queued job in one order: the pause cancels the job, the move finds it no longer queued", async () => {
    const { connectionId, jobId } = await connectionWithQueuedJob();
    const { deps } = testActivityDeps({ pool: db.pool });
    const now = Date.now();
    const plan: PlannedRun = { mode: 'normal', nextDueAt: now + 60_000, nextRunAt: now + 63_000, jitterSeconds: 3, baseIntervalSeconds: 60, jitterBounds: { minSeconds: 0, maxSeconds: 6 } };
    const ended = await pauseAround(connectionId, async () => ({ value: await rescheduleQueuedJob(deps)({ jobId, connectionId, scheduledAt: now, plan }) }));
    expect(ended).toEqual({ paused: { cancelled: [jobId] }, step: { value: false } });
    expect(await jobStatus(jobId)).toBe('cancelled');
  });

  it("meets a run's first step that ends an earlier run's job and stores a resume in one order: the pause cancels the job, the step finds nothing left to end", async () => {
    const { connectionId, jobId } = await connectionWithQueuedJob('earlier-run');
    const { deps } = testActivityDeps({ pool: db.pool });
    const ended = await pauseAround(connectionId, async () => {
      const context = await openCycle(deps)({ connectionId, at: Date.now(), cleanup: true, runId: 'this-run', status: 'active' });
      return { status: context?.status ?? null };
    });
    expect(ended).toEqual({ paused: { cancelled: [jobId] }, step: { status: 'active' } });
    expect(await jobStatus(jobId)).toBe('cancelled');
  });
});
