// Contract of immediate mode: a connection's sync run at once, answering with counts and writing
// no job or task rows. Callers await `immediate-sync:<connection_id>:<request_id>`.
import type { SyncMode } from '../policy/vocabulary';

/** Workflow type name of an immediate sync. */
export const IMMEDIATE_SYNC_WORKFLOW = 'immediateSyncWorkflow';

/**
 * Task-queue priority of an immediate sync (1 is the highest; unset work runs at the server's
 * default, 3). A caller waits on the answer, so wherever its workflow tasks and activity share a
 * queue with other work (the main queue when no immediate-sync queue is configured) they go ahead
 * of what is backed up there. One tenant cannot crowd them: it holds at most its immediate-sync
 * limit of such workflows at once.
 */
export const IMMEDIATE_SYNC_PRIORITY = 1;

/** What to sync at once. */
export interface ImmediateSyncInput {
  connectionId: string;
  mode: SyncMode;
  resourceTypes?: string[];
  /**
   * The task queue its activity runs on (IMMEDIATE_SYNC_TASK_QUEUE, served by workers with their
   * own slot limit); absent, the workflow's own queue.
   */
  activityTaskQueue?: string;
}

/** What one resource of an immediate sync fetched and wrote. */
export interface ResourceCounts {
  resourceType: string;
  entityCount: number;
  writtenCount: number;
  pages: number;
}

/** Per-resource counts of an immediate sync. */
export interface ImmediateSyncResult {
  connectionId: string;
  mode: SyncMode;
  resources: ResourceCounts[];
}

/**
 * The heartbeat details of the immediate-sync activity, sent after each stored page: the counts
 * so far, the resource in progress last. A caller whose deadline passed reads them to say what
 * was fetched.
 */
export interface ImmediateSyncProgress {
  resources: ResourceCounts[];
}

/** The immediate-sync workflow's signature, which clients run it by. */
export type ImmediateSyncWorkflow = (input: ImmediateSyncInput) => Promise<ImmediateSyncResult>;
