// The reconcile tick: one long-running workflow per namespace (id `synctide-reconcile`) that
// ensures every connection has its workflow, stops those of disabled connections and updates the
// backlog gauge, every SCHEDULER_TICK_SECONDS.
import { continueAsNew, isCancellation, log, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { BOOKKEEPING } from './activity-options';

const { reconcileConnections } = proxyActivities<Activities>({
  ...BOOKKEEPING,
  // A tick walks every connection in batches; give it room, and retry it on the next tick instead.
  startToCloseTimeout: '5 minutes',
  retry: { ...BOOKKEEPING.retry, maximumAttempts: 3 },
});

/** Input of the reconcile workflow. */
export interface ReconcileInput {
  tickSeconds: number;
}

const TICKS_PER_RUN = 100;

/** Ticks forever; continues as new every 100 ticks (or sooner if the server suggests it). */
export async function reconcileWorkflow(input: ReconcileInput): Promise<never> {
  for (let tick = 0; tick < TICKS_PER_RUN && !workflowInfo().continueAsNewSuggested; tick++) {
    try {
      await reconcileConnections({ at: Date.now() });
    } catch (err) {
      if (isCancellation(err)) throw err;
      log.warn('reconcile tick failed; the next tick tries again', { error: String(err) });
    }
    await sleep(input.tickSeconds * 1000);
  }
  return continueAsNew<typeof reconcileWorkflow>(input);
}
