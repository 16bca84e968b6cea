// The merged steps of the lean cycle: each does in one transaction what two or three of the
// older activities did in one each, so a workflow can run it as one local activity.
import { setStatusUnlessDisabled, findSchedulingRow } from '../db/models/connections';
import { withTransaction } from '../db/transaction';
import { recordJobEnded } from '../lib/metrics';
import type { Activities } from '../temporal/activities';
import { ConnectorError } from '../connectors/types';
import { afterClaim, claimInTx, claimTime } from './claim-job';
import { storeLegacyScheduleChange } from './connection-settings';
import type { ActivityDeps } from './deps';
import { failAbandonedInTx } from './fail-abandoned-jobs';
import { afterFinish, finishInTx } from './finish-job';
import { contextOf } from './load-connection-context';
import { prepareInTx } from './prepare-job';
import { recordSuccessInTx } from './record-attempt';
import { startDeliveriesSoon } from './webhook-deliveries';

/**
 * The start of a connection workflow's cycle: on a run's first call, fail the scheduler jobs an
 * earlier run left active (as abandoned); store a pending legacy schedule change and pause or resume; then
 * read the scheduling context. One transaction; the same steps as failAbandonedJobs,
 * saveSchedule, setConnectionStatus and loadConnectionContext.
 */
export function openCycle(deps: ActivityDeps): Activities['openCycle'] {
  const { pool, logger, metrics, settings } = deps;
  return async (input) => {
    const at = new Date(input.at);
    const { abandoned, deliveries, row } = await withTransaction(pool, async (tx) => {
      const abandoned = input.cleanup ? await failAbandonedInTx(tx, input.connectionId, at, input.runId) : { jobs: [], deliveries: [] };
      if (input.schedule) await storeLegacyScheduleChange(tx, input.connectionId, input.schedule, settings, logger);
      if (input.status) await setStatusUnlessDisabled(tx, input.connectionId, input.status);
      return { abandoned: abandoned.jobs, deliveries: abandoned.deliveries, row: await findSchedulingRow(tx, input.connectionId, at, settings) };
    });
    startDeliveriesSoon(deps, deliveries);
    if (abandoned.length > 0) logger.warn({ connection_id: input.connectionId, job_ids: abandoned.map((r) => r.id) }, 'failed abandoned sync jobs');
    for (const job of abandoned) recordJobEnded(metrics, job);
    return row && contextOf(row, settings);
  };
}

/**
 * A job's start: claims it (as claimJob) and prepares it (as prepareJob) in one transaction. A
 * config its connector refuses leaves the job claimed and answers `invalid`, so the workflow
 * fails it with that message.
 */
export function startJob(deps: ActivityDeps): Activities['startJob'] {
  const { pool, rateLimit } = deps;
  return async (input) => {
    const at = claimTime(input.at);
    const outcome = await withTransaction(pool, async (tx) => {
      const claim = await claimInTx(tx, input.jobId, input.workflowId, at, deps.tenantLimits);
      if (!claim.claimed) return { claim };
      try {
        return { claim, prepared: await prepareInTx(tx, input.jobId, at, rateLimit) };
      } catch (err) {
        // Thrown before preparing wrote anything: the claim still commits.
        if (err instanceof ConnectorError && err.kind === 'permanent') return { claim, invalid: err.message };
        throw err;
      }
    });
    afterClaim(deps, input.jobId, outcome.claim);
    if (outcome.prepared) return { outcome: 'started', prepared: outcome.prepared };
    if (outcome.invalid !== undefined) return { outcome: 'invalid', error: outcome.invalid };
    return { outcome: 'not_claimable' };
  };
}

/**
 * A successful attempt's end: finishes the job (as finishJob) and, only when that transaction
 * marked it completed, closes the breaker and resolves alerts (as recordAttemptSuccess). A job that
 * was no longer running (ended elsewhere), or that finishing marked failed (a task failed or did
 * not complete), records no success. Returns the job's status.
 */
export function completeJob(deps: ActivityDeps): Activities['completeJob'] {
  return async (input) => {
    const finish = { jobId: input.jobId, outcome: 'completed' as const, at: input.at, startedAt: input.startedAt };
    const deliveries: string[] = [];
    const finished = await withTransaction(deps.pool, async (tx) => {
      const job = await finishInTx(tx, finish, deliveries);
      if (job?.status === 'completed') await recordSuccessInTx(tx, input.connectionId, new Date(input.at), deliveries);
      return job;
    });
    return afterFinish(deps, finish, finished, deliveries);
  };
}
