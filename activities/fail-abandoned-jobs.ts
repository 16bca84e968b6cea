import type { PoolClient } from 'pg';
import { emitJobEvents } from '../db/events';
import { failAbandonedSchedulerJobs, type EndedJob } from '../db/models/jobs';
import { forgetSeenOfTasks } from '../db/models/seen';
import { failOpenTasksOfJobs } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { recordJobEnded } from '../lib/metrics';
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
 * forgotten, and its `sync.failed` webhook event is written. Returns the ids it failed.
 */
export function failAbandonedJobs(deps: ActivityDeps): Activities['failAbandonedJobs'] {
  const { pool, logger, metrics } = deps;
  return async (input) => {
    const { jobs: failed, deliveries } = await withTransaction(pool, (tx) => failAbandonedInTx(tx, input.connectionId, new Date(input.at), input.runId ?? null));
    startDeliveriesSoon(deps, deliveries);
    if (failed.length > 0) logger.warn({ connection_id: input.connectionId, job_ids: failed.map((r) => r.id) }, 'failed abandoned sync jobs');
    for (const job of failed) recordJobEnded(metrics, job);
    return failed.map((r) => r.id);
  };
}

/**
 * The cleanup's statements, inside the caller's transaction, with the failed jobs' `sync.failed`
 * events; the caller logs and counts the ended jobs and starts the deliveries once it committed.
 * Jobs of `runId` (the run cleaning up) are its own, never abandoned: running the cleanup again
 * after the run enqueued (a repeated local activity) leaves them alone.
 */
export async function failAbandonedInTx(
  tx: PoolClient,
  connectionId: string,
  at: Date,
  runId: string | null,
): Promise<{ jobs: (EndedJob & { id: string })[]; deliveries: string[] }> {
  const rows = await failAbandonedSchedulerJobs(tx, connectionId, at, ABANDONED_REASON, runId);
  if (rows.length === 0) return { jobs: rows, deliveries: [] };
  // Paging state of full passes that will never finish.
  await forgetSeenOfTasks(tx, await failOpenTasksOfJobs(tx, rows.map((r) => r.id), at, ABANDONED_REASON));
  return { jobs: rows, deliveries: await emitJobEvents(tx, rows.map((r) => r.id), 'failed', at) };
}
