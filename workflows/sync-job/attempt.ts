// One attempt of a job: its unfinished tasks run once (serially, or in bounded batches), and the
// durable wait before the next attempt.
import { ActivityCancellationType, isCancellation, patched, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities, PreparedJob } from '../../temporal/activities';
import type { JobBookkeeping } from './bookkeeping';
import { INTERRUPTIONS_PATCH, failureOf, type TaskFailure } from './failures';

// Paging can take long; liveness comes from per-page heartbeats, which also carry cancellation.
// On cancel the workflow waits for its running tasks (every task of a batch) to stop, each after
// the page in hand is stored, before its cleanup marks the job cancelled, so no page is fetched
// after a job shows `cancelled`. One quick retry absorbs a blip (a transient error, a lost
// worker); beyond that the job's policy decides.
const { syncTask } = proxyActivities<Activities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '60 seconds',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: { initialInterval: '5 seconds', maximumAttempts: 2 },
});

/**
 * Marks the workflow versions in which a cancelled batch of tasks (`max_parallel_tasks` > 1) waits
 * for every one of its tasks to stop before the cancellation reaches the job's cleanup, so no task
 * of the job reads the provider after the job shows `cancelled`. Asked only when a batch of more
 * than one task rejects; runs recorded before it replay going on as soon as the first task stopped.
 */
export const CANCEL_WAITS_FOR_BATCH_PATCH = 'cancel-waits-for-batch';

/** Runs the job's unfinished tasks once; returns the failures (none: the attempt succeeded). */
export async function runAttempt(jobId: string, prepared: PreparedJob): Promise<TaskFailure[]> {
  const failures: TaskFailure[] = [];
  const runTask = async (task: PreparedJob['tasks'][number]) => {
    try {
      const result = await syncTask({ jobId, taskId: task.taskId, resourceType: task.resourceType, mode: prepared.mode });
      // Skipped: the task was held by an earlier attempt or ended elsewhere; it did not run.
      if (result.status === 'skipped' && patched(INTERRUPTIONS_PATCH)) {
        failures.push({
          taskId: task.taskId, resourceType: task.resourceType, kind: 'interrupted',
          message: 'interrupted: the task was held by an earlier attempt or ended elsewhere',
        });
      }
    } catch (err) {
      if (isCancellation(err)) throw err;
      failures.push({ taskId: task.taskId, ...failureOf(err, task.resourceType) });
    }
  };
  // Serially by default; `max_parallel_tasks` in the connection's config allows a bounded batch.
  for (let i = 0; i < prepared.tasks.length; i += prepared.parallelism) {
    const batch = prepared.tasks.slice(i, i + prepared.parallelism).map(runTask);
    try {
      await Promise.all(batch);
    } catch (err) {
      // Cancelled: the batch's other tasks stop too (each after the page in hand is stored).
      if (batch.length > 1 && patched(CANCEL_WAITS_FOR_BATCH_PATCH)) await Promise.allSettled(batch);
      throw err;
    }
  }
  return failures;
}

/**
 * Marks the workflow versions in which a job claimed again after a wait waits out a circuit-breaker
 * pause that began meanwhile (another job of the connection failed it open) before its next
 * attempt. Reached only when a claim reports such a pause; runs recorded before it replay going on
 * at once.
 */
export const RECLAIM_WAITS_FOR_BREAKER_PATCH = 'reclaim-waits-for-breaker';

/** The job's error while it waits for its connection's breaker pause. */
export const PAUSED_BY_BREAKER = 'waiting: the connection is paused by its circuit breaker';

/**
 * Sleeps durably until `until` (the job shows `retrying` meanwhile), then claims the job again; if
 * the connection's circuit breaker paused it meanwhile, waits for the pause to end and claims
 * again. False when it can no longer be claimed (finished or cancelled elsewhere while waiting).
 */
export async function waitAndReclaim(books: JobBookkeeping, jobId: string, workflowId: string, until: number): Promise<boolean> {
  for (let wait = until - Date.now(); ; ) {
    if (wait > 0) await sleep(wait);
    const claimed = await books.claimJob({ jobId, workflowId, at: Date.now() });
    if (claimed === null) return false;
    const pausedUntil = claimed.pausedUntil ?? null;
    if (pausedUntil === null || pausedUntil <= Date.now() || !patched(RECLAIM_WAITS_FOR_BREAKER_PATCH)) return true;
    const at = Date.now();
    await books.markJobRetrying({ jobId, at, startedAt: at, retryAfter: pausedUntil, kind: 'paused', error: PAUSED_BY_BREAKER, failedCount: 0 });
    wait = pausedUntil - Date.now();
  }
}
