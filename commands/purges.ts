// Deleting a connection: stop it, then purge everything of it in a `connection-purge` workflow.
import * as purges from '../db/models/purges';
import type { PurgeRow } from '../db/models/purges';
import { startConnectionPurge } from '../temporal/client';
import { disableConnection, getConnection } from './connections';
import type { CommandDeps } from './deps';
import { notFound } from './errors';

export type { PurgeRow };

/**
 * Deletes connection `id`: disables it and stops its workflow and active jobs (as a disable does),
 * then records a purge and starts its workflow, which waits until they have all closed and deletes
 * the connection's records, tombstones, seen-sets, jobs, tasks, logs, sync state, breaker rows,
 * alerts and webhook events with their deliveries (but events still being delivered, such as
 * the `connection.disabled` this call writes), in batches, and last the connection itself.
 * A repeated call while the purge runs returns the same purge (and starts its workflow if needed).
 */
export async function deleteConnection(deps: CommandDeps, id: string): Promise<PurgeRow> {
  const row = await getConnection(deps, id);
  await disableConnection(deps, row.id);
  const purge = (await purges.insertPurge(deps.pool, row.id, row.tenant_id)) ?? (await purges.findOpenPurge(deps.pool, row.id));
  if (!purge) throw notFound('no connection with that id');
  await startConnectionPurge(deps.temporal, deps.taskQueue, { purgeId: purge.id, connectionId: row.id });
  return purge;
}

/** Purge `id`, or a not_found refusal. */
export async function getPurge(deps: CommandDeps, id: string): Promise<PurgeRow> {
  const row = await purges.findPurge(deps.pool, id);
  if (!row) throw notFound('no purge with that id');
  return row;
}
