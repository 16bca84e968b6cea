// One sync job, run as child workflow `sync-job:<job_id>` of its connection workflow.
import { CancellationScope, isCancellation, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { BOOKKEEPING } from './activity-options';

const { claimJob, finishJob, cancelJob } = proxyActivities<Activities>(BOOKKEEPING);

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
 * Claims the job and runs it. The job's work itself (tasks per resource type) is built by the
 * job-execution issue; until then a claimed job is completed through bookkeeping alone.
 * Cancellation (workflow cancel or the parent's `cancelJob`) marks the job and its open tasks
 * `cancelled` in a non-cancellable cleanup step.
 */
export async function syncJobWorkflow(input: SyncJobInput): Promise<SyncJobResult> {
  const startedAt = Date.now();
  const claimed = await claimJob({ jobId: input.jobId, workflowId: workflowInfo().workflowId, at: startedAt });
  if (!claimed) return { jobId: input.jobId, status: 'skipped' };
  try {
    await finishJob({ jobId: input.jobId, outcome: 'completed', at: Date.now(), startedAt });
    return { jobId: input.jobId, status: 'completed' };
  } catch (err) {
    if (isCancellation(err)) {
      await CancellationScope.nonCancellable(() =>
        cancelJob({ jobId: input.jobId, reason: 'cancelled', at: Date.now() }),
      );
      return { jobId: input.jobId, status: 'cancelled' };
    }
    throw err;
  }
}
