// One sync job, run as child workflow `sync-job:<job_id>` of its connection workflow (visible and
// cancellable on its own in the Web UI and with `temporal workflow cancel`).
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import {
  ActivityCancellationType,
  CancellationScope,
  isCancellation,
  proxyActivities,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { PreparedJob } from '../activities/prepare-job';
import { BOOKKEEPING } from './activity-options';

const { claimJob, prepareJob, finishJob, cancelJob, failTask } = proxyActivities<Activities>(BOOKKEEPING);

// Paging can take long; liveness comes from per-page heartbeats, which also carry cancellation.
// On cancel the workflow waits for the task to stop (after the page in hand is stored) before its
// cleanup marks the job cancelled, so no page is fetched after a job shows `cancelled`.
const { syncTask } = proxyActivities<Activities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '60 seconds',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
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

/**
 * Claims the job, resolves its mode, creates one task per resource type and runs them serially.
 * The job ends `completed` when every task completed and `failed` (with a summary naming the
 * failed resources) when any failed; a `sync_job_logs` row records the attempt. Cancellation
 * (the parent's `cancelJob` or `temporal workflow cancel`) stops the running task within one page
 * and marks the job and its open tasks `cancelled` in a non-cancellable cleanup step.
 */
export async function syncJobWorkflow(input: SyncJobInput): Promise<SyncJobResult> {
  const startedAt = Date.now();
  const claimed = await claimJob({ jobId: input.jobId, workflowId: workflowInfo().workflowId, at: startedAt });
  if (!claimed) return { jobId: input.jobId, status: 'skipped' };
  try {
    const prepared = await prepareJob({ jobId: input.jobId });
    const failures: string[] = [];
    const runTask = async (task: PreparedJob['tasks'][number]) => {
      try {
        await syncTask({ jobId: input.jobId, taskId: task.taskId, resourceType: task.resourceType, mode: prepared.mode });
      } catch (err) {
        if (isCancellation(err)) throw err;
        const message = failureMessage(err);
        await failTask({ jobId: input.jobId, taskId: task.taskId, error: message });
        failures.push(`${task.resourceType}: ${message}`);
      }
    };
    // Serially by default; `max_parallel_tasks` in the connection's config allows a bounded batch.
    for (let i = 0; i < prepared.tasks.length; i += prepared.parallelism) {
      await Promise.all(prepared.tasks.slice(i, i + prepared.parallelism).map(runTask));
    }
    const error = failures.length
      ? `${failures.length} of ${prepared.tasks.length} resource types failed: ${failures.join('; ')}`
      : undefined;
    const written = await finishJob({
      jobId: input.jobId,
      outcome: failures.length === 0 ? 'completed' : 'failed',
      at: Date.now(),
      startedAt,
      error,
    });
    return { jobId: input.jobId, status: written ?? (failures.length === 0 ? 'completed' : 'failed'), error };
  } catch (err) {
    if (isCancellation(err)) {
      await CancellationScope.nonCancellable(() => cancelJob({ jobId: input.jobId, reason: 'cancelled', at: Date.now() }));
      return { jobId: input.jobId, status: 'cancelled' };
    }
    // Preparing failed for good (e.g. invalid configuration): the job fails with that message.
    const error = failureMessage(err);
    await finishJob({ jobId: input.jobId, outcome: 'failed', at: Date.now(), startedAt, error });
    return { jobId: input.jobId, status: 'failed', error };
  }
}

/** The provider-facing reason of a failed activity, without stack or internals. */
function failureMessage(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure) return cause.message;
  return cause instanceof Error ? cause.message : String(cause);
}
