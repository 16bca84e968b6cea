// OAuth 2 connections written straight into the database, as the connect flow leaves them: the
// grant as its own row (`oauth_grants`, sealed bound to its id) and the connection naming it.
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { seal } from '../../lib/credentials';
import { TEST_KEYRING } from './deps';

/**
 * A new OAuth app of `tenantId` whose authorize and token endpoints are at `origin`, its client
 * secret sealed with the test keyring as the API stores it; returns its id.
 */
export async function insertOAuthApp(
  pool: Pool,
  app: { tenantId: string; name: string; clientId: string; clientSecret: string; origin: string; id?: string },
): Promise<string> {
  const id = app.id ?? randomUUID();
  await pool.query(
    `insert into oauth_apps (id, tenant_id, name, client_id, client_secret, authorize_url, token_url, redirect_uri)
     values ($1, $2, $3, $4, $5, $6, $7, 'https://example.com/cb')`,
    [id, app.tenantId, app.name, app.clientId, seal(TEST_KEYRING, { table: 'oauth_apps', id }, app.clientSecret), `${app.origin}/authorize`, `${app.origin}/token`],
  );
  return id;
}

/** A new `oauth2` connection of grant `grantId` (made first when `sealed` is given: the grant's envelope). */
export async function insertOAuthConnection(
  pool: Pool,
  row: { id: string; tenantId: string; appKey: string; config: unknown; appId: string; grantId?: string; sealed?: string; metadata?: unknown },
): Promise<void> {
  const grantId = row.grantId ?? row.id;
  if (row.sealed !== undefined) {
    await pool.query('insert into oauth_grants (id, tenant_id, oauth_app_id, credentials) values ($1, $2, $3, to_jsonb($4::text))', [grantId, row.tenantId, row.appId, row.sealed]);
  }
  await pool.query(
    `insert into connections (id, tenant_id, provider_slug, app_key, config, credential_kind, oauth_app_id, oauth_grant_id, metadata)
     values ($1, $2, 'http', $3, $4, 'oauth2', $5, $6, $7)`,
    [row.id, row.tenantId, row.appKey, row.config, row.appId, grantId, row.metadata ?? {}],
  );
}

/** The credentials connection `connectionId` uses as stored, and the id they are sealed bound to. */
export async function storedCredentials(pool: Pool, connectionId: string): Promise<{ credentials: unknown; boundTo: string; status: string } | null> {
  const { rows } = await pool.query<{ credentials: unknown; bound_to: string; status: string }>(
    `select case when c.oauth_grant_id is null then c.credentials else g.credentials end as credentials, coalesce(c.oauth_grant_id, c.id) as bound_to, c.status
       from connections c left join oauth_grants g on g.id = c.oauth_grant_id where c.id = $1`,
    [connectionId],
  );
  return rows[0] ? { credentials: rows[0].credentials, boundTo: rows[0].bound_to, status: rows[0].status } : null;
}
