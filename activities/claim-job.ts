import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';

/** The job as its runner needs it. */
export interface ClaimedJob {
  jobId: string;
  connectionId: string;
  jobType: 'incremental' | 'full';
  retryCount: number;
}

/**
 * Claims a job for the workflow `workflowId`: `queued|retrying → running` under
 * `FOR UPDATE SKIP LOCKED`. A job already running under the same workflow id is claimed again
 * (a retried activity, or the same job workflow resuming); a job claimed by anyone else, locked
 * by another claimer, or finished is not run twice: null.
 */
export function claimJob({ pool }: ActivityDeps) {
  return async (input: { jobId: string; workflowId: string; at: number }): Promise<ClaimedJob | null> =>
    withTransaction(pool, async (tx) => {
      const { rows } = await tx.query(
        `select id, connection_id, job_type, status, workflow_id, retry_count from sync_jobs
          where id = $1 for update skip locked`,
        [input.jobId],
      );
      const job = rows[0];
      if (!job) return null;
      const claimable =
        job.status === 'queued' || job.status === 'retrying' || (job.status === 'running' && job.workflow_id === input.workflowId);
      if (!claimable) return null;
      await tx.query(
        `update sync_jobs set status = 'running', started_at = coalesce(started_at, $2), workflow_id = $3, retry_after = null
          where id = $1`,
        [input.jobId, new Date(input.at), input.workflowId],
      );
      return { jobId: job.id, connectionId: job.connection_id, jobType: job.job_type, retryCount: job.retry_count };
    });
}
