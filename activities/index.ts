// The Synctide worker's activities: plain async functions doing I/O (Postgres, connectors), each
// idempotent, bound here to the worker's dependencies. Their signatures are the contract in
// temporal/activities.ts, which is all that workflows see of them.
import { Context } from '@temporalio/activity';
import type { Activities } from '../temporal/activities';
import { cancelJob } from './cancel-job';
import { claimJob } from './claim-job';
import { completeJob } from './complete-job';
import { saveSchedule, setConnectionStatus } from './connection-settings';
import { deleteOldJobs } from './delete-old-jobs';
import type { ActivityDeps } from './deps';
import { enqueueJob } from './enqueue-job';
import { failAbandonedJobs } from './fail-abandoned-jobs';
import { failTask } from './fail-task';
import { finishJob } from './finish-job';
import { loadConnectionContext } from './load-connection-context';
import { markJobRetrying } from './mark-job-retrying';
import { openCycle } from './open-cycle';
import { prepareJob } from './prepare-job';
import { purgeConnectionBatch, quiesceConnection } from './purge-connection';
import { reapStaleTasks } from './reap-stale-tasks';
import { recordAttemptFailure, recordAttemptSuccess } from './record-attempt';
import { reconcileConnections } from './reconcile-connections';
import { rescheduleQueuedJob } from './reschedule-queued-job';
import { startJob } from './start-job';
import { syncImmediately } from './sync-immediately';
import { syncTask } from './sync-task';
import { deliverWebhook, failWebhookDelivery } from './webhook-deliveries';

export type { ActivityDeps } from './deps';

/**
 * All Synctide activities, bound to the worker's dependencies. With `deps.localPool`, an activity
 * run as a local activity (inside a workflow task) uses that pool instead of `deps.pool`.
 */
export function createActivities(deps: ActivityDeps): Activities {
  const { localPool, ...rest } = deps;
  const regular = bindActivities(rest);
  if (!localPool) return regular;
  const local = bindActivities({ ...rest, pool: localPool });
  const routed = (name: keyof Activities) => (...args: unknown[]) =>
    ((Context.current().info.isLocal ? local : regular)[name] as (...a: unknown[]) => unknown)(...args);
  return Object.fromEntries(Object.keys(regular).map((name) => [name, routed(name as keyof Activities)])) as unknown as Activities;
}

function bindActivities(deps: ActivityDeps): Activities {
  return {
    openCycle: openCycle(deps),
    startJob: startJob(deps),
    completeJob: completeJob(deps),
    failAbandonedJobs: failAbandonedJobs(deps),
    loadConnectionContext: loadConnectionContext(deps),
    enqueueJob: enqueueJob(deps),
    rescheduleQueuedJob: rescheduleQueuedJob(deps),
    cancelJob: cancelJob(deps),
    saveSchedule: saveSchedule(deps),
    setConnectionStatus: setConnectionStatus(deps),
    claimJob: claimJob(deps),
    prepareJob: prepareJob(deps),
    syncTask: syncTask(deps),
    failTask: failTask(deps),
    markJobRetrying: markJobRetrying(deps),
    finishJob: finishJob(deps),
    recordAttemptFailure: recordAttemptFailure(deps),
    recordAttemptSuccess: recordAttemptSuccess(deps),
    syncImmediately: syncImmediately(deps),
    reconcileConnections: reconcileConnections(deps),
    reapStaleTasks: reapStaleTasks(deps),
    deleteOldJobs: deleteOldJobs(deps),
    deliverWebhook: deliverWebhook(deps),
    failWebhookDelivery: failWebhookDelivery(deps),
    quiesceConnection: quiesceConnection(deps),
    purgeConnectionBatch: purgeConnectionBatch(deps),
  };
}
