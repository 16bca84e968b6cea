// The activities of a connection purge: stop what the connection runs, then delete its rows.
import { Context } from '@temporalio/activity';
import { lockOAuthGrantOf, updateConnection } from '../db/models/connections';
import * as purges from '../db/models/purges';
import { deleteBudgetsOnlyOf } from '../db/models/rate-budgets';
import { emitJobEvent } from '../db/events';
import { cancelJobAndTasks } from '../db/models/jobs';
import { withTransaction } from '../db/transaction';
import { recordJobEnded } from '../lib/metrics';
import { cancelConnectionWorkflow, cancelImmediateSync, cancelJobWorkflow, immediateSyncHandle, isWorkflowRunning } from '../temporal/client';
import { connectionWorkflowId, immediateSyncWorkflowId, syncJobWorkflowId } from '../temporal/ids';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { startDeliveriesSoon } from './webhook-deliveries';

/** Rows per delete statement: short statements, so no table is locked for long. */
const BATCH = 1000;
/** How long one activity run deletes before it reports progress and the workflow calls it again. */
const RUN_BUDGET_MS = 30_000;

/**
 * Stops everything a connection being purged runs: disables it (so nothing restarts it), cancels
 * its workflow (which cancels its own job), every active job's workflow and its immediate sync
 * (which writes no job row, so only its workflow id finds it), then checks that they
 * all closed; while one still runs (a sync stops at its next heartbeat) it throws, and the
 * workflow's retry policy asks again. Once they have, a job left active (its workflow lost
 * before the deletion) is cancelled with its `sync.cancelled` event. Idempotent.
 */
export function quiesceConnection(deps: ActivityDeps): Activities['quiesceConnection'] {
  const { pool, temporal, metrics } = deps;
  return async ({ purgeId, connectionId }) => {
    await purges.markPurgeRunning(pool, purgeId);
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
        const job = await cancelJobAndTasks(tx, jobId, at, 'connection deleted');
        if (job) deliveries.push(...(await emitJobEvent(tx, jobId, 'cancelled', at)));
        return job;
      });
      if (ended) recordJobEnded(metrics, ended);
    }
    startDeliveriesSoon(deps, deliveries);
  };
}

/**
 * Deletes the connection's rows, table by table, `BATCH` rows per statement, for about 30 s
 * (heartbeating after each batch); once every batch came back short it deletes the rate budgets
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
        const n = await withTransaction(pool, async (tx) => {
          const batch = await step(tx, connectionId, BATCH);
          if (batch > 0) await purges.addPurgeProgress(tx, purgeId, batch);
          return batch;
        });
        deleted += n;
        ctx.heartbeat({ deleted });
        if (n < BATCH) break;
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
