import type { PoolClient } from 'pg';
import type { ConnectorRecord } from '../connectors/types';

/**
 * Upserts one page of records in one statement. A record whose data and updated_at are unchanged
 * is not rewritten, nor is one the provider says is older than the stored version. Returns how many rows were inserted or changed. Duplicate ids within a page
 * keep the last occurrence (Postgres cannot upsert one row twice in a statement).
 */
export async function upsertRecords(
  tx: PoolClient,
  target: { connectionId: string; resourceType: string; jobId: string | null; at: Date },
  records: ConnectorRecord[],
): Promise<number> {
  if (records.length === 0) return 0;
  const byId = new Map(records.map((r) => [r.externalId, r]));
  const rows = [...byId.values()].map((r) => ({ external_id: r.externalId, data: r.data, updated_at: r.updatedAt }));
  const { rowCount } = await tx.query(
    `insert into records (connection_id, resource_type, external_id, data, source_updated_at, last_seen_job_id, synced_at)
     select $1, $2, r.external_id, r.data, r.updated_at, $3, $4
       from jsonb_to_recordset($5::jsonb) as r(external_id text, data jsonb, updated_at timestamptz)
     on conflict (connection_id, resource_type, external_id) do update
        set data = excluded.data, source_updated_at = excluded.source_updated_at,
            last_seen_job_id = excluded.last_seen_job_id, synced_at = excluded.synced_at
      where (records.data is distinct from excluded.data
             or records.source_updated_at is distinct from excluded.source_updated_at)
        -- Never replace a newer version with an older one (two jobs of a connection can overlap).
        and (records.source_updated_at is null or excluded.source_updated_at is null
             or excluded.source_updated_at >= records.source_updated_at)`,
    [target.connectionId, target.resourceType, target.jobId, target.at, JSON.stringify(rows)],
  );
  return rowCount ?? 0;
}
