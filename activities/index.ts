import { cancelJob } from './cancel-job';
import { claimJob } from './claim-job';
import { deleteOldJobs } from './delete-old-jobs';
import type { ActivityDeps } from './deps';
import { enqueueJob } from './enqueue-job';
import { failAbandonedJobs } from './fail-abandoned-jobs';
import { failTask } from './fail-task';
import { finishJob } from './finish-job';
import { loadConnectionContext } from './load-connection-context';
import { markJobRetrying } from './mark-job-retrying';
import { prepareJob } from './prepare-job';
import { reapStaleTasks } from './reap-stale-tasks';
import { recordAttemptFailure, recordAttemptSuccess } from './record-attempt-failure';
import { reconcileConnections } from './reconcile-connections';
import { rescheduleQueuedJob } from './reschedule-queued-job';
import { saveSchedule } from './save-schedule';
import { setConnectionStatus } from './set-connection-status';
import { syncImmediately } from './sync-immediately';
import { syncTask } from './sync-task';

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
    prepareJob: prepareJob(deps),
    syncTask: syncTask(deps),
    failTask: failTask(deps),
    syncImmediately: syncImmediately(deps),
    markJobRetrying: markJobRetrying(deps),
    recordAttemptFailure: recordAttemptFailure(deps),
    recordAttemptSuccess: recordAttemptSuccess(deps),
    reconcileConnections: reconcileConnections(deps),
    reapStaleTasks: reapStaleTasks(deps),
    deleteOldJobs: deleteOldJobs(deps),
  };
}

/** The activity interface workflows proxy with `proxyActivities<Activities>()`. */
export type Activities = ReturnType<typeof createActivities>;
