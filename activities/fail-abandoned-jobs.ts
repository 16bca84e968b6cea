import type { PoolClient } from 'pg';
import { failAbandonedSchedulerJobs, type EndedJob } from '../db/models/jobs';
import { failOpenTasksOfJobs } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { recordJobEnded } from '../lib/metrics';

/** Why a job was failed by a connection workflow's start-up cleanup. */
export const ABANDONED_REASON =
  'abandoned: the connection workflow that owned this job ended (terminated or crashed) before the job finished';

/**
 * Start-up cleanup of a connection workflow: a job the connection workflow created (a scheduler
 * trigger; API-requested jobs run in workflows of their own) still active belongs to an earlier
 * run that has ended (each connection has one workflow, and its child jobs are terminated with
 * it), so it is marked `failed` with a clear reason and `abandoned_at`, never left "stuck
 * running". Returns the ids it failed.
 */
export function failAbandonedJobs({ pool, logger, metrics }: ActivityDeps): Activities['failAbandonedJobs'] {
  return async (input) => {
    const failed = await withTransaction(pool, (tx) => failAbandonedInTx(tx, input.connectionId, new Date(input.at), input.runId ?? null));
    if (failed.length > 0) logger.warn({ connection_id: input.connectionId, job_ids: failed.map((r) => r.id) }, 'failed abandoned sync jobs');
    for (const job of failed) recordJobEnded(metrics, job);
    return failed.map((r) => r.id);
  };
}

/**
 * The cleanup's statements, inside the caller's transaction; the caller logs and counts the ended
 * jobs. Jobs of `runId` (the run cleaning up) are its own, never abandoned: running the cleanup
 * again after the run enqueued (a repeated local activity) leaves them alone.
 */
export async function failAbandonedInTx(tx: PoolClient, connectionId: string, at: Date, runId: string | null): Promise<(EndedJob & { id: string })[]> {
  const rows = await failAbandonedSchedulerJobs(tx, connectionId, at, ABANDONED_REASON, runId);
  if (rows.length > 0) await failOpenTasksOfJobs(tx, rows.map((r) => r.id), at, ABANDONED_REASON);
  return rows;
}
