import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';

/**
 * Marks a job that has not finished, and its open tasks, `cancelled` with a reason. Idempotent:
 * a finished job is left alone and false is returned.
 */
export function cancelJob({ pool, logger }: ActivityDeps) {
  return async (input: { jobId: string; reason: string; at: number }): Promise<boolean> =>
    withTransaction(pool, async (tx) => {
      const job = await tx.query(
        `update sync_jobs set status = 'cancelled', finished_at = $2, last_error = $3
          where id = $1 and status in ('queued', 'running', 'retrying') returning connection_id`,
        [input.jobId, new Date(input.at), input.reason],
      );
      if (!job.rowCount) return false;
      await tx.query(
        `update sync_tasks set status = 'cancelled', completed_at = $2, error_message = $3
          where job_id = $1 and status in ('pending', 'processing')`,
        [input.jobId, new Date(input.at), input.reason],
      );
      logger.info({ job_id: input.jobId, connection_id: job.rows[0].connection_id, reason: input.reason }, 'sync job cancelled');
      return true;
    });
}
