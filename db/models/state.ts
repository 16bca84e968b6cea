// SQL of `sync_state`: per connection, resource type and partition, the cursor the next
// incremental fetch of that partition starts from and when it last synced.
import type { Queryable } from '../queryable';

/** The cursors of a connection's resource type, by partition ('' for a single-partition connector); partitions without one are absent. */
export async function findCursors(db: Queryable, connectionId: string, resourceType: string): Promise<Map<string, Date>> {
  const { rows } = await db.query<{ partition: string; cursor: Date }>(
    'select partition, cursor from sync_state where connection_id = $1 and resource_type = $2 and cursor is not null',
    [connectionId, resourceType],
  );
  return new Map(rows.map((r) => [r.partition, r.cursor]));
}

/** Whether any resource type of the connection has synced. */
export async function hasAnyState(db: Queryable, connectionId: string): Promise<boolean> {
  const { rowCount } = await db.query('select 1 from sync_state where connection_id = $1 limit 1', [connectionId]);
  return (rowCount ?? 0) > 0;
}

/**
 * Moves each given partition's cursor to its new value (never backwards; a null value leaves the
 * cursor as it is) and stamps `last_synced_at`, in one statement.
 */
export async function advanceCursors(
  db: Queryable,
  connectionId: string,
  resourceType: string,
  cursors: readonly { partition: string; cursor: Date | null }[],
): Promise<void> {
  if (cursors.length === 0) return;
  await db.query(
    `insert into sync_state (connection_id, resource_type, partition, cursor, last_synced_at)
     select $1, $2, c.partition, c.cursor, now() from unnest($3::text[], $4::timestamptz[]) as c(partition, cursor)
     on conflict (connection_id, resource_type, partition) do update
        set cursor = greatest(excluded.cursor, sync_state.cursor), last_synced_at = excluded.last_synced_at`,
    [connectionId, resourceType, cursors.map((c) => c.partition), cursors.map((c) => c.cursor)],
  );
}

/**
 * Moves each given partition's cursor back to its `at` where it is past it (never forwards; a
 * partition without a cursor gets none; of several holds of one partition, the earliest). A record
 * a pass could not store because it stands behind a later tombstone must be read again by the next
 * pass, whatever moved the cursor past its change time meanwhile (a full pass beside it).
 */
export async function pullCursorsBack(
  db: Queryable,
  connectionId: string,
  resourceType: string,
  holds: readonly { partition: string; at: Date }[],
): Promise<void> {
  if (holds.length === 0) return;
  await db.query(
    `update sync_state s set cursor = h.at
       from (select partition, min(at) as at from unnest($3::text[], $4::timestamptz[]) as u(partition, at) group by partition) h
      where s.connection_id = $1 and s.resource_type = $2 and s.partition = h.partition and s.cursor > h.at`,
    [connectionId, resourceType, holds.map((h) => h.partition), holds.map((h) => h.at)],
  );
}

/**
 * Forgets the cursors of a connection's resource type whose partition is not in `partitions`
 * (a repository dropped from the config): added again later, it is read from nothing.
 */
export async function forgetOtherPartitions(db: Queryable, connectionId: string, resourceType: string, partitions: readonly string[]): Promise<void> {
  await db.query('delete from sync_state where connection_id = $1 and resource_type = $2 and partition <> all($3::text[])', [
    connectionId,
    resourceType,
    [...partitions],
  ]);
}

/** Forgets every cursor of the connection's resource types `resourceTypes` (their listing changed): each is read whole next. */
export async function forgetCursors(db: Queryable, connectionId: string, resourceTypes: readonly string[]): Promise<void> {
  if (resourceTypes.length === 0) return;
  await db.query('delete from sync_state where connection_id = $1 and resource_type = any($2::text[])', [connectionId, [...resourceTypes]]);
}

/**
 * Forgets the cursors of the connection's `partitions` in every resource type (partitions a config
 * change stopped naming, whose records it tombstoned): named again, each is read whole.
 */
export async function forgetPartitionCursors(db: Queryable, connectionId: string, partitions: readonly string[]): Promise<void> {
  if (partitions.length === 0) return;
  await db.query('delete from sync_state where connection_id = $1 and partition = any($2::text[])', [connectionId, [...partitions]]);
}
