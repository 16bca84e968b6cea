// Immediate mode: the sync of a connection run at once, returning counts and writing no job or
// task rows. Callers await the result of `immediate-sync:<connection_id>:<request_id>` until their
// deadline, then cancel it; its execution timeout, set by the caller, bounds it in any case.
import { ActivityCancellationType, patched, proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../temporal/activities';
import type { ImmediateSyncInput, ImmediateSyncResult, ImmediateSyncWorkflow } from '../temporal/immediate-sync';

// Liveness comes from the per-page heartbeats, which also carry the counts so far and the
// cancellation: on cancel the workflow waits until the activity has stopped (after the page in
// hand is stored), so a closed immediate sync fetches nothing more. The start-to-close timeout
// is only a backstop; the workflow's execution timeout is the real bound.
const OPTIONS: ActivityOptions = {
  startToCloseTimeout: '1 hour',
  heartbeatTimeout: '60 seconds',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: { maximumAttempts: 3 },
};
const { syncImmediately } = proxyActivities<Activities>(OPTIONS);

/** Patch: the activity runs on the task queue the input names (immediate syncs' own, with its own slots). */
export const IMMEDIATE_OWN_QUEUE_PATCH = 'immediate-sync-own-queue';

/**
 * Runs an immediate sync and returns per-resource counts. Its activity runs on
 * `input.activityTaskQueue` when given (a run that started before this patch keeps its recorded
 * queue), so immediate syncs take only the slots of the workers serving that queue.
 */
export async function immediateSyncWorkflow(input: ImmediateSyncInput): Promise<ImmediateSyncResult> {
  if (input.activityTaskQueue !== undefined && patched(IMMEDIATE_OWN_QUEUE_PATCH)) {
    return proxyActivities<Activities>({ ...OPTIONS, taskQueue: input.activityTaskQueue }).syncImmediately(input);
  }
  return syncImmediately(input);
}

immediateSyncWorkflow satisfies ImmediateSyncWorkflow;
