import type { PoolClient } from 'pg';
import { emitJobEvent } from '../db/events';
import { cancelJobAndTasks, lockJobForClaim, markJobRunning, type EndedJob } from '../db/models/jobs';
import { withTransaction } from '../db/transaction';
import type { Activities, ClaimedJob } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { recordJobEnded } from '../lib/metrics';
import { startDeliveriesSoon } from './webhook-deliveries';

/**
 * Claims a job for the workflow `workflowId`: `queued|retrying → running` under
 * `FOR UPDATE SKIP LOCKED`. A job already running under the same workflow id is claimed again
 * (a retried activity, or the same job workflow resuming); a job claimed by anyone else, locked
 * by another claimer, or finished is not run twice: null. A disabled connection runs no job (the
 * job is cancelled), and a paused one starts none (a queued job is cancelled; one already
 * running or waiting to retry finishes).
 */
export function claimJob(deps: ActivityDeps): Activities['claimJob'] {
  return async (input) => {
    const outcome = await withTransaction(deps.pool, (tx) => claimInTx(tx, input.jobId, input.workflowId, new Date(input.at)));
    afterClaim(deps, input.jobId, outcome);
    return outcome.claimed ?? null;
  };
}

/** What a claim did: the claimed job, or a job it cancelled because its connection may not run it. */
export interface ClaimOutcome {
  claimed?: ClaimedJob;
  ended?: EndedJob & { connection_id: string };
  reason?: string;
  /** Deliveries of the cancelled job's `sync.cancelled` event, to start once the claim committed. */
  deliveries?: string[];
}

/** Claiming, inside the caller's transaction. */
export async function claimInTx(tx: PoolClient, jobId: string, workflowId: string, at: Date): Promise<ClaimOutcome> {
  const job = await lockJobForClaim(tx, jobId);
  if (!job) return {};
  const refusal =
    job.connection_status === 'disabled' ? 'connection disabled'
    : job.connection_status === 'paused' && job.status === 'queued' ? 'connection paused'
    : null;
  if (refusal) {
    const ended = await cancelJobAndTasks(tx, jobId, at, refusal);
    return ended ? { ended, reason: refusal, deliveries: await emitJobEvent(tx, jobId, 'cancelled', at) } : {};
  }
  const claimable = job.status === 'queued' || job.status === 'retrying' || (job.status === 'running' && job.workflow_id === workflowId);
  if (!claimable) return {};
  await markJobRunning(tx, jobId, at, workflowId);
  return { claimed: { jobId: job.id, connectionId: job.connection_id, jobType: job.job_type, retryCount: job.retry_count } };
}

/** Logs and counts a job a claim cancelled, and starts its event's deliveries, once its transaction committed. */
export function afterClaim(deps: Pick<ActivityDeps, 'logger' | 'metrics' | 'temporal' | 'taskQueue'>, jobId: string, outcome: ClaimOutcome): void {
  const { logger, metrics } = deps;
  if (!outcome.ended) return;
  startDeliveriesSoon(deps, outcome.deliveries ?? []);
  logger.info({ job_id: jobId, connection_id: outcome.ended.connection_id, reason: outcome.reason }, 'sync job cancelled');
  recordJobEnded(metrics, outcome.ended);
}
