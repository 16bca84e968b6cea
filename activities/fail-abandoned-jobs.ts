import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';
import { endedJobColumns, recordJobEnded, type EndedJob } from './job-metrics';

/** Why a job was failed by a connection workflow's start-up cleanup. */
export const ABANDONED_REASON =
  'abandoned: the connection workflow that owned this job ended (terminated or crashed) before the job finished';

/**
 * Start-up cleanup of a connection workflow: a job the connection workflow created (trigger
 * `schedule` or `manual`; API-requested jobs run in workflows of their own) still queued, running or
 * retrying belongs to an earlier run that has ended (each connection has one workflow, and its
 * child jobs are terminated with it), so it is marked `failed` with a clear reason and
 * `abandoned_at`, never left "stuck running". Returns the ids it failed.
 */
export function failAbandonedJobs({ pool, logger, metrics }: ActivityDeps) {
  return async (input: { connectionId: string; at: number }): Promise<string[]> => {
    const failed = await withTransaction(pool, async (tx) => {
      const { rows } = await tx.query<EndedJob & { id: string }>(
        `update sync_jobs set status = 'failed', finished_at = $2, abandoned_at = $2, last_error = $3
          where connection_id = $1 and status in ('queued', 'running', 'retrying')
            and trigger in ('schedule', 'manual')
          returning id, status, ${endedJobColumns()}`,
        [input.connectionId, new Date(input.at), ABANDONED_REASON],
      );
      const ids = rows.map((r) => r.id);
      if (ids.length === 0) return rows;
      await tx.query(
        `update sync_tasks set status = 'failed', completed_at = $2, error_message = $3
          where job_id = any($1::uuid[]) and status in ('pending', 'processing')`,
        [ids, new Date(input.at), ABANDONED_REASON],
      );
      logger.warn({ connection_id: input.connectionId, job_ids: ids }, 'failed abandoned sync jobs');
      return rows;
    });
    for (const job of failed) recordJobEnded(metrics, job);
    return failed.map((r) => r.id);
  };
}
