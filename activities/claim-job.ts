import { Context } from '@temporalio/activity';
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import type { PoolClient } from 'pg';
import { lockTenant, runningJobsAndOverride } from '../db/models/tenant-limits';
import { DEFAULT_TENANT_LIMITS, effectiveLimits, jobFitsUnder, runningJobsWaitSeconds, TENANT_LIMIT_NAMES, type TenantLimits } from '../policy/tenant-limits';
import { behindRunningWaitSeconds } from '../policy/job-lifecycle';
import { cancelJobAndTasks } from '../db/events';
import type { CursorCodec, FeedCursor } from '../policy/cursors';
import { findPauseAt } from '../db/models/breaker';
import { lockJobForClaim, markJobRunning, type EndedJob } from '../db/models/jobs';
import { withTransaction } from '../db/transaction';
import type { Activities, BehindRunningWait, ClaimedJob } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import { startDeliveriesSoon } from './webhook-deliveries';

/**
 * Claims a job for the workflow `workflowId`: `queued|retrying → running` under
 * `FOR NO KEY UPDATE SKIP LOCKED`, its open tasks' rows locked first (`lockJobForClaim`). A job already running under the same workflow id is claimed again
 * (a retried activity, or the same job workflow resuming); a job claimed by anyone else, locked
 * by another claimer, or finished is not run twice: null. A disabled connection runs no job (the
 * job is cancelled), and a paused one starts none (a queued job is cancelled; one already
 * running or waiting to retry finishes).
 */
export function claimJob(deps: ActivityDeps): Activities['claimJob'] {
  return async (input) => {
    const at = claimTime(input.at);
    const outcome = await withTransaction(deps.pool, async (tx) => {
      const claim = await claimInTx(tx, input.jobId, input.workflowId, at, feedCursors(deps.credentials), { defaults: deps.tenantLimits });
      // A job claimed again after a wait learns of a breaker pause that began meanwhile.
      if (claim.claimed) claim.claimed.pausedUntil = (await findPauseAt(tx, claim.claimed.connectionId, at))?.getTime() ?? null;
      return claim;
    });
    afterClaim(deps, input.jobId, outcome);
    return outcome.claimed ?? null;
  };
}

/**
 * When a claim happens: the workflow's time `at`, or, for a retried attempt (one that waited for
 * its tenant's running jobs, or for Postgres), now when later: the job starts when it is claimed.
 */
export function claimTime(at: number): Date {
  return new Date(activityAttempt() > 1 ? Math.max(at, Date.now()) : at);
}

/** The attempt of the activity this runs in: 1 outside an activity (tests). */
function activityAttempt(): number {
  try {
    return Context.current().info.attempt;
  } catch {
    return 1;
  }
}

/** The failure type of a claim that waits for its tenant's running jobs. */
export const TENANT_AT_JOB_LIMIT = 'TenantAtJobLimit';

/** The failure type of a claim that waits for a running job of its connection and type to end. */
export const JOB_OF_TYPE_RUNNING = 'JobOfTypeRunning';

/** What a claim did: the claimed job, or a job it cancelled because its connection may not run it. */
export interface ClaimOutcome {
  claimed?: ClaimedJob;
  ended?: EndedJob & { connection_id: string };
  reason?: string;
  /** Deliveries of the cancelled job's `sync.cancelled` event, to start once the claim committed. */
  deliveries?: string[];
  /**
   * With a deferred limit check: the tenant's running-jobs check, which the caller runs as its
   * transaction's last statement (it throws the retryable wait, rolling the claim back).
   */
  checkLimit?: () => Promise<void>;
}

/** How claimInTx decides beyond the job's own row. */
export interface ClaimOptions {
  /** The tenants' running-jobs limit where a tenant has no override. */
  defaults?: TenantLimits;
  /** Leave the tenant's running-jobs check to the caller (`checkLimit`), to run last. */
  deferLimit?: boolean;
  /** How a job queued behind a running one waits (`long` unless given). */
  behind?: BehindRunningWait;
}

/**
 * Claiming, inside the caller's transaction. A queued job of a connection that still runs another
 * job of its type (running or retrying; it was requested while that one ran, for resource types
 * that one does not sync) is not claimed: two jobs of a connection and type never run at once. Its
 * claim fails retryably, as a claim over its tenant's limit does (below), and tries again after
 * the wait `behind` names, until that job has ended; nothing
 * else makes a job of that connection and type running meanwhile (the only other queued one would
 * be this one: one queued job per connection and type). A job whose places do not fit under what
 * its tenant's running jobs already take of its limit (TENANT_MAX_RUNNING_JOBS or the tenant's
 * override; a job takes one place per task it runs at once, each an activity slot, as its
 * preparation recorded: startJob prepares before the check, a job claimed again keeps its
 * places, and one claimed before it is prepared counts one) is not claimed: the activity fails retryably with a delay of 65–95 s, so the job stays queued (or
 * retrying) on a durable timer and claims again then, holding no worker slot meanwhile, while
 * other tenants' jobs claim at once. The count is taken under the tenant's lock, which every claim
 * of the tenant waits for until the holder commits: with `deferLimit` the check is left to the
 * caller (`checkLimit`) to run last, just before its commit, so a transaction that does more after
 * the claim (startJob prepares the job) holds the lock for one statement, not for all of its work.
 * A job cancelled instead writes its event with its feed cursor sealed by `cursors`.
 */
