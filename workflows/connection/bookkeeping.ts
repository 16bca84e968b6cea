// The connection workflow's Postgres bookkeeping, in one of two shapes. Runs started since the
// lean-cycle patch do it as local activities, merged where one transaction does the work of
// several (a cycle's start is one `openCycle`), so a timer-driven cycle costs the fewest workflow
// tasks Temporal allows. Runs recorded before it replay the regular activities they called.
import { proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities, ConnectionContext } from '../../temporal/activities';
import type { Intents } from '../../temporal/connection';
import { BOOKKEEPING, LOCAL_BOOKKEEPING } from '../activity-options';

const regular = proxyActivities<Activities>(BOOKKEEPING);
const local = proxyLocalActivities<Activities>(LOCAL_BOOKKEEPING);

/** Marks the workflow versions whose bookkeeping runs as local, merged activities. */
export const LEAN_CYCLE_PATCH = 'lean-cycle';

/** What the loop asks of Postgres. */
export interface Bookkeeping {
  /**
   * Opens a cycle: on a run's first call (`cleanup`) fails the jobs an earlier run left active,
   * stores pending intents (a legacy schedule change, pause or resume), then reads the connection
   * with its stored schedule, which answers any pending `replan`.
   */
  openCycle(connectionId: string, intents: Intents, cleanup: boolean): Promise<ConnectionContext | null>;
  /** Stores pending intents: a schedule change, then a pause or resume. */
  applyIntents(connectionId: string, intents: Intents): Promise<void>;
  enqueueJob: Activities['enqueueJob'];
  rescheduleQueuedJob: Activities['rescheduleQueuedJob'];
  cancelJob: Activities['cancelJob'];
}

/** The bookkeeping of a run: local and merged (`lean`), or the regular activities of older runs. */
export function bookkeeping(lean: boolean): Bookkeeping {
  const acts = lean ? local : regular;
  const applyIntents = async (connectionId: string, intents: Intents) => {
    if (intents.schedule) {
      const change = intents.schedule;
      intents.schedule = null;
      await acts.saveSchedule({ connectionId, change });
    }
    if (intents.status) {
      const status = intents.status;
      intents.status = null;
      await acts.setConnectionStatus({ connectionId, status });
    }
  };
  return {
    async openCycle(connectionId, intents, cleanup) {
      if (intents.replan) intents.replan = false;
      if (!lean) {
        if (cleanup) await regular.failAbandonedJobs({ connectionId, at: Date.now() });
        await applyIntents(connectionId, intents);
        return regular.loadConnectionContext(connectionId, Date.now());
      }
      const { schedule, status } = intents;
      intents.schedule = null;
      intents.status = null;
      return local.openCycle({
        connectionId,
        at: Date.now(),
        cleanup,
        runId: workflowInfo().runId,
        ...(schedule && { schedule }),
        ...(status && { status }),
      });
    },
    applyIntents,
    enqueueJob: acts.enqueueJob,
    rescheduleQueuedJob: acts.rescheduleQueuedJob,
    cancelJob: acts.cancelJob,
  };
}
