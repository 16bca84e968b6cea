// A sync job's lifecycle as data: the status changes a job may make, and the one rule that checks
// a change against them. Every statement of `db/models/` that writes a job's status declares its
// change through `transitionJob` and takes its WHERE and SET words from that declaration. Also the
// number each of a job's attempts has in its log. Pure.
import { CONNECTION_STATUS, JOB_STATUS, type ConnectionStatus, type JobStatus } from './vocabulary';

const { queued, running, retrying, completed, failed, cancelled } = JOB_STATUS;
const { paused, disabled } = CONNECTION_STATUS;

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

/** A job's counts of the attempts that ended waiting to retry: after a failure, after a rate limit. */
export interface RetryCounts {
  retry_count: number;
  rate_limit_retry_count: number;
}

/**
 * The number of the attempt a `sync_job_logs` row with `outcome` records (its `attempt`), from the
 * job's counts as the statement that ended the attempt left them. Attempts are numbered from 1 in
 * the order they ran, counting each failure and each rate limit (a pause or an interruption counts
 * neither, and logs no row): an attempt that ends waiting to retry (`retrying`) has just been
 * added to the counts, so its number is their sum; one that ends the job (completed, failed, by
 * its workflow or by the stale-task reaper) was not, so its number is their sum + 1. Every writer
 * of a log row numbers it here, so an attempt never takes an earlier one's number (the log keeps
 * the first row of a number).
 */
export function loggedAttempt(counts: RetryCounts, outcome: JobStatus): number {
  const counted = counts.retry_count + counts.rate_limit_retry_count;
  return outcome === JOB_STATUS.retrying ? counted : counted + 1;
}

/** `stoppedQueuedJobReason` as a table: the reason of each connection status that stops a queued job. */
export const STOPPED_QUEUED_JOB_REASONS: Readonly<Partial<Record<ConnectionStatus, string>>> = Object.freeze({
  [paused]: `connection ${paused}`,
  [disabled]: `connection ${disabled}`,
});

/**
 * Why a queued job of the connection's scheduler, found after the run that queued it has gone,
 * ends cancelled rather than failed as abandoned: its connection is paused or disabled, so the
 * pause or disable would have cancelled it (as a running workflow does), and it gets the reason
 * and the `sync.cancelled` event it would have got then. Null for any other status (an active
 * connection's job, or one needing reauthorization): such a job is failed as abandoned.
 */
export function stoppedQueuedJobReason(connectionStatus: ConnectionStatus | null): string | null {
  return (connectionStatus !== null && STOPPED_QUEUED_JOB_REASONS[connectionStatus]) || null;
}

/** The first wait of a job queued behind a running job of its connection and type, in seconds. */
export const BEHIND_RUNNING_FIRST_WAIT_SECONDS = 5;

/**
 * How long a job queued behind a running job of its connection and type waits before its claim
 * number `claims` + 1, in seconds: 5 s after the first claim, twice as long after each next one up
 * to a minute, each stretched by up to a fifth (`random` in [0, 1)), so a job behind a short one
 * starts within seconds of that one's end, and one behind a long job asks about once a minute.
 * `claims` is the attempt of the job's start, which also counts attempts a Postgres error failed.
 */
export function behindRunningWaitSeconds(claims: number, random: number): number {
  const base = Math.min(60, BEHIND_RUNNING_FIRST_WAIT_SECONDS * 2 ** Math.max(0, claims - 1));
  return Math.ceil(base * (1 + random / 5));
}
