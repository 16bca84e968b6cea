// The reconcile tick: one long-running workflow per namespace (id `synctide-reconcile`) that
// ensures every connection has its workflow, stops those of disabled connections and updates the
// backlog gauge, every SCHEDULER_TICK_SECONDS.
import { continueAsNew, isCancellation, log, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { BOOKKEEPING } from './activity-options';

const { reconcileConnections, reapStaleTasks, deleteOldJobs } = proxyActivities<Activities>({
  ...BOOKKEEPING,
  // A tick walks every connection in batches; give it room, and retry it on the next tick instead.
  startToCloseTimeout: '5 minutes',
  retry: { ...BOOKKEEPING.retry, maximumAttempts: 3 },
});

/** Input of the reconcile workflow. */
export interface ReconcileInput {
  tickSeconds: number;
  /** Finished jobs older than this are deleted, once a day. Default 7. */
  retentionDays?: number;
  /** When retention cleanup last ran (epoch ms), carried across continue-as-new. */
  lastRetentionAt?: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

const TICKS_PER_RUN = 100;

/** Ticks forever; continues as new every 100 ticks (or sooner if the server suggests it). */
export async function reconcileWorkflow(input: ReconcileInput): Promise<never> {
  let lastRetentionAt = input.lastRetentionAt ?? 0;
  for (let tick = 0; tick < TICKS_PER_RUN && !workflowInfo().continueAsNewSuggested; tick++) {
    await attempt('reconcile', () => reconcileConnections({ at: Date.now() }));
    // A task with no heartbeat for 5 minutes belongs to a worker that is gone.
    await attempt('reap stale tasks', () => reapStaleTasks({ at: Date.now(), staleAfterSeconds: 300 }));
    if (Date.now() - lastRetentionAt >= DAY_MS) {
      await attempt('retention cleanup', () => deleteOldJobs({ at: Date.now(), retentionDays: input.retentionDays ?? 7 }));
      lastRetentionAt = Date.now();
    }
    await sleep(input.tickSeconds * 1000);
  }
  return continueAsNew<typeof reconcileWorkflow>({ ...input, lastRetentionAt });
}

/** Runs one step of a tick; a failure is logged and the next tick tries again. */
async function attempt(step: string, run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch (err) {
    if (isCancellation(err)) throw err;
    log.warn(`${step} failed; the next tick tries again`, { error: String(err) });
  }
}
