// Bench-only workflows (never part of the Synctide worker): the orchestration floor. A bare
// workflow that runs `activities` no-op activities one after another, with the same activity
// options as Synctide's bookkeeping steps, so that its throughput is what the Temporal server and
// SDK allow on this machine with no database or connector work at all.
import { proxyActivities } from '@temporalio/workflow';
import { BOOKKEEPING } from '../workflows/activity-options';

/** The floor's only activity, registered by the bench worker. */
export interface FloorActivities {
  noop(): Promise<void>;
}

const { noop } = proxyActivities<FloorActivities>(BOOKKEEPING);

/** Runs `activities` no-op activities sequentially (a sync job runs its steps sequentially too). */
export async function floorWorkflow(activities: number): Promise<number> {
  for (let i = 0; i < activities; i++) await noop();
  return activities;
}
