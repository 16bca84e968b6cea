// Immediate mode (seed 003): the sync of a connection run at once, returning counts and writing
// no job or task rows. Callers await the result of `immediate-sync:<connection_id>:<request_id>`.
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ImmediateSyncResult } from '../activities/sync-immediately';

const { syncImmediately } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { maximumAttempts: 3 },
});

/** Runs an immediate sync and returns per-resource counts. */
export async function immediateSyncWorkflow(input: {
  connectionId: string;
  mode: 'incremental' | 'full';
  resourceTypes?: string[];
}): Promise<ImmediateSyncResult> {
  return syncImmediately(input);
}
