import { lockConnection, writeNextRun } from '../db/models/connections';
import { hasActiveJobOfType, lockQueuedJob, moveQueuedJob } from '../db/models/jobs';
import { withTransaction } from '../db/transaction';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';

/**
 * Moves a still-queued job to a new time, re-planned after `updateSchedule` or brought forward by
 * `syncNow`, with the new `metadata.sync` in the same transaction. Returns false when the job is no
 * longer queued. A type change that would collide with another active job of that type keeps the
 * job's type. With a plan to write, the connection's row is locked before the job's: a pause or
 * disable writes the connection's row and then cancels its queued job, and the opposite order
 * deadlocked with it.
 */
export function rescheduleQueuedJob({ pool }: ActivityDeps): Activities['rescheduleQueuedJob'] {
  return async (input) =>
    withTransaction(pool, async (tx) => {
      if (input.plan) await lockConnection(tx, input.connectionId);
      const job = await lockQueuedJob(tx, input.jobId);
      if (!job) return false;
      let jobType = job.job_type;
      if (input.jobType && input.jobType !== jobType && !(await hasActiveJobOfType(tx, input.connectionId, input.jobType))) {
        jobType = input.jobType;
      }
      await moveQueuedJob(tx, input.jobId, new Date(input.scheduledAt), jobType, input.trigger ?? null);
      if (input.plan) await writeNextRun(tx, input.connectionId, input.plan, input.scheduleVersion);
      return true;
    });
}
