// SQL of `sync_state`: per connection and resource type, the cursor the next incremental fetch
// starts from and when the resource last synced.
import type { Queryable } from '../queryable';

/** The cursor of a connection's resource type, or null when it never synced. */
export async function findCursor(db: Queryable, connectionId: string, resourceType: string): Promise<Date | null> {
  const { rows } = await db.query<{ cursor: Date | null }>(
    'select cursor from sync_state where connection_id = $1 and resource_type = $2',
    [connectionId, resourceType],
  );
  return rows[0]?.cursor ?? null;
}

/** Whether any resource type of the connection has synced. */
export async function hasAnyState(db: Queryable, connectionId: string): Promise<boolean> {
  const { rowCount } = await db.query('select 1 from sync_state where connection_id = $1 limit 1', [connectionId]);
  return (rowCount ?? 0) > 0;
}

/** Moves a resource type's cursor to `highWater` (never backwards) and stamps `last_synced_at`. */
export async function advanceCursor(db: Queryable, connectionId: string, resourceType: string, highWater: Date | null): Promise<void> {
  await db.query(
    `insert into sync_state (connection_id, resource_type, cursor, last_synced_at)
     values ($1, $2, $3, now())
     on conflict (connection_id, resource_type) do update
        set cursor = greatest(excluded.cursor, sync_state.cursor), last_synced_at = excluded.last_synced_at`,
    [connectionId, resourceType, highWater],
  );
}
