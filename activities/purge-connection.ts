// The activities of a connection purge: stop what the connection runs, then delete its rows.
import { Context } from '@temporalio/activity';
import { lockOAuthGrantOf, updateConnection } from '../db/models/connections';
import * as purges from '../db/models/purges';
import { deleteBudgetsOnlyOf } from '../db/models/rate-budgets';
import { cancelJobAndTasks } from '../db/events';
import { lockTenant, runningPlacesBesidePurge } from '../db/models/tenant-limits';
import { withTransaction } from '../db/transaction';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import { DEFAULT_TENANT_LIMITS, effectiveLimits, jobFitsUnder, TENANT_LIMIT_NAMES, type TenantLimits } from '../policy/tenant-limits';
import { cancelConnectionWorkflow, cancelImmediateSync, cancelJobWorkflow, immediateSyncHandle, isWorkflowRunning } from '../temporal/client';
import { connectionWorkflowId, immediateSyncWorkflowId, syncJobWorkflowId } from '../temporal/ids';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { tenantAtJobLimit } from './claim-job';
import { startDeliveriesSoon } from './webhook-deliveries';

/** Rows per delete statement: short statements, so no table is locked for long. */
const BATCH = 1000;
/** How long one activity run deletes before it reports progress and the workflow calls it again. */
const RUN_BUDGET_MS = 30_000;

/**
 * Takes a place of the purge's tenant's running-jobs limit before the purge does anything, marking
 * it `running` (it keeps the place until it completes): each of its batches holds a worker's
 * activity slot for up to RUN_BUDGET_MS, so a tenant deleting many connections at once must not
 * take every slot other tenants' syncs need. Without a place it throws the retryable wait of a
 * job's claim (65–95 s on a durable timer), the purge still `pending`; one purge of a tenant runs
 * in any case. Under the tenant's lock, as claims count. A purge already `running` holds its place.
 */
async function takePurgePlace(pool: ActivityDeps['pool'], purgeId: string, defaults: TenantLimits): Promise<void> {
  await withTransaction(pool, async (tx) => {
    const purge = await purges.findPurge(tx, purgeId);
    if (!purge || purge.status !== 'pending') return;
    await lockTenant(tx, purge.tenant_id);
    const { running, purges: others, max_running_jobs } = await runningPlacesBesidePurge(tx, purge.tenant_id, purgeId);
    const max = effectiveLimits(defaults, { runningJobs: max_running_jobs }).runningJobs;
    // One purge of a tenant always runs, whatever its jobs hold and even at a limit of 0: a
    // deletion asked for is never held back for good.
    if (others > 0 && !jobFitsUnder(max, running, 1)) {
      throw tenantAtJobLimit(`waiting: the tenant's running jobs and purges take ${running} of its ${max} places (${TENANT_LIMIT_NAMES.runningJobs})`);
    }
    await purges.markPurgeRunning(tx, purgeId);
  });
}

/**
 * Stops everything a connection being purged runs, once the purge has its place (takePurgePlace):
 * disables it (so nothing restarts it), cancels its workflow (which cancels its own job), every
 * active job's workflow and its immediate sync (which writes no job row, so only its workflow id
 * finds it), then checks that they all closed; while one still runs (a sync stops at its next
 * heartbeat) it throws, and the workflow's retry policy asks again. Once they have, a job left
 * active (its workflow lost before the deletion) is cancelled with its `sync.cancelled` event.
 * Idempotent.
 */
