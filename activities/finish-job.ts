import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';
import { endedJobColumns, recordJobEnded, type EndedJob } from './job-metrics';

/** The end of one attempt of a job. */
export interface FinishJobInput {
  jobId: string;
  outcome: 'completed' | 'failed';
  at: number;
  startedAt: number;
  error?: string;
  /** Raise a `sync_job_failed` alert with the error summary (a job that failed for good). */
  alert?: boolean;
}

/** What the finishing UPDATE returns. */
interface FinishedJob extends EndedJob {
  status: 'completed' | 'failed';
  connection_id: string;
  retry_count: number;
  rate_limit_retry_count: number;
  processed_entities: string;
  failed_tasks: number;
  last_error: string | null;
}

/**
 * Marks a running job `completed` or `failed` and writes its `sync_job_logs` row, in one
 * transaction, and returns the status it wrote. A job with any failed task (e.g. one the stale-task
 * reaper failed behind the workflow's back) is never marked completed. Idempotent: a job that is
 * no longer running is left alone (null), and the log row is unique per (job, attempt).
 */
export function finishJob({ pool, logger, metrics }: ActivityDeps) {
  return async (input: FinishJobInput): Promise<'completed' | 'failed' | null> => {
    const finished = await withTransaction(pool, async (tx) => {
      const { rows } = await tx.query<FinishedJob>(
        `update sync_jobs
            set status = case when $2 = 'completed' and failed_tasks > 0 then 'failed' else $2 end,
                finished_at = $3,
                last_error = case when $2 = 'completed' and failed_tasks > 0
                                  then failed_tasks || ' task(s) failed' else $4 end
          where id = $1 and status = 'running'
          returning connection_id, retry_count, rate_limit_retry_count, processed_entities, failed_tasks, status, last_error,
                    ${endedJobColumns()}`,
        [input.jobId, input.outcome, new Date(input.at), input.error ?? null],
      );
      const job = rows[0];
      if (!job) return null;
      await tx.query(
        `insert into sync_job_logs (job_id, connection_id, attempt, started_at, finished_at, processed_count, failed_count, outcome, error_summary)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         on conflict (job_id, attempt) do nothing`,
        [input.jobId, job.connection_id, job.retry_count + job.rate_limit_retry_count + 1, new Date(input.startedAt), new Date(input.at),
          job.processed_entities, job.failed_tasks, job.status, job.last_error],
      );
      if (input.alert && job.status === 'failed') {
        // One open alert per connection; its context holds the summary only, never credentials.
        await tx.query(
          `insert into alerts (category, severity, connection_id, context)
           values ('sync_job_failed', 'warning', $1, $2)
           on conflict (category, connection_id) where resolved_at is null
           do update set context = excluded.context`,
          [job.connection_id, { job_id: input.jobId, connection_id: job.connection_id, error: job.last_error, failed_at: new Date(input.at).toISOString() }],
        );
      }
      logger.info({ job_id: input.jobId, connection_id: job.connection_id, outcome: job.status }, 'sync job finished');
      return job;
    });
    if (!finished) return null;
    recordJobEnded(metrics, finished);
    return finished.status;
  };
}
