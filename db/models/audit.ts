// SQL of `audit_log`: one row per mutating API call.
import type { Queryable } from '../queryable';

/** One audited call. */
export interface AuditRow {
  id: string;
  at: Date;
  actor: string;
  api_key_id: string | null;
  tenant_id: string | null;
  method: string;
  path: string;
  target_id: string | null;
  /** The other tenant a refused call of a tenant key aimed at; null otherwise. */
  target_tenant_id: string | null;
  status: number;
}

/** Appends one audited call. */
export async function insertAuditEntry(db: Queryable, entry: Omit<AuditRow, 'id' | 'at'>): Promise<void> {
  await db.query(
    'insert into audit_log (actor, api_key_id, tenant_id, method, path, target_id, target_tenant_id, status) values ($1, $2, $3, $4, $5, $6, $7, $8)',
    [entry.actor, entry.api_key_id, entry.tenant_id, entry.method, entry.path, entry.target_id, entry.target_tenant_id, entry.status],
  );
}

/**
 * A page of the audit log, newest first, before id `beforeId`, optionally of one tenant: its own
 * calls and the calls of other tenants' keys that aimed at it.
 */
export async function listAuditEntries(db: Queryable, query: { tenantId?: string; beforeId?: string; limit: number }): Promise<{ rows: AuditRow[]; more: boolean }> {
  const { rows } = await db.query<AuditRow>(
    `select id::text as id, at, actor, api_key_id, tenant_id, method, path, target_id, target_tenant_id, status from audit_log
      where ($1::text is null or tenant_id = $1 or target_tenant_id = $1) and ($2::bigint is null or id < $2)
      order by audit_log.id desc limit $3`, // the bigint column: the text alias would sort 9 before 10
    [query.tenantId ?? null, query.beforeId ?? null, query.limit + 1],
  );
  return { rows: rows.slice(0, query.limit), more: rows.length > query.limit };
}

/** Deletes up to `limit` of the entries written before `before`, oldest first; how many it deleted. */
export async function deleteOldAuditEntriesBatch(db: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await db.query('delete from audit_log where id in (select id from audit_log where at < $1 order by at limit $2)', [before, limit]);
  return rowCount ?? 0;
}
