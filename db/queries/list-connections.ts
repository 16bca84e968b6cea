import type { Queryable } from './queryable';
import { CONNECTION_COLUMNS, type ConnectionRow } from './connection-row';

/** Filters and keyset position of a connections listing. */
export interface ListConnectionsInput {
  tenantId?: string;
  providerSlug?: string;
  status?: string;
  /** Return connections with an id greater than this (the previous page's last id). */
  afterId?: string;
  limit: number;
}

/** One page of connections ordered by id; `limit + 1` rows are read to know if more exist. */
export async function listConnections(db: Queryable, input: ListConnectionsInput): Promise<{ rows: ConnectionRow[]; more: boolean }> {
  const { rows } = await db.query<ConnectionRow>(
    `select ${CONNECTION_COLUMNS} from connections c
      where ($1::text is null or c.tenant_id = $1)
        and ($2::text is null or c.provider_slug = $2)
        and ($3::text is null or c.status = $3)
        and ($4::uuid is null or c.id > $4)
      order by c.id limit $5`,
    [input.tenantId ?? null, input.providerSlug ?? null, input.status ?? null, input.afterId ?? null, input.limit + 1],
  );
  return { rows: rows.slice(0, input.limit), more: rows.length > input.limit };
}
