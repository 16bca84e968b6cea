// One sync job, run as child workflow `sync-job:<job_id>` of its connection workflow (visible and
// cancellable on its own in the Web UI and with `temporal workflow cancel`). Failures are decided
// by the pure policies in policy/ and every wait is a durable sleep, visible in the Web UI and as
// the job's `retry_after`.
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  proxyActivities,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { PreparedJob } from '../activities/prepare-job';
import { rateLimitBackoff } from '../policy/rate-limit';
import { decideFailure, retryDelaySeconds } from '../policy/retry';
import { BOOKKEEPING } from './activity-options';

const acts = proxyActivities<Activities>(BOOKKEEPING);

// Paging can take long; liveness comes from per-page heartbeats, which also carry cancellation.
// On cancel the workflow waits for the task to stop (after the page in hand is stored) before its
// cleanup marks the job cancelled, so no page is fetched after a job shows `cancelled`. One quick
// retry absorbs a blip (a transient error, a lost worker); beyond that the job's policy decides.
const { syncTask } = proxyActivities<Activities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '60 seconds',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: { initialInterval: '5 seconds', maximumAttempts: 2 },
});

/** Input of a job workflow. */
export interface SyncJobInput {
  jobId: string;
  connectionId: string;
}

/** How a job ended; `skipped` when it was not claimable (claimed elsewhere or already finished). */
export interface SyncJobResult {
  jobId: string;
  status: 'completed' | 'failed' | 'cancelled' | 'skipped';
  error?: string;
}

/** A task that failed in an attempt. */
interface TaskFailure {
  taskId: string;
  resourceType: string;
  kind: 'rate_limited' | 'transient' | 'permanent' | 'error';
  message: string;
  retryAfterSeconds?: number;
}

/**
 * Claims the job, resolves its mode, creates one task per resource type and runs them (serially by
 * default). An attempt whose tasks all complete ends the job `completed` and closes the
 * connection's circuit breaker. Otherwise:
 * - a rate limit waits `max(hint, exponential)` plus jitter (seed 002) and retries, capped
 *   separately and never counted toward the breaker;
 * - a permanent error (bad credentials, invalid config) fails the job at once with its message;
 * - any other failure counts toward the breaker and retries after 1, 2, 4, 8, 16 min (±10 %),
 *   waiting out a breaker pause, until `max_retries` is spent; then the job is `failed`.
 * Cancellation stops the running task within one page and marks the job and its open tasks
 * `cancelled` in a non-cancellable cleanup step.
 */
export async function syncJobWorkflow(input: SyncJobInput): Promise<SyncJobResult> {
  const { jobId } = input;
  const workflowId = workflowInfo().workflowId;
  const startedAt = Date.now();
  if (!(await acts.claimJob({ jobId, workflowId, at: startedAt }))) return { jobId, status: 'skipped' };
  try {
    const prepared = await acts.prepareJob({ jobId, at: Date.now() });
    let retryCount = prepared.retryCount;
    let rateLimitRetries = prepared.rateLimitRetryCount;
    if (prepared.pausedUntil !== null && prepared.pausedUntil > Date.now()) {
      const error = 'waiting: the connection is paused by its circuit breaker';
      await acts.markJobRetrying({ jobId, at: Date.now(), startedAt, retryAfter: prepared.pausedUntil, kind: 'paused', error, failedCount: 0 });
      if (!(await waitAndReclaim(jobId, workflowId, prepared.pausedUntil))) return { jobId, status: 'skipped' };
    }
    for (;;) {
      const attemptStartedAt = Date.now();
      const failures = await runAttempt(jobId, prepared);
      if (failures.length === 0) {
        await acts.recordAttemptSuccess({ connectionId: prepared.connectionId, at: Date.now() });
        const status = await acts.finishJob({ jobId, outcome: 'completed', at: Date.now(), startedAt: attemptStartedAt });
        return { jobId, status: status ?? 'completed' };
      }
      const summary = summarise(failures, prepared.tasks.length);
      const rateLimited = failures.filter((f) => f.kind === 'rate_limited');
      const permanent = failures.some((f) => f.kind === 'permanent');

      if (!permanent && rateLimited.length === failures.length) {
        if (rateLimitRetries >= prepared.rateLimit.retryCap) {
          return await failJob(jobId, failures, `${summary} (gave up after ${rateLimitRetries} rate-limit retries)`, attemptStartedAt);
        }
        const hints = rateLimited.map((f) => f.retryAfterSeconds ?? 0);
        const { finalSeconds } = rateLimitBackoff({
          attempts: rateLimitRetries,
          hintSeconds: Math.max(...hints) || undefined,
          policy: prepared.rateLimit.policy,
          random: Math.random,
        });
        const retryAfter = Date.now() + Math.ceil(finalSeconds * 1000);
        await acts.markJobRetrying({
          jobId, at: Date.now(), startedAt: attemptStartedAt, retryAfter, kind: 'rate_limited', error: summary, failedCount: failures.length,
        });
        rateLimitRetries += 1;
        if (!(await waitAndReclaim(jobId, workflowId, retryAfter))) return { jobId, status: 'skipped' };
        continue;
      }

      const breaker = await acts.recordAttemptFailure({ connectionId: prepared.connectionId, at: Date.now(), error: summary });
      const decision = decideFailure({ retryCount, maxRetries: prepared.maxRetries, permanent });
      if (decision.action === 'fail') return await failJob(jobId, failures, summary, attemptStartedAt);
      const delayMs = Math.round(retryDelaySeconds({ retryCount: decision.retryCount, random: Math.random }) * 1000);
      // While the breaker is open the job waits for the pause to end, whichever is later.
      const retryAfter = Math.max(Date.now() + delayMs, breaker.pausedUntil ?? 0);
      await acts.markJobRetrying({
        jobId, at: Date.now(), startedAt: attemptStartedAt, retryAfter, kind: 'failure', error: summary, failedCount: failures.length,
      });
      retryCount = decision.retryCount;
      if (!(await waitAndReclaim(jobId, workflowId, retryAfter))) return { jobId, status: 'skipped' };
    }
  } catch (err) {
    if (isCancellation(err)) {
      await CancellationScope.nonCancellable(() => acts.cancelJob({ jobId, reason: 'cancelled', at: Date.now() }));
      return { jobId, status: 'cancelled' };
    }
    // Preparing failed for good (e.g. invalid configuration): the job fails with that message.
    const error = failureOf(err, '').message;
    const status = await acts.finishJob({ jobId, outcome: 'failed', at: Date.now(), startedAt, error });
    return { jobId, status: status ?? 'failed', error };
  }
}

