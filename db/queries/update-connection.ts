import type { Queryable } from './queryable';
import { CONNECTION_COLUMNS, type ConnectionRow } from './connection-row';

/** Fields of a connection the API may change; undefined leaves a field as it is. */
export interface ConnectionChange {
  config?: Record<string, unknown>;
  /** null removes the credentials. */
  credentials?: Record<string, unknown> | null;
  status?: 'active' | 'paused' | 'disabled';
}

/** Applies `change` to connection `id` and returns the row, or null when there is none. */
export async function updateConnection(db: Queryable, id: string, change: ConnectionChange): Promise<ConnectionRow | null> {
  const { rows } = await db.query<ConnectionRow>(
    `update connections c
        set config = coalesce($2, c.config),
            credentials = case when $3 then $4 else c.credentials end,
            status = coalesce($5, c.status)
      where c.id = $1
      returning ${CONNECTION_COLUMNS}`,
    [id, change.config ?? null, change.credentials !== undefined, change.credentials ?? null, change.status ?? null],
  );
  return rows[0] ?? null;
}
