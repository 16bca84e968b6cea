// A pause (the connection's row written paused, then its queued scheduler job cancelled, in one
// transaction) meeting the workflow's move of that queued job (after a schedule change or a
// sync-now: the job moved, then the plan written into the connection's row). Both write the same
// two rows; taken in opposite orders they deadlock, and the pause answered 500.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { rescheduleQueuedJob } from '../activities/reschedule-queued-job';
import { CONNECTION_STATUS, CONNECTION_STATUSES } from '../policy/vocabulary';
import { setStatusFrom } from '../db/models/connections';
import { cancelQueuedSchedulerJobs } from '../db/events';
import { feedCursors } from '../lib/feed-cursors';
import type { PlannedRun } from '../policy/schedule';
import { lockWaits, until, useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

describe('a pause meeting the move of its queued scheduler job', () => {
  const db = useTestDatabase();

  it('takes the two rows in one order: the pause cancels the job, the move finds it no longer queued, neither deadlocks', async () => {
    const tenant = `tenant-${randomUUID().slice(0, 8)}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'github', $2, 'active') returning id`,
      [tenant, `app_${randomUUID().slice(0, 8)}`],
    );
    const connectionId = rows[0]!.id;
    const job = await db.pool.query<{ id: string }>(
      `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at)
       values ($1, $2, 'incremental', 'schedule', 'queued', now() + interval '10 minutes') returning id`,
      [connectionId, tenant],
    );
    const jobId = job.rows[0]!.id;
    const { deps } = testActivityDeps({ pool: db.pool });
    const now = Date.now();
    const plan: PlannedRun = { mode: 'normal', nextDueAt: now + 60_000, nextRunAt: now + 63_000, jitterSeconds: 3, baseIntervalSeconds: 60, jitterBounds: { minSeconds: 0, maxSeconds: 6 } };

    // The pause's first step: the connection's row written paused (not committed yet).
    const pause = await db.pool.connect();
    try {
      await pause.query('begin');
      const statuses = CONNECTION_STATUSES.filter((s) => s !== CONNECTION_STATUS.disabled);
      expect(await setStatusFrom(pause, connectionId, CONNECTION_STATUS.paused, statuses)).not.toBeNull();

      // The workflow's move of the queued job meanwhile: it waits for the pause.
      const moved = rescheduleQueuedJob(deps)({ jobId, connectionId, scheduledAt: now, plan });
      const settled = moved.then((value) => ({ value }), (err: Error & { code?: string }) => ({ code: err.code ?? err.message }));
      await until(async () => (await lockWaits(db.pool)) >= 1);

      // The pause's second step: its queued scheduler job cancelled, then the commit.
      const paused = await pause
        .query('select 1')
        .then(() => cancelQueuedSchedulerJobs(pause, connectionId, new Date(), 'connection paused', null, feedCursors(deps.credentials)))
        .then((ended) => ({ cancelled: ended.jobs.map((j) => j.id) }), (err: Error & { code?: string }) => ({ code: err.code ?? err.message }));
      await pause.query('commit').catch(() => pause.query('rollback'));

      expect({ paused, moved: await settled }).toEqual({ paused: { cancelled: [jobId] }, moved: { value: false } });
    } finally {
      pause.release();
    }
    const { rows: after } = await db.pool.query<{ status: string }>('select status from sync_jobs where id = $1', [jobId]);
    expect(after[0]!.status).toBe('cancelled');
  });
});
