import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';
import { endedJobColumns, recordJobEnded, type EndedJob } from './job-metrics';

/**
 * Marks a job that has not finished, and its open tasks, `cancelled` with a reason. Idempotent:
 * a finished job is left alone and false is returned.
 */
export function cancelJob({ pool, logger, metrics }: ActivityDeps) {
  return async (input: { jobId: string; reason: string; at: number }): Promise<boolean> => {
    const cancelled = await withTransaction(pool, async (tx) => {
      const job = await tx.query<EndedJob & { connection_id: string }>(
        `update sync_jobs set status = 'cancelled', finished_at = $2, last_error = $3
          where id = $1 and status in ('queued', 'running', 'retrying')
          returning connection_id, status, ${endedJobColumns()}`,
        [input.jobId, new Date(input.at), input.reason],
      );
      if (!job.rowCount) return null;
      await tx.query(
        `update sync_tasks set status = 'cancelled', completed_at = $2, error_message = $3
          where job_id = $1 and status in ('pending', 'processing')`,
        [input.jobId, new Date(input.at), input.reason],
      );
      // A cancelled full pass never reaches its deletion step: its seen-set is of no further use.
      await tx.query('delete from sync_seen s using sync_tasks t where t.job_id = $1 and s.task_id = t.id', [input.jobId]);
      logger.info({ job_id: input.jobId, connection_id: job.rows[0]!.connection_id, reason: input.reason }, 'sync job cancelled');
      return job.rows[0]!;
    });
    if (!cancelled) return false;
    recordJobEnded(metrics, cancelled);
    return true;
  };
}
