// The reconcile tick: one long-running workflow per namespace (id `synctide-reconcile`) that
// ensures every connection has its workflow, stops those of disabled connections and stores the
// backlog and freshness counts, every SCHEDULER_TICK_SECONDS.
import { continueAsNew, isCancellation, log, patched, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../temporal/activities';
import type { ReconcileInput, ReconcileWorkflow } from '../temporal/reconcile';
import { BOOKKEEPING } from './activity-options';

const { reconcileConnections, reapStaleTasks, deleteOldJobs } = proxyActivities<Activities>({
  ...BOOKKEEPING,
  // A tick walks every connection in batches; give it room, and retry it on the next tick instead.
  startToCloseTimeout: '5 minutes',
  retry: { ...BOOKKEEPING.retry, maximumAttempts: 3 },
});

const DAY_MS = 24 * 60 * 60 * 1000;

const TICKS_PER_RUN = 100;

/**
 * Marks the workflow versions in which a retention cleanup that failed is tried again at the next
 * tick (its day starts only once one succeeded). Recorded only by a run whose cleanup failed; runs
 * recorded before it replay waiting a day after the failure.
 */
const RETENTION_RETRY_PATCH = 'retention-retried-next-tick';

/**
 * Ticks forever; continues as new every 100 ticks (or sooner if the server suggests it). The
 * period and the retention come from the worker that ran the latest tick (its configuration is
 * reported with the tick's result), so a restart with new values takes effect at the next tick;
 * the input's values serve until a tick has reported.
 */
export async function reconcileWorkflow(input: ReconcileInput): Promise<never> {
  let lastRetentionAt = input.lastRetentionAt ?? 0;
  let tickSeconds = input.tickSeconds;
  let retentionDays = input.retentionDays ?? 7;
  for (let tick = 0; tick < TICKS_PER_RUN && !workflowInfo().continueAsNewSuggested; tick++) {
    const result = await attempt('reconcile', () => reconcileConnections({ at: Date.now() }));
    if (result?.settings) ({ tickSeconds, retentionDays } = result.settings);
    // A task with no heartbeat for 5 minutes belongs to a worker that is gone.
    await attempt('reap stale tasks', () => reapStaleTasks({ at: Date.now(), staleAfterSeconds: 300 }));
    if (Date.now() - lastRetentionAt >= DAY_MS) {
      const deleted = await attempt('retention cleanup', () => deleteOldJobs({ at: Date.now(), retentionDays }));
      // A failed cleanup is due again at the next tick, as its warning says.
      if (deleted !== undefined || !patched(RETENTION_RETRY_PATCH)) lastRetentionAt = Date.now();
    }
    await sleep(tickSeconds * 1000);
  }
  return continueAsNew<ReconcileWorkflow>({ ...input, tickSeconds, retentionDays, lastRetentionAt });
}

/** Runs one step of a tick and returns its result; a failure is logged and the next tick tries again. */
async function attempt<T>(step: string, run: () => Promise<T>): Promise<T | undefined> {
  try {
    return await run();
  } catch (err) {
    if (isCancellation(err)) throw err;
    log.warn(`${step} failed; the next tick tries again`, { error: String(err) });
    return undefined;
  }
}

reconcileWorkflow satisfies ReconcileWorkflow;
