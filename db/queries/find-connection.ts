import type { Queryable } from './queryable';
import { CONNECTION_COLUMNS, type ConnectionRow } from './connection-row';

/** The connection with id `id`, or null. */
export async function findConnection(db: Queryable, id: string): Promise<ConnectionRow | null> {
  const { rows } = await db.query<ConnectionRow>(`select ${CONNECTION_COLUMNS} from connections c where c.id = $1`, [id]);
  return rows[0] ?? null;
}

/** The connections with app key `appKey`, of one tenant when given (at most two are returned). */
export async function findConnectionsByAppKey(db: Queryable, appKey: string, tenantId?: string): Promise<ConnectionRow[]> {
  const { rows } = await db.query<ConnectionRow>(
    `select ${CONNECTION_COLUMNS} from connections c
      where c.app_key = $1 and ($2::text is null or c.tenant_id = $2) order by c.id limit 2`,
    [appKey, tenantId ?? null],
  );
  return rows;
}
