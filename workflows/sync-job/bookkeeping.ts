// The job workflow's Postgres bookkeeping, in one of two shapes. Runs started since the lean-job
// patch do it as local activities, claiming and preparing in one (`startJob`) and ending a
// successful attempt in one (`completeJob`), so a one-resource job costs two workflow tasks and
// its one paging activity. Runs recorded before it replay the regular activities they called.
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../../temporal/activities';
import { BOOKKEEPING, LOCAL_BOOKKEEPING, LOCAL_JOB_START } from '../activity-options';

const regular = proxyActivities<Activities>(BOOKKEEPING);
const local = proxyLocalActivities<Activities>(LOCAL_BOOKKEEPING);
const localStart = proxyLocalActivities<Activities>(LOCAL_JOB_START);

/** Marks the workflow versions whose bookkeeping runs as local, merged activities. */
export const LEAN_JOB_PATCH = 'lean-job';

/** The bookkeeping activities a job run calls. */
export type JobBookkeeping = Pick<
  Activities,
  | 'claimJob' | 'prepareJob' | 'startJob' | 'completeJob' | 'recordAttemptSuccess' | 'recordAttemptFailure'
  | 'markJobRetrying' | 'failTask' | 'finishJob' | 'cancelJob'
>;

/**
 * Marks the workflow versions of a `sync-job:` run whose claim, queued behind a running job of its
 * connection and type, waits in short steps on durable timers (startJob with `behindRunning:
 * 'stepped'`, under LOCAL_JOB_START's local retry threshold): it starts within seconds of a short
 * job's end. Runs recorded before it replay their 65–95 s waits.
 */
export const STEPPED_WAIT_BEHIND_PATCH = 'stepped-wait-behind-running';

/**
 * The bookkeeping of a run: local (`lean`), or the regular activities of older runs; with
 * `steppedStart` (lean only), its startJob runs under LOCAL_JOB_START.
 */
export function jobBookkeeping(lean: boolean, steppedStart = false): JobBookkeeping {
  if (!lean) return regular;
  if (!steppedStart) return local;
  const { claimJob, prepareJob, completeJob, recordAttemptSuccess, recordAttemptFailure, markJobRetrying, failTask, finishJob, cancelJob } = local;
  return { claimJob, prepareJob, startJob: localStart.startJob, completeJob, recordAttemptSuccess, recordAttemptFailure, markJobRetrying, failTask, finishJob, cancelJob };
}
