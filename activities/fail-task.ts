import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';

/** Records a task's failure (after its activity gave up) and counts it on the job. Idempotent. */
export function failTask({ pool }: ActivityDeps) {
  return async (input: { jobId: string; taskId: string; error: string }): Promise<void> => {
    await withTransaction(pool, async (tx) => {
      const failed = await tx.query(
        `update sync_tasks set status = 'failed', error_message = $2, completed_at = now()
          where id = $1 and status in ('pending', 'processing')`,
        [input.taskId, input.error],
      );
      if (failed.rowCount) {
        await tx.query('delete from sync_seen where task_id = $1', [input.taskId]);
        await tx.query('update sync_jobs set failed_tasks = failed_tasks + 1 where id = $1', [input.jobId]);
      }
    });
  };
}
