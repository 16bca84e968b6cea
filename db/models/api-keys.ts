// SQL of `api_keys`: tenants' API keys, stored as SHA-256 hashes under a public prefix.
import type { Queryable } from '../queryable';

/** An API key as listed: never its secret or hash. */
export interface ApiKeyRow {
  id: string;
  tenant_id: string;
  name: string | null;
  prefix: string;
  scopes: string[];
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const API_KEY_COLUMNS = 'id, tenant_id, name, prefix, scopes, created_at, last_used_at, revoked_at';

/** Inserts a key and returns it (without its hash). */
export async function insertApiKey(
  db: Queryable,
  key: { tenantId: string; name: string | null; prefix: string; secretHash: Buffer; scopes: string[] },
): Promise<ApiKeyRow> {
  const { rows } = await db.query<ApiKeyRow>(
    `insert into api_keys (tenant_id, name, prefix, secret_hash, scopes) values ($1, $2, $3, $4, $5) returning ${API_KEY_COLUMNS}`,
    [key.tenantId, key.name, key.prefix, key.secretHash, key.scopes],
  );
  return rows[0]!;
}

/** A tenant's keys, oldest first, revoked ones included. */
export async function listApiKeys(db: Queryable, tenantId: string): Promise<ApiKeyRow[]> {
  const { rows } = await db.query<ApiKeyRow>(`select ${API_KEY_COLUMNS} from api_keys where tenant_id = $1 order by created_at, id`, [tenantId]);
  return rows;
}

/** Revokes key `id` of tenant `tenantId` (kept for the audit trail); the row, or null when there is none. */
export async function revokeApiKey(db: Queryable, tenantId: string, id: string): Promise<ApiKeyRow | null> {
  const { rows } = await db.query<ApiKeyRow>(
    `update api_keys set revoked_at = coalesce(revoked_at, now()) where id = $1 and tenant_id = $2 returning ${API_KEY_COLUMNS}`,
    [id, tenantId],
  );
  return rows[0] ?? null;
}

/** A key by its prefix, with its hash, for authentication: not revoked keys only. */
export async function findActiveApiKeyByPrefix(db: Queryable, prefix: string): Promise<(ApiKeyRow & { secret_hash: Buffer }) | null> {
  const { rows } = await db.query<ApiKeyRow & { secret_hash: Buffer }>(
    `select ${API_KEY_COLUMNS}, secret_hash from api_keys where prefix = $1 and revoked_at is null`,
    [prefix],
  );
  return rows[0] ?? null;
}

/** Stamps `last_used_at`, at most once a minute per key (a write per request would be waste). */
export async function touchApiKey(db: Queryable, id: string): Promise<void> {
  await db.query(`update api_keys set last_used_at = now() where id = $1 and (last_used_at is null or last_used_at < now() - interval '1 minute')`, [id]);
}