/** Runs the job's unfinished tasks once; returns the failures (none: the attempt succeeded). */
async function runAttempt(jobId: string, prepared: PreparedJob): Promise<TaskFailure[]> {
  const failures: TaskFailure[] = [];
  const runTask = async (task: PreparedJob['tasks'][number]) => {
    try {
      await syncTask({ jobId, taskId: task.taskId, resourceType: task.resourceType, mode: prepared.mode });
    } catch (err) {
      if (isCancellation(err)) throw err;
      failures.push({ taskId: task.taskId, ...failureOf(err, task.resourceType) });
    }
  };
  // Serially by default; `max_parallel_tasks` in the connection's config allows a bounded batch.
  for (let i = 0; i < prepared.tasks.length; i += prepared.parallelism) {
    await Promise.all(prepared.tasks.slice(i, i + prepared.parallelism).map(runTask));
  }
  return failures;
}

/**
 * Sleeps durably until `until` (the job shows `retrying` meanwhile), then claims the job again.
 * False when it can no longer be claimed (finished or cancelled elsewhere while waiting).
 */
async function waitAndReclaim(jobId: string, workflowId: string, until: number): Promise<boolean> {
  const wait = until - Date.now();
  if (wait > 0) await sleep(wait);
  return (await acts.claimJob({ jobId, workflowId, at: Date.now() })) !== null;
}

async function failJob(jobId: string, failures: TaskFailure[], summary: string, startedAt: number): Promise<SyncJobResult> {
  for (const f of failures) await acts.failTask({ jobId, taskId: f.taskId, error: f.message });
  const status = await acts.finishJob({ jobId, outcome: 'failed', at: Date.now(), startedAt, error: summary, alert: true });
  return { jobId, status: status ?? 'failed', error: summary };
}

function summarise(failures: TaskFailure[], total: number): string {
  return `${failures.length} of ${total} resource types failed: ${failures.map((f) => `${f.resourceType}: ${f.message}`).join('; ')}`;
}

/** The kind and provider-facing reason of a failed activity, without stack or internals. */
function failureOf(err: unknown, resourceType: string): Omit<TaskFailure, 'taskId'> {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    const kind = cause.type === 'rate_limited' || cause.type === 'transient' || cause.type === 'permanent' ? cause.type : 'error';
    const hint = (cause.details?.[0] as { retryAfterSeconds?: number | null } | undefined)?.retryAfterSeconds;
    return { resourceType, kind, message: cause.message, ...(hint != null && { retryAfterSeconds: hint }) };
  }
  return { resourceType, kind: 'error', message: cause instanceof Error ? cause.message : String(cause) };
}