export async function claimInTx(
  tx: PoolClient,
  jobId: string,
  workflowId: string,
  at: Date,
  cursors: CursorCodec<FeedCursor>,
  { defaults = DEFAULT_TENANT_LIMITS, deferLimit = false, behind = 'long' }: ClaimOptions = {},
): Promise<ClaimOutcome> {
  const job = await lockJobForClaim(tx, jobId);
  if (!job) return {};
  const refusal =
    job.connection_status === 'disabled' ? 'connection disabled'
    : job.connection_status === 'paused' && job.status === 'queued' ? 'connection paused'
    : null;
  if (refusal) {
    const cancelled = await cancelJobAndTasks(tx, jobId, at, refusal, cursors);
    if (!cancelled) return {};
    const { deliveries, ...ended } = cancelled;
    return { ended, reason: refusal, deliveries };
  }
  const claimable = job.status === 'queued' || job.status === 'retrying' || (job.status === 'running' && job.workflow_id === workflowId);
  if (!claimable) return {};
  if (job.status === 'queued' && job.claimed_beside) {
    const seconds = behind === 'stepped' ? behindRunningWaitSeconds(activityAttempt(), Math.random()) : runningJobsWaitSeconds(Math.random());
    throw claimWaits(JOB_OF_TYPE_RUNNING, `waiting: job ${job.claimed_beside} of this connection and type still runs; this job runs once it has ended`, seconds);
  }
  const checkLimit = job.status === 'running' ? undefined : () => waitUnlessUnderLimit(tx, job.tenant_id, jobId, defaults);
  if (checkLimit && !deferLimit) await checkLimit();
  await markJobRunning(tx, jobId, at, workflowId);
  const claimed = { jobId: job.id, connectionId: job.connection_id, jobType: job.job_type, retryCount: job.retry_count };
  return deferLimit && checkLimit ? { claimed, checkLimit } : { claimed };
}

/** Throws the retryable failure that makes a claim wait when the job's places do not fit under its tenant's limit. */
async function waitUnlessUnderLimit(tx: PoolClient, tenantId: string, jobId: string, defaults: TenantLimits): Promise<void> {
  await lockTenant(tx, tenantId);
  const { running, own, max_running_jobs } = await runningJobsAndOverride(tx, tenantId, jobId);
  const max = effectiveLimits(defaults, { runningJobs: max_running_jobs }).runningJobs;
  if (jobFitsUnder(max, running, own)) return;
  throw tenantAtJobLimit(`waiting: the tenant's running jobs and purges take ${running} of its ${max} places (${TENANT_LIMIT_NAMES.runningJobs}), and this job needs ${own}`);
}

/**
 * The retryable failure of work that waits for a place of its tenant's running-jobs limit: tried
 * again in 65–95 s, on a durable timer, holding no worker slot meanwhile.
 */
export function tenantAtJobLimit(message: string): ApplicationFailure {
  return claimWaits(TENANT_AT_JOB_LIMIT, message, runningJobsWaitSeconds(Math.random()));
}

/**
 * The retryable failure of a claim (or a purge's step) that waits, of failure type `type`: tried
 * again in `seconds`, on a durable timer (the caller's local retry threshold is shorter), holding
 * no worker slot meanwhile.
 */
function claimWaits(type: string, message: string, seconds: number): ApplicationFailure {
  return ApplicationFailure.create({
    message,
    type,
    nextRetryDelay: `${seconds} seconds`,
    // Expected while a tenant is busy: not an error in the SDK's logs and metrics.
    category: ApplicationFailureCategory.BENIGN,
  });
}

/** Logs and counts a job a claim cancelled, and starts its event's deliveries, once its transaction committed. */
export function afterClaim(deps: Pick<ActivityDeps, 'logger' | 'metrics' | 'temporal' | 'taskQueue'>, jobId: string, outcome: ClaimOutcome): void {
  const { logger, metrics } = deps;
  if (!outcome.ended) return;
  startDeliveriesSoon(deps, outcome.deliveries ?? []);
  logger.info({ job_id: jobId, connection_id: outcome.ended.connection_id, reason: outcome.reason }, 'sync job cancelled');
  recordJobEnded(metrics, outcome.ended);
}
