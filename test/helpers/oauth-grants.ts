// OAuth 2 connections written straight into the database, as the connect flow leaves them: the
// grant as its own row (`oauth_grants`, sealed bound to its id) and the connection naming it.
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { expect } from 'vitest';
import { seal } from '../../lib/credentials';
import { TEST_API_KEY, callApi } from './api';
import { TEST_KEYRING } from './deps';
import type { FakeOAuth } from './fake-oauth';

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

/**
 * Through the API at `apiUrl` (the admin key): a new OAuth app of tenant acme on `oauth`, a
 * connection without credentials (provider http, `config`) written straight into the database,
 * and `flows` consents given for it through the app; returns the app, the connection and each
 * consent's callback (path and query, to be called on the API).
 */
export async function consentedFlows(
  apiUrl: string,
  pool: Pool,
  oauth: FakeOAuth,
  opts: { prefix: string; flows: number; config: unknown },
): Promise<{ appId: string; id: string; callbacks: string[] }> {
  const call = (method: string, path: string, body?: unknown) => callApi(apiUrl, TEST_API_KEY, method, path, body);
  const app = await call('POST', '/oauth-apps', {
    tenant_id: 'acme', name: `${opts.prefix}-${randomUUID().slice(0, 8)}`, client_id: oauth.clientId, client_secret: oauth.clientSecret,
    authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${apiUrl}/oauth/callback`, scopes: ['read'],
  });
  expect(app.status).toBe(201);
  const id = randomUUID();
  await pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [id, `${opts.prefix}-${id.slice(0, 8)}`, opts.config]);
  const callbacks: string[] = [];
  for (let i = 0; i < opts.flows; i++) {
    const start = await call('POST', `/connections/${id}/oauth/authorize`, { oauth_app_id: app.body.id });
    expect(start.status).toBe(200);
    const consent = await fetch(new URL(start.body.authorization_url as string), { redirect: 'manual' });
    const back = new URL(consent.headers.get('location')!);
    callbacks.push(`${back.pathname}${back.search}`);
  }
  return { appId: app.body.id as string, id, callbacks };
}
