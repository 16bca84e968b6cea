import { raiseAlert } from '../db/models/alerts';
import { insertAttemptLogs } from '../db/models/job-logs';
import type { PoolClient } from 'pg';
import { findJobStatus, finishRunningJob, type FinishedJob } from '../db/models/jobs';
import { emitJobEvent } from '../db/events';
import { withTransaction } from '../db/transaction';
import type { CursorCodec, FeedCursor } from '../policy/cursors';
import { loggedAttempt } from '../policy/job-lifecycle';
import type { JobStatus } from '../policy/vocabulary';
import type { Activities, FinishJobInput } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import { startDeliveriesSoon } from './webhook-deliveries';

/**
 * Marks a running job `completed` or `failed` and writes its `sync_job_logs` row, in one
 * transaction, and returns the status it wrote. A job with a failed or unfinished task (e.g. one
 * the stale-task reaper failed behind the workflow's back) is never marked completed. With
 * `alert`, a failed job raises (or refreshes) the connection's one open `sync_job_failed` alert.
 * Idempotent: a job that is no longer running is left alone and its status as it is returned, and
 * the log row is unique per (job, attempt). An attempt with a rate-limited task counts one
 * rate-limit event. The job's `sync.completed` or `sync.failed` webhook event is written in the
 * same transaction and delivered after it.
 */
export function finishJob(deps: ActivityDeps): Activities['finishJob'] {
  return async (input) => {
    const deliveries: string[] = [];
    const finished = await withTransaction(deps.pool, (tx) => finishInTx(tx, input, deliveries, feedCursors(deps.credentials)));
    return afterFinish(deps, input, finished, deliveries);
  };
}

/**
 * Finishing, inside the caller's transaction: the job's end, its attempt's log row, its alert and
 * its webhook event (its feed cursor sealed by `cursors`), whose new deliveries' ids are added to
 * `deliveries`.
 */
export async function finishInTx(tx: PoolClient, input: FinishJobInput, deliveries: string[], cursors: CursorCodec<FeedCursor>): Promise<FinishedJob | null> {
  const at = new Date(input.at);
  const job = await finishRunningJob(tx, input.jobId, input.outcome, at, input.error ?? null);
  if (!job) return null;
  await insertAttemptLogs(tx, [{
    jobId: input.jobId,
    connectionId: job.connection_id,
    attempt: loggedAttempt(job, job.status),
    startedAt: new Date(input.startedAt),
    finishedAt: at,
    processedCount: job.processed_entities,
    failedCount: job.failed_tasks,
    outcome: job.status,
    errorSummary: job.last_error,
  }]);
  if (input.alert && job.status === 'failed') {
    await raiseAlert(tx, 'sync_job_failed', job.connection_id, {
      job_id: input.jobId,
      connection_id: job.connection_id,
      error: job.last_error,
      failed_at: at.toISOString(),
    }, { replace: true });
  }
  deliveries.push(...(await emitJobEvent(tx, input.jobId, job.status, at, cursors)));
  return job;
}

/**
 * Once the finishing transaction committed: starts its webhook deliveries, logs and counts the
 * job that ended, or, when it had ended already, reads the status it has. Returns the job's status.
 */
export async function afterFinish(
  deps: Pick<ActivityDeps, 'pool' | 'logger' | 'metrics' | 'temporal' | 'taskQueue'>,
  input: FinishJobInput,
  finished: FinishedJob | null,
  deliveries: string[],
): Promise<JobStatus | null> {
  const { pool, logger, metrics } = deps;
  startDeliveriesSoon(deps, deliveries);
  if (!finished) return findJobStatus(pool, input.jobId);
  logger.info({ job_id: input.jobId, connection_id: finished.connection_id, outcome: finished.status }, 'sync job finished');
  recordJobEnded(metrics, finished);
  if ((input.rateLimitedTasks ?? 0) > 0) metrics.rateLimited.inc({ provider: finished.provider });
  return finished.status;
}
