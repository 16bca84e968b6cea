// One sync job: a job requested over the API (and a scheduled job of a run recorded before the
// inline-scheduled-job patch) runs as workflow `sync-job:<job_id>`, visible and cancellable on its
// own in the Web UI and with `temporal workflow cancel`; a scheduled job runs the same steps inside
// its connection's run (`runSyncJob`). Failures are decided by the pure policies in policy/ and
// every wait is a durable sleep, visible in the Web UI and as the job's `retry_after`.
import { CancellationScope, isCancellation, patched, workflowInfo } from '@temporalio/workflow';
import { rateLimitBackoff } from '../../policy/rate-limit';
import { INTERRUPTED_RETRY_CAP, INTERRUPTED_RETRY_SECONDS, decideFailure, retryDelaySeconds } from '../../policy/retry';
import type { JobOutcome, JobStatus } from '../../policy/vocabulary';
import type { PreparedJob } from '../../temporal/activities';
import type { SyncJobInput, SyncJobResult, SyncJobWorkflow } from '../../temporal/sync-job';
import { PAUSED_BY_BREAKER, runAttempt, waitAndReclaim } from './attempt';
import { LEAN_JOB_PATCH, STEPPED_WAIT_BEHIND_PATCH, jobBookkeeping, type JobBookkeeping } from './bookkeeping';
import { failureOf, summarise, type TaskFailure } from './failures';

/**
 * Marks the workflow versions that mark the job cancelled (in a non-cancellable cleanup step) when
 * it is cancelled while its claim waits, e.g. for its tenant's running-jobs limit. Runs recorded
 * before it replay letting the cancellation end the run with the job still queued (a scheduled
 * job was then failed as abandoned by the connection's next run, which queued the next at once).
 */
const CANCEL_DURING_CLAIM_PATCH = 'cancel-during-claim';

/**
 * Marks the workflow versions whose retry after a failed attempt also waits out the Retry-After
 * of a task the provider rate-limited in that attempt (asked again sooner, it only meets the limit
 * again). Reached only by an attempt with such a task; runs recorded before it replay the retry
 * time without it.
 */
const FAILURE_RETRY_HONOURS_RETRY_AFTER_PATCH = 'failure-retry-honours-retry-after';

/**
 * Marks the workflow versions in which INTERRUPTED_RETRY_CAP counts interruptions in a row: an
 * attempt that was rate-limited or failed ends the row. Reached only by such an attempt after an
 * interruption; runs recorded before it replay counting every interruption of the job.
 */
const INTERRUPTIONS_IN_A_ROW_PATCH = 'interruptions-in-a-row';

/**
 * Claims the job, resolves its mode, creates one task per resource type and runs them (serially by
 * default). An attempt whose tasks all complete ends the job `completed` and closes the
 * connection's circuit breaker. Otherwise:
 * - a rate limit waits `max(hint, exponential)` plus jitter and retries, capped separately and
 *   never counted toward the breaker;
 * - a permanent error (bad credentials, invalid config) fails the job at once with its message;
 * - any other failure counts toward the breaker and retries after 1, 2, 4, 8, 16 min (±10 %),
 *   waiting out a breaker pause, until `max_retries` is spent; then the job is `failed`.
 * Cancellation stops the running task within one page and marks the job and its open tasks
 * `cancelled` in a non-cancellable cleanup step.
 */
export async function syncJobWorkflow(input: SyncJobInput): Promise<SyncJobResult> {
  // Decided before the job's first command; a scheduled job (run inline) is never queued behind one.
  return runSyncJob(input, false, undefined, patched(STEPPED_WAIT_BEHIND_PATCH));
}

/**
 * The steps of one job, owned by the workflow that runs them (its id is stored on the job as
 * `workflow_id`, the only workflow that may claim it again while it runs): the job's own
 * `sync-job:` workflow, or the connection's workflow running its scheduled job inline.
 * `onFirstAttempt` is called once, with the job's mode, when the job has been claimed and any
 * breaker pause waited out, just before its first attempt reads the provider.
 */