export function quiesceConnection(deps: ActivityDeps): Activities['quiesceConnection'] {
  const { pool, temporal, metrics, tenantLimits } = deps;
  return async ({ purgeId, connectionId }) => {
    await takePurgePlace(pool, purgeId, tenantLimits ?? DEFAULT_TENANT_LIMITS);
    await updateConnection(pool, connectionId, { status: 'disabled' });
    await cancelConnectionWorkflow(temporal, connectionId);
    const jobIds = await purges.findActiveJobIds(pool, connectionId);
    for (const jobId of jobIds) await cancelJobWorkflow(temporal, jobId);
    await cancelImmediateSync(immediateSyncHandle(temporal, connectionId));
    const ids = [connectionWorkflowId(connectionId), immediateSyncWorkflowId(connectionId), ...jobIds.map(syncJobWorkflowId)];
    const running: string[] = [];
    for (const id of ids) if (await isWorkflowRunning(temporal, id)) running.push(id);
    if (running.length > 0) throw new Error(`waiting for ${running.join(', ')} to stop before purging`);
    // A job still active now has no workflow left to end it (its run was lost before the
    // deletion): it ends here, cancelled by the deletion as its run would have ended it, with its
    // `sync.cancelled` event, before the purge deletes it (an event still being delivered is kept).
    const at = new Date();
    const deliveries: string[] = [];
    for (const jobId of await purges.findActiveJobIds(pool, connectionId)) {
      const ended = await withTransaction(pool, async (tx) => {
        const job = await cancelJobAndTasks(tx, jobId, at, 'connection deleted', feedCursors(deps.credentials));
        if (job) deliveries.push(...job.deliveries);
        return job;
      });
      if (ended) recordJobEnded(metrics, ended);
    }
    startDeliveriesSoon(deps, deliveries);
  };
}

/**
 * Deletes the connection's rows, table by table, `BATCH` rows per statement, for about 30 s
 * (heartbeating after each batch), leaving a table only once a batch chose fewer than `BATCH` rows
 * (none of its rows is left there, an event still being delivered aside); then it deletes the rate budgets
 * only this connection used and the connection row (its sync state, breaker, alerts and budget
 * usage rows cascade) and completes the purge in one transaction.
 * Idempotent: a retry deletes what is left.
 */
export function purgeConnectionBatch({ pool }: ActivityDeps): Activities['purgeConnectionBatch'] {
  return async ({ purgeId, connectionId }) => {
    const ctx = Context.current();
    const deadline = Date.now() + RUN_BUDGET_MS;
    let deleted = 0;
    // Seen-sets before jobs: they hang off the jobs' tasks and have no foreign key to cascade.
    const steps = [purges.deleteRecordsBatch, purges.deleteSeenBatch, purges.deleteJobsBatch, purges.deleteWebhookEventsBatch];
    for (const step of steps) {
      for (;;) {
        if (Date.now() > deadline) return { deleted, done: false };
        // A batch and its count commit together: a run cut off between them and run again
        // neither loses the count of rows already gone nor counts them twice.
        const batch = await withTransaction(pool, async (tx) => {
          const done = await step(tx, connectionId, BATCH);
          if (done.deleted > 0) await purges.addPurgeProgress(tx, purgeId, done.deleted);
          return done;
        });
        deleted += batch.deleted;
        ctx.heartbeat({ deleted });
        // The step ends with a batch that chose fewer than BATCH rows: its statement saw every row
        // of it left. One that chose BATCH goes on even when it deleted fewer: a concurrent delete
        // (the retention clean-up) or redelivery took rows it chose, and rows it did not choose may remain.
        if (batch.chosen < BATCH) break;
      }
    }
    await withTransaction(pool, async (tx) => {
      // The rate budgets this connection used that no other connection uses (a tenant's budget is
      // shared by its connections holding the same credential): first, while its usage rows exist.
      const budgets = await deleteBudgetsOnlyOf(tx, connectionId);
      if (budgets > 0) await purges.addPurgeProgress(tx, purgeId, budgets);
      deleted += budgets;
      await lockOAuthGrantOf(tx, connectionId);
      const n = await purges.deleteConnectionRow(tx, connectionId);
      if (n > 0) await purges.addPurgeProgress(tx, purgeId, n);
      deleted += n;
      await purges.completePurge(tx, purgeId, new Date());
    });
    return { deleted, done: true };
  };
}
