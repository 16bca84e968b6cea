// The job workflow's Postgres bookkeeping, in one of two shapes. Runs started since the lean-job
// patch do it as local activities, claiming and preparing in one (`startJob`) and ending a
// successful attempt in one (`completeJob`), so a one-resource job costs two workflow tasks and
// its one paging activity. Runs recorded before it replay the regular activities they called.
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../../temporal/activities';
import { BOOKKEEPING, LOCAL_BOOKKEEPING } from '../activity-options';

const regular = proxyActivities<Activities>(BOOKKEEPING);
const local = proxyLocalActivities<Activities>(LOCAL_BOOKKEEPING);

/** Marks the workflow versions whose bookkeeping runs as local, merged activities. */
export const LEAN_JOB_PATCH = 'lean-job';

/** The bookkeeping activities a job run calls. */
export type JobBookkeeping = Pick<
  Activities,
  | 'claimJob' | 'prepareJob' | 'startJob' | 'completeJob' | 'recordAttemptSuccess' | 'recordAttemptFailure'
  | 'markJobRetrying' | 'failTask' | 'finishJob' | 'cancelJob'
>;

/** The bookkeeping of a run: local (`lean`), or the regular activities of older runs. */
export function jobBookkeeping(lean: boolean): JobBookkeeping {
  return lean ? local : regular;
}