export async function runSyncJob(
  input: SyncJobInput,
  leanByRun = false,
  onFirstAttempt?: (mode: PreparedJob['mode']) => void,
  steppedWaitBehind = false,
): Promise<SyncJobResult> {
  const { jobId } = input;
  const workflowId = workflowInfo().workflowId;
  // Decided before the job's first command: runs recorded before the patch replay the old shape.
  // A connection run whose own marker already implies the lean shape passes `leanByRun`.
  const lean = leanByRun || patched(LEAN_JOB_PATCH);
  const stepped = lean && steppedWaitBehind;
  const acts = jobBookkeeping(lean, stepped);
  const startedAt = Date.now();
  let started: PreparedJob | undefined;
  try {
    if (lean) {
      const start = await acts.startJob({ jobId, workflowId, at: startedAt, ...(stepped && { behindRunning: 'stepped' as const }) });
      if (start.outcome === 'not_claimable') return { jobId, status: 'skipped' };
      if (start.outcome === 'invalid') {
        const status = await acts.finishJob({ jobId, outcome: 'failed', at: Date.now(), startedAt, error: start.error });
        return { jobId, status: outcomeOf(status, 'failed'), error: start.error };
      }
      started = start.prepared;
    } else if (!(await acts.claimJob({ jobId, workflowId, at: startedAt }))) {
      return { jobId, status: 'skipped' };
    }
  } catch (err) {
    // Cancelled while the claim waited (its tenant at its running-jobs limit: a durable timer
    // between attempts, the job still queued): the job is cancelled, not left for a later cleanup.
    if (isCancellation(err) && patched(CANCEL_DURING_CLAIM_PATCH)) {
      await CancellationScope.nonCancellable(() => acts.cancelJob({ jobId, reason: 'cancelled', at: Date.now() }));
      return { jobId, status: 'cancelled' };
    }
    throw err;
  }
  try {
    const prepared = started ?? (await acts.prepareJob({ jobId, at: Date.now() }));
    let retryCount = prepared.retryCount;
    let rateLimitRetries = prepared.rateLimitRetryCount;
    if (prepared.pausedUntil !== null && prepared.pausedUntil > Date.now()) {
      await acts.markJobRetrying({ jobId, at: Date.now(), startedAt, retryAfter: prepared.pausedUntil, kind: 'paused', error: PAUSED_BY_BREAKER, failedCount: 0 });
      if (!(await waitAndReclaim(acts, jobId, workflowId, prepared.pausedUntil))) return { jobId, status: 'skipped' };
    }
    // The job reads the provider from here on: whatever was asked before this point is answered by it.
    onFirstAttempt?.(prepared.mode);
    let interruptions = 0;
    for (;;) {
      const attemptStartedAt = Date.now();
      const failures = await runAttempt(jobId, prepared);
      if (failures.length === 0) {
        const status = lean
          ? await acts.completeJob({ jobId, connectionId: prepared.connectionId, at: Date.now(), startedAt: attemptStartedAt })
          : await succeedTheOldWay(acts, jobId, prepared.connectionId, attemptStartedAt);
        return { jobId, status: outcomeOf(status, 'completed') };
      }
      const summary = summarise(failures, prepared.tasks.length);
      const rateLimited = failures.filter((f) => f.kind === 'rate_limited');
      const permanent = failures.some((f) => f.kind === 'permanent');
      // Only rate limits and interruptions: nothing the provider did wrong.
      const notFailed = !permanent && failures.every((f) => f.kind === 'rate_limited' || f.kind === 'interrupted');

      // An attempt that was not only interrupted ends a row of interruptions.
      if (!(notFailed && rateLimited.length === 0) && interruptions > 0 && patched(INTERRUPTIONS_IN_A_ROW_PATCH)) interruptions = 0;

      if (notFailed && rateLimited.length > 0) {
        if (rateLimitRetries >= prepared.rateLimit.retryCap) {
          return await failJob(acts, jobId, failures, `${summary} (gave up after ${rateLimitRetries} rate-limit retries)`, attemptStartedAt);
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
          retryCount, rateLimitRetryCount: rateLimitRetries + 1,
        });
        rateLimitRetries += 1;
        if (!(await waitAndReclaim(acts, jobId, workflowId, retryAfter))) return { jobId, status: 'skipped' };
        continue;
      }

      // A task cut off by a worker shutdown or crash: try again soon, counting nothing.
      if (notFailed && interruptions < INTERRUPTED_RETRY_CAP) {
        const retryAfter = Date.now() + INTERRUPTED_RETRY_SECONDS * 1000;
        await acts.markJobRetrying({
          jobId, at: Date.now(), startedAt: attemptStartedAt, retryAfter, kind: 'interrupted', error: summary, failedCount: failures.length,
        });
        interruptions += 1;
        if (!(await waitAndReclaim(acts, jobId, workflowId, retryAfter))) return { jobId, status: 'skipped' };
        continue;
      }

      const breaker = await acts.recordAttemptFailure({
        connectionId: prepared.connectionId, at: Date.now(), error: summary, attemptKey: `${jobId}:${attemptStartedAt}`,
      });
      const decision = decideFailure({ retryCount, maxRetries: prepared.maxRetries, permanent });
      if (decision.action === 'fail') return await failJob(acts, jobId, failures, summary, attemptStartedAt);
      const delayMs = Math.round(retryDelaySeconds({ retryCount: decision.retryCount, random: Math.random }) * 1000);
      // While the breaker is open the job waits for the pause to end, and a task the provider
      // rate-limited beside the failures waits out the provider's Retry-After: whichever is latest.
      const hinted = rateLimited.length > 0 && patched(FAILURE_RETRY_HONOURS_RETRY_AFTER_PATCH)
        ? Date.now() + Math.max(0, ...rateLimited.map((f) => (Number.isFinite(f.retryAfterSeconds) ? f.retryAfterSeconds! : 0))) * 1000
        : 0;
      const retryAfter = Math.max(Date.now() + delayMs, breaker.pausedUntil ?? 0, hinted);
      await acts.markJobRetrying({
        jobId, at: Date.now(), startedAt: attemptStartedAt, retryAfter, kind: 'failure', error: summary, failedCount: failures.length,
        rateLimitedTasks: rateLimited.length, retryCount: decision.retryCount, rateLimitRetryCount: rateLimitRetries,
      });
      retryCount = decision.retryCount;
      if (!(await waitAndReclaim(acts, jobId, workflowId, retryAfter))) return { jobId, status: 'skipped' };
    }
  } catch (err) {
    if (isCancellation(err)) {
      await CancellationScope.nonCancellable(() => acts.cancelJob({ jobId, reason: 'cancelled', at: Date.now() }));
      return { jobId, status: 'cancelled' };
    }
    // Preparing failed for good (e.g. invalid configuration): the job fails with that message. A
    // step that found the job ended elsewhere (`job_ended`) lands here too: finishing changes
    // nothing and answers the status the job has.
    const error = failureOf(err, '').message;
    const status = await acts.finishJob({ jobId, outcome: 'failed', at: Date.now(), startedAt, error });
    return { jobId, status: outcomeOf(status, 'failed'), error };
  }
}

