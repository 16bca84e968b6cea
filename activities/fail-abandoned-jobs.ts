import type { PoolClient } from 'pg';
import { afterJobCancelled, emitJobEvents } from '../db/events';
import { endLeftSchedulerJobs, type EndedJob } from '../db/models/jobs';
import type { CursorCodec, FeedCursor } from '../policy/cursors';
import { forgetSeenOfTasks } from '../db/models/seen';
import { failOpenTasksOfJobs } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import { STOPPED_QUEUED_JOB_REASONS } from '../policy/job-lifecycle';
import { JOB_STATUS } from '../policy/vocabulary';
import { startDeliveriesSoon } from './webhook-deliveries';

/** Why a job was failed by a connection workflow's start-up cleanup. */
export const ABANDONED_REASON =
  'abandoned: the connection workflow that owned this job ended (terminated or crashed) before the job finished';

/**
 * Start-up cleanup of a connection workflow: a job the connection workflow created (a scheduler
 * trigger; API-requested jobs run in workflows of their own) still active belongs to an earlier
 * run that has ended (each connection has one workflow, and its child jobs are terminated with
 * it), so it is marked `failed` with a clear reason and `abandoned_at`, never left "stuck
 * running", its open tasks are failed (counted in its `failed_tasks`) and their seen-sets
 * forgotten, and its `sync.failed` webhook event is written. A queued one of a connection paused
 * or disabled meanwhile is cancelled instead, with `sync.cancelled`, as the pause or disable
 * would have ended it. Returns the ids it ended.
 */
export function failAbandonedJobs(deps: ActivityDeps): Activities['failAbandonedJobs'] {
  const { pool, logger, metrics } = deps;
  return async (input) => {
    const { jobs: failed, deliveries } = await withTransaction(pool, (tx) => failAbandonedInTx(tx, input.connectionId, new Date(input.at), input.runId ?? null, feedCursors(deps.credentials)));
    startDeliveriesSoon(deps, deliveries);
    logEndedJobs(logger, input.connectionId, failed);
    for (const job of failed) recordJobEnded(metrics, job);
    return failed.map((r) => r.id);
  };
}

/**
 * The cleanup's statements, inside the caller's transaction, with the ended jobs' `sync.failed`
 * (or `sync.cancelled`) events, their feed cursors sealed by `cursors`; the caller logs and counts the ended jobs and starts the deliveries once it committed.
 * Jobs of `runId` (the run cleaning up) are its own, never abandoned: running the cleanup again
 * after the run enqueued (a repeated local activity) leaves them alone.
 *
 * The queued scheduler jobs of earlier runs of a connection that is paused or disabled (it was
 * paused or disabled while no run was there to cancel its queued job: a pause's signal then
 * starts this run) end as the pause or disable would have ended them: cancelled, with
 * `sync.cancelled`, never failed as abandoned. Which is which is decided by one statement that
 * reads the connection's status itself, because every run of every connection runs it first: a
 * connection with nothing left behind costs that one round trip.
 */
export async function failAbandonedInTx(
  tx: PoolClient,
  connectionId: string,
  at: Date,
  runId: string | null,
  cursors: CursorCodec<FeedCursor>,
): Promise<{ jobs: (EndedJob & { id: string })[]; deliveries: string[] }> {
  const rows = await endLeftSchedulerJobs(tx, connectionId, at, ABANDONED_REASON, runId, STOPPED_QUEUED_JOB_REASONS);
  if (rows.length === 0) return { jobs: [], deliveries: [] };
  const cancelled = rows.filter((r) => r.status === JOB_STATUS.cancelled);
  const failed = rows.filter((r) => r.status !== JOB_STATUS.cancelled);
  const deliveries: string[] = [];
  for (const job of cancelled) {
    // As a pause or disable cancels a job: its open tasks with it, their seen-sets forgotten.
    deliveries.push(...(await afterJobCancelled(tx, job.id, at, job.last_error, cursors)));
  }
  if (failed.length > 0) {
    // Paging state of full passes that will never finish.
    await forgetSeenOfTasks(tx, await failOpenTasksOfJobs(tx, failed.map((r) => r.id), at, ABANDONED_REASON));
    deliveries.push(...(await emitJobEvents(tx, failed.map((r) => r.id), 'failed', at, cursors)));
  }
  return { jobs: [...cancelled, ...failed], deliveries };
}

/** Logs the jobs a start-up cleanup ended: those failed as abandoned (a warning), those cancelled. */
export function logEndedJobs(logger: ActivityDeps['logger'], connectionId: string, jobs: (EndedJob & { id: string })[]): void {
  const failed = jobs.filter((r) => r.status === 'failed').map((r) => r.id);
  const cancelled = jobs.filter((r) => r.status === 'cancelled').map((r) => r.id);
  if (failed.length > 0) logger.warn({ connection_id: connectionId, job_ids: failed }, 'failed abandoned sync jobs');
  if (cancelled.length > 0) logger.info({ connection_id: connectionId, job_ids: cancelled }, 'cancelled queued sync jobs of a paused or disabled connection');
}
