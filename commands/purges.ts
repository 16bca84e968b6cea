// Deleting a connection: stop it, then purge everything of it in a `connection-purge` workflow.
import * as purges from '../db/models/purges';
import type { PurgeRow } from '../db/models/purges';
import { startConnectionPurge } from '../temporal/client';
import { withTransaction } from '../db/transaction';
import { lockConnection } from '../db/models/connections';
import { feedCursors } from '../lib/feed-cursors';
import { getConnection, stopConnectionWork, writeDisabled } from './connections';
import type { CommandDeps } from './deps';
import { notFound } from './errors';

export type { PurgeRow };

/**
 * Deletes connection `id`: records a purge and disables it (one transaction), stops its workflow
 * and active jobs (as a disable does), then starts the purge's workflow, which waits until they have all closed and deletes
 * the connection's records, tombstones, seen-sets, jobs, tasks, logs, sync state, breaker rows,
 * alerts and webhook events with their deliveries (but events still being delivered, such as
 * the `connection.disabled` this call writes), in batches, and last the connection itself.
 * A repeated call while the purge runs returns the same purge (and starts its workflow if needed).
 */
export async function deleteConnection(deps: CommandDeps, id: string): Promise<PurgeRow> {
  const row = await getConnection(deps, id);
  // The purge row and the disable in one transaction under the purge lock (exclusive): a resume or
  // update checks for an open purge under the same lock (shared), and a sync's insert reads the
  // connection row this transaction writes disabled (FOR SHARE, so it waits for it), so none can
  // pass its check once the deletion has begun and then write the connection active or changed,
  // or a job of it. writeDisabled always writes the row, even an already disabled one.
  const { purge, written } = await withTransaction(deps.pool, async (tx) => {
    await purges.lockForPurge(tx, row.id);
    // Read again under its lock: a purge that completed since the read above deleted the row (its
    // purge no longer open, so another would be recorded for a connection that is gone).
    if (!(await lockConnection(tx, row.id))) return { purge: null, written: null };
    const purge = (await purges.insertPurge(tx, row.id, row.tenant_id)) ?? (await purges.findOpenPurge(tx, row.id));
    return { purge, written: purge ? await writeDisabled(tx, row, feedCursors(deps.credentials)) : null };
  });
  if (!purge || !written) throw notFound('no connection with that id');
  await stopConnectionWork(deps, row, written);
  await startConnectionPurge(deps.temporal, deps.taskQueue, { purgeId: purge.id, connectionId: row.id });
  return purge;
}

/** Purge `id`, or a not_found refusal. */
export async function getPurge(deps: CommandDeps, id: string): Promise<PurgeRow> {
  const row = await purges.findPurge(deps.pool, id);
  if (!row) throw notFound('no purge with that id');
  return row;
}
