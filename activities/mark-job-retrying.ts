import { ApplicationFailure } from '@temporalio/common';
import { insertAttemptLogs } from '../db/models/job-logs';
import { findJobStatus, markJobRetrying as markRetrying } from '../db/models/jobs';
import { lockOpenTasksOfJobs, reopenTasksForRetry } from '../db/models/tasks';
import { loggedAttempt } from '../policy/job-lifecycle';
import { withTransaction } from '../db/transaction';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';

/** The failure type of a step that found its job no longer running. */
export const JOB_ENDED = 'job_ended';

/**
 * Records a failed attempt and the wait before the next one, in one transaction: the job becomes
 * `retrying` with `retry_after` and `last_error`, `retry_count` (failures) or
 * `rate_limit_retry_count` (rate limits) goes up, its unfinished tasks go back to `pending`
 * (keeping their page progress, so the next attempt resumes), and a `sync_job_logs` row records the
 * attempt. A job that is no longer running or retrying fails the activity with a non-retryable
 * `job_ended` failure.
 */
export function markJobRetrying({ pool, metrics, logger }: ActivityDeps): Activities['markJobRetrying'] {
  return async (input) =>
    withTransaction(pool, async (tx) => {
      // The tasks' rows before the job's, the order a page's statement takes them: a page of an
      // attempt the workflow no longer waits for (its heartbeat timed out) may still be stored.
      await lockOpenTasksOfJobs(tx, [input.jobId]);
      const job = await markRetrying(tx, input.jobId, new Date(input.retryAfter), input.error, input.kind, {
        retryCount: input.retryCount,
        rateLimitRetryCount: input.rateLimitRetryCount,
      });
      if (!job) {
        // Ended elsewhere (reaped, cancelled, failed as abandoned) or gone: retrying cannot help.
        // The workflow ends the run with the status the job has.
        const status = await findJobStatus(tx, input.jobId);
        throw ApplicationFailure.nonRetryable(`job ${input.jobId} ended (${status ?? 'deleted'}) while its workflow ran`, JOB_ENDED);
      }
      await reopenTasksForRetry(tx, input.jobId, input.error);
      if (input.kind === 'paused') return;
      if (input.kind === 'interrupted') {
        logger.warn(
          { job_id: input.jobId, connection_id: job.connection_id, retry_after: new Date(input.retryAfter).toISOString(), error: input.error },
          'sync job attempt interrupted (worker shutdown or crash): job retries soon, counting no failure',
        );
        return;
      }
      await insertAttemptLogs(tx, [{
        jobId: input.jobId,
        connectionId: job.connection_id,
        attempt: loggedAttempt(job, 'retrying'),
        startedAt: new Date(input.startedAt),
        finishedAt: new Date(input.at),
        processedCount: job.processed_entities,
        failedCount: input.failedCount,
        outcome: 'retrying',
        errorSummary: input.error,
      }]);
      metrics.jobRetries.inc({ provider: job.provider });
      const waitSeconds = (input.retryAfter - input.at) / 1000;
      if (input.kind === 'rate_limited') metrics.rateLimitBackoffSeconds.observe(waitSeconds);
      // Every attempt that met a rate limit counts one event, whatever else failed beside it.
      if (input.kind === 'rate_limited' || (input.rateLimitedTasks ?? 0) > 0) metrics.rateLimited.inc({ provider: job.provider });
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
