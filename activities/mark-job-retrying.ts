import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';

/** A failed attempt of a job that will be retried after `retryAfter` (epoch ms). */
export interface MarkJobRetryingInput {
  jobId: string;
  at: number;
  startedAt: number;
  retryAfter: number;
  /**
   * Rate limits count separately and never toward the breaker or `retry_count`; `paused` (waiting
   * out a breaker pause before any attempt) counts nothing and logs no attempt.
   */
  kind: 'rate_limited' | 'failure' | 'paused';
  error: string;
  /** How many tasks failed in the attempt (for its log row). */
  failedCount: number;
}

/**
 * Records a failed attempt and the wait before the next one, in one transaction: the job becomes
 * `retrying` with `retry_after` and `last_error`, `retry_count` (failures) or
 * `rate_limit_retry_count` (rate limits) goes up, its unfinished tasks go back to `pending`
 * (keeping their page progress, so the next attempt resumes), and a `sync_job_logs` row records the
 * attempt.
 */
export function markJobRetrying({ pool, metrics, logger }: ActivityDeps) {
  return async (input: MarkJobRetryingInput): Promise<void> =>
    withTransaction(pool, async (tx) => {
      const { rows } = await tx.query(
        `update sync_jobs
            set status = 'retrying', retry_after = $2, last_error = $3, failed_tasks = 0,
                retry_count = retry_count + case when $4 = 'failure' then 1 else 0 end,
                rate_limit_retry_count = rate_limit_retry_count + case when $4 = 'rate_limited' then 1 else 0 end
          where id = $1 and status in ('running', 'retrying')
          returning connection_id, retry_count, rate_limit_retry_count, processed_entities,
                    (select provider_slug from connections c where c.id = sync_jobs.connection_id) as provider`,
        [input.jobId, new Date(input.retryAfter), input.error, input.kind],
      );
      const job = rows[0];
      if (!job) throw new Error(`job ${input.jobId} is not running`);
      await tx.query(
        `update sync_tasks set status = 'pending', error_message = $2
          where job_id = $1 and status in ('processing', 'failed')`,
        [input.jobId, input.error],
      );
      if (input.kind === 'paused') return;
      await tx.query(
        `insert into sync_job_logs (job_id, connection_id, attempt, started_at, finished_at, processed_count, failed_count, outcome, error_summary)
         values ($1, $2, $3, $4, $5, $6, $7, 'retrying', $8)
         on conflict (job_id, attempt) do nothing`,
        [input.jobId, job.connection_id, job.retry_count + job.rate_limit_retry_count, new Date(input.startedAt),
          new Date(input.at), job.processed_entities, input.failedCount, input.error],
      );
      metrics.jobRetries.inc({ connector_id: job.provider });
      const waitSeconds = (input.retryAfter - input.at) / 1000;
      if (input.kind === 'rate_limited') {
        metrics.rateLimited.inc({ provider: job.provider });
        metrics.rateLimitBackoffSeconds.observe(waitSeconds);
      }
      logger.warn(
        {
          job_id: input.jobId,
          connection_id: job.connection_id,
          provider: job.provider,
          kind: input.kind,
          retry_count: job.retry_count,
          rate_limit_retry_count: job.rate_limit_retry_count,
          wait_seconds: waitSeconds,
          retry_after: new Date(input.retryAfter).toISOString(),
          error: input.error,
        },
        input.kind === 'rate_limited' ? 'rate limited: job waits before retrying' : 'sync job attempt failed: job waits before retrying',
      );
    });
}