/** A successful attempt as runs recorded before the lean-job patch end it: two activities. */
async function succeedTheOldWay(acts: JobBookkeeping, jobId: string, connectionId: string, startedAt: number) {
  await acts.recordAttemptSuccess({ connectionId, at: Date.now() });
  return acts.finishJob({ jobId, outcome: 'completed', at: Date.now(), startedAt });
}

/** Records each failed task, then fails the job with `summary` and raises its alert. */
async function failJob(acts: JobBookkeeping, jobId: string, failures: TaskFailure[], summary: string, startedAt: number): Promise<SyncJobResult> {
  for (const f of failures) await acts.failTask({ jobId, taskId: f.taskId, error: f.message });
  const rateLimitedTasks = failures.filter((f) => f.kind === 'rate_limited').length;
  const status = await acts.finishJob({ jobId, outcome: 'failed', at: Date.now(), startedAt, error: summary, alert: true, rateLimitedTasks });
  return { jobId, status: outcomeOf(status, 'failed'), error: summary };
}

/**
 * How the job ended, as finishJob found it: the status it wrote or the one the job already had
 * (finished elsewhere meanwhile); `skipped` when it is not finished at all. A run recorded before
 * finishJob answered with the job's status had only null there: `recorded` is what it meant.
 */
function outcomeOf(status: JobStatus | null, recorded: 'completed' | 'failed'): JobOutcome {
  if (status === null) return recorded;
  return status === 'completed' || status === 'failed' || status === 'cancelled' ? status : 'skipped';
}

syncJobWorkflow satisfies SyncJobWorkflow;
