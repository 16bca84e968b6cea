import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';
import { writeNextRun } from '../db/write-next-run';
import type { PlannedRun } from '../policy/schedule';

/** A new time (and for sync-now, a new type and trigger) for a job that has not started. */
export interface RescheduleQueuedJobInput {
  jobId: string;
  connectionId: string;
  scheduledAt: number;
  jobType?: 'incremental' | 'full';
  trigger?: 'schedule' | 'manual';
  plan?: PlannedRun;
}

/**
 * Moves a still-queued job to a new time, re-planned after `updateSchedule` or brought forward by
 * `syncNow`, with the new `metadata.sync` in the same transaction. Returns false when the job is no
 * longer queued. A type change that would collide with another active job of that type keeps the
 * job's type.
 */
export function rescheduleQueuedJob({ pool }: ActivityDeps) {
  return async (input: RescheduleQueuedJobInput): Promise<boolean> =>
    withTransaction(pool, async (tx) => {
      const job = await tx.query(`select job_type from sync_jobs where id = $1 and status = 'queued' for update`, [
        input.jobId,
      ]);
      if (!job.rowCount) return false;
      let jobType: string = job.rows[0].job_type;
      if (input.jobType && input.jobType !== jobType) {
        const clash = await tx.query(
          `select 1 from sync_jobs where connection_id = $1 and job_type = $2 and status in ('queued', 'running', 'retrying')`,
          [input.connectionId, input.jobType],
        );
        if (!clash.rowCount) jobType = input.jobType;
      }
      await tx.query(
        `update sync_jobs set scheduled_at = $2, job_type = $3, trigger = coalesce($4, trigger) where id = $1`,
        [input.jobId, new Date(input.scheduledAt), jobType, input.trigger ?? null],
      );
      if (input.plan) await writeNextRun(tx, input.connectionId, input.plan);
      return true;
    });
}
