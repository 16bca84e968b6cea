import { cancelJob } from './cancel-job';
import { claimJob } from './claim-job';
import type { ActivityDeps } from './deps';
import { enqueueJob } from './enqueue-job';
import { failAbandonedJobs } from './fail-abandoned-jobs';
import { finishJob } from './finish-job';
import { loadConnectionContext } from './load-connection-context';
import { reconcileConnections } from './reconcile-connections';
import { rescheduleQueuedJob } from './reschedule-queued-job';
import { saveSchedule } from './save-schedule';
import { setConnectionStatus } from './set-connection-status';

export type { ActivityDeps } from './deps';

/** All Synctide activities, bound to the worker's dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    loadConnectionContext: loadConnectionContext(deps),
    enqueueJob: enqueueJob(deps),
    rescheduleQueuedJob: rescheduleQueuedJob(deps),
    cancelJob: cancelJob(deps),
    failAbandonedJobs: failAbandonedJobs(deps),
    saveSchedule: saveSchedule(deps),
    setConnectionStatus: setConnectionStatus(deps),
    claimJob: claimJob(deps),
    finishJob: finishJob(deps),
    reconcileConnections: reconcileConnections(deps),
  };
}

/** The activity interface workflows proxy with `proxyActivities<Activities>()`. */
export type Activities = ReturnType<typeof createActivities>;
