// A pause (the connection's row written paused, then its queued scheduler jobs cancelled, in one
// transaction) meeting a connection run's first step when that step both ends jobs an earlier run
// left and stores a pending pause or resume (openCycle with cleanup and status). Both write the
// connection's row and the left job's; taken in opposite orders they deadlock, and the pause
// answered 500.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openCycle } from '../activities/open-cycle';
import { CONNECTION_STATUS, CONNECTION_STATUSES } from '../policy/vocabulary';
import { setStatusFrom } from '../db/models/connections';
import { cancelQueuedSchedulerJobs } from '../db/events';
import { feedCursors } from '../lib/feed-cursors';
import { lockWaits, until, useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

describe("a pause meeting a run's first step that ends an earlier run's job and stores a status", () => {
  const db = useTestDatabase();

  it('takes the two rows in one order: the pause cancels the job, the step finds nothing left to end, neither deadlocks', async () => {
    const tenant = `tenant-${randomUUID().slice(0, 8)}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'github', $2, 'active') returning id`,
      [tenant, `app_${randomUUID().slice(0, 8)}`],
    );
    const connectionId = rows[0]!.id;
    const job = await db.pool.query<{ id: string }>(
      `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at, scheduler_run_id)
       values ($1, $2, 'incremental', 'schedule', 'queued', now() + interval '10 minutes', 'earlier-run') returning id`,
      [connectionId, tenant],
    );
    const jobId = job.rows[0]!.id;
    const { deps } = testActivityDeps({ pool: db.pool });

    // The pause's first step: the connection's row written paused (not committed yet).
    const pause = await db.pool.connect();
    try {
      await pause.query('begin');
      const statuses = CONNECTION_STATUSES.filter((s) => s !== CONNECTION_STATUS.disabled);
      expect(await setStatusFrom(pause, connectionId, CONNECTION_STATUS.paused, statuses)).not.toBeNull();

      // A new run's first step meanwhile, with a resume still to store: it waits for the pause.
      const opened = openCycle(deps)({ connectionId, at: Date.now(), cleanup: true, runId: 'this-run', status: 'active' });
      const settled = opened.then((value) => ({ status: value?.status ?? null }), (err: Error & { code?: string }) => ({ code: err.code ?? err.message }));
      await until(async () => (await lockWaits(db.pool)) >= 1);

      // The pause's second step: its queued scheduler jobs cancelled, then the commit.
      const paused = await cancelQueuedSchedulerJobs(pause, connectionId, new Date(), 'connection paused', null, feedCursors(deps.credentials)).then(
        (ended) => ({ cancelled: ended.jobs.map((j) => j.id) }),
        (err: Error & { code?: string }) => ({ code: err.code ?? err.message }),
      );
      await pause.query('commit').catch(() => pause.query('rollback'));

      expect({ paused, opened: await settled }).toEqual({ paused: { cancelled: [jobId] }, opened: { status: 'active' } });
    } finally {
      pause.release();
    }
    const { rows: after } = await db.pool.query<{ status: string }>('select status from sync_jobs where id = $1', [jobId]);
    expect(after[0]!.status).toBe('cancelled');
  });
});
