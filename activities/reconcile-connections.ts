import pMap from 'p-map';
import { withTransaction } from '../db/transaction';
import { ensureConnectionWorkflow, ensureJobWorkflow, stopConnectionWorkflow } from '../lib/connection-workflows';
import type { ActivityDeps } from './deps';

/** What one reconcile tick did. */
export interface ReconcileResult {
  ensured: number;
  stopped: number;
  backlog: number;
  /** Requested jobs found queued without a workflow (their API process died in between) and started. */
  adopted: number;
}

const BATCH_SIZE = 200;
/** Temporal calls in flight at once during a tick. */
const CONCURRENCY = 16;

interface ConnectionToReconcile {
  id: string;
  tenant_id: string;
  provider_slug: string;
  status: string;
}

/**
 * One reconcile tick (SPEC §4): scans connections in batches under `FOR UPDATE SKIP LOCKED` (a
 * row an enqueue holds is skipped: its workflow is evidently alive) and ensures each active or
 * paused one has its connection workflow; cancels the workflows of disabled connections until a
 * tick finds them ended, then leaves them be until the connection changes; sets the backlog gauge to the number of active connections that are
 * overdue (next_run_at passed, no active job). A batch's locks are released before the Temporal
 * calls, so enqueues are never kept waiting on the tick. Safe with any number of ticks at once:
 * starting uses "use existing", stopping is idempotent.
 */
export function reconcileConnections(deps: ActivityDeps) {
  const { pool, logger, metrics, temporal, taskQueue } = deps;
  return async (input: { at: number }): Promise<ReconcileResult> => {
    const endTimer = metrics.tickDurationMs.startTimer({ operation: 'reconcile' });
    const result: ReconcileResult = { ensured: 0, stopped: 0, backlog: 0, adopted: 0 };
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const batch = await withTransaction(pool, async (tx) => {
        const { rows } = await tx.query<ConnectionToReconcile>(
          `select id, tenant_id, provider_slug, status from connections
            where id > $1 and (status <> 'disabled' or workflow_stopped_at is null or workflow_stopped_at < updated_at)
            order by id limit $2 for update skip locked`,
          [after, BATCH_SIZE],
        );
        return rows;
      });
      await pMap(batch, (row) => reconcileOne(deps, row, result), { concurrency: CONCURRENCY });
      if (batch.length < BATCH_SIZE) break;
      after = batch[batch.length - 1]!.id;
    }
    const { rows } = await pool.query(
      `select count(*)::int as n from connections c
        where c.status = 'active'
          -- Guard the cast: metadata is user-editable and a malformed value must not fail the tick.
          and case when c.metadata -> 'sync' ->> 'next_run_at' ~ '^\d{4}-\d{2}-\d{2}T'
                   then (c.metadata -> 'sync' ->> 'next_run_at')::timestamptz end < $1
          and not exists (select 1 from sync_jobs j where j.connection_id = c.id
                            and j.status in ('queued', 'running', 'retrying'))`,
      [new Date(input.at)],
    );
    result.backlog = rows[0].n;
    result.adopted = await adoptRequestedJobs(deps, input.at);
    metrics.backlog.set(result.backlog);
    endTimer();
    logger.info({ ...result }, 'reconcile tick');
    return result;
  };
}

const ADOPT_AFTER_MS = 60_000;

/**
 * The API inserts a requested job and then starts its workflow; if the API process died in
 * between, the job would stay queued forever. Jobs still unclaimed a minute later get their
 * workflow started here ("use existing": a running one is left alone).
 */
async function adoptRequestedJobs({ pool, temporal, taskQueue, logger }: ActivityDeps, at: number): Promise<number> {
  const { rows } = await pool.query(
    `select j.id, j.connection_id, c.tenant_id, c.provider_slug from sync_jobs j join connections c on c.id = j.connection_id
      where j.status = 'queued' and j.trigger in ('api', 'backfill') and j.created_at < $1 and c.status = 'active'
      order by j.created_at limit 500`,
    [new Date(at - ADOPT_AFTER_MS)],
  );
  for (const row of rows) {
    const handle = await ensureJobWorkflow(temporal, taskQueue, {
      id: row.id,
      connection: { id: row.connection_id, tenantId: row.tenant_id, providerSlug: row.provider_slug },
    });
    logger.debug({ job_id: row.id, workflow_id: handle.workflowId }, 'ensured the workflow of a queued requested job');
  }
  return rows.length;
}

/** Ensures one connection's workflow, or stops it and notes that it is stopped when disabled. */
async function reconcileOne({ pool, temporal, taskQueue }: ActivityDeps, row: ConnectionToReconcile, result: ReconcileResult): Promise<void> {
  if (row.status !== 'disabled') {
    await ensureConnectionWorkflow(temporal, taskQueue, { id: row.id, tenantId: row.tenant_id, providerSlug: row.provider_slug });
    result.ensured += 1;
    return;
  }
  if (await stopConnectionWorkflow(temporal, row.id)) {
    // Cancellation is only requested: the next tick looks again (and notes it once it has ended).
    result.stopped += 1;
    return;
  }
  // Found not running: later ticks leave it alone until the connection changes again.
  await pool.query(`update connections set workflow_stopped_at = now() where id = $1 and status = 'disabled'`, [row.id]);
}
