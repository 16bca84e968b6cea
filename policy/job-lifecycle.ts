// A sync job's lifecycle as data: the status changes a job may make, and the one rule that checks
// a change against them. Every statement of `db/models/` that writes a job's status declares its
// change through `transitionJob` and takes its WHERE and SET words from that declaration. Pure.
import { JOB_STATUS, type JobStatus } from './vocabulary';

const { queued, running, retrying, completed, failed, cancelled } = JOB_STATUS;

/** The status every job is inserted with. */
export const INITIAL_JOB_STATUS = queued;

/**
 * Where a job may go from each status. A job is claimed (`queued` or `retrying` → `running`; a
 * running job is claimed again by its own workflow), waits to retry (`running` → `retrying`, and a
 * repeated record of the same wait), and ends `completed`, `failed` or `cancelled`. An active job
 * may be cancelled or failed as abandoned from any active status; only a running job completes.
 * A finished job never changes again.
 */
export const validJobTransitions: { readonly [From in JobStatus]: readonly JobStatus[] } = Object.freeze({
  queued: [running, cancelled, failed],
  running: [running, retrying, completed, failed, cancelled],
  retrying: [running, retrying, failed, cancelled],
  completed: [],
  failed: [],
  cancelled: [],
});

/** Whether a job may go from `from` to `to`. */
export function isValidJobTransition(from: JobStatus, to: JobStatus): boolean {
  return validJobTransitions[from].includes(to);
}

/** A status change a statement makes: from any of `from` (what its WHERE allows) to one of `to`. */
export interface JobTransition<From extends JobStatus = JobStatus, To extends JobStatus = JobStatus> {
  readonly from: readonly From[];
  readonly to: readonly To[];
}

/**
 * The change from any of `from` to any of `to`, when each such pair is in `validJobTransitions`;
 * throws otherwise, so a module declaring a change the lifecycle does not allow fails to load.
 */
export function transitionJob<const From extends JobStatus, const To extends JobStatus>(
  from: readonly From[],
  to: readonly To[],
): JobTransition<From, To> {
  if (from.length === 0 || to.length === 0) throw new RangeError('a job transition names at least one status on each side');
  for (const f of from) {
    for (const t of to) {
      if (!isValidJobTransition(f, t)) throw new RangeError(`a job may not go from ${f} to ${t}`);
    }
  }
  return Object.freeze({ from: Object.freeze([...from]), to: Object.freeze([...to]) });
}
