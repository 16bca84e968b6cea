// The OAuth callback's code exchange (a request to the app's token endpoint, up to
// PROVIDER_REQUEST_TIMEOUT_SECONDS, holding no database connection) runs outside its tenant's turn
// at the API's pool: the callback gives the turn up for it and takes one again to store the grant.
// A slow token endpoint thus holds no place of the pool, and other tenants' requests are answered
// while exchanges wait on it. The exchange itself ends at the request timeout. Real API over HTTP
// on 127.0.0.1, real Postgres, and an OAuth server on 127.0.0.1 (test/helpers/fake-oauth.ts) whose
// token endpoint stalls.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { createPool, type Pool } from '../db/pool';
import { listen, type HttpServer } from '../lib/http';
import { TEST_API_KEY, apiAppWithoutTemporal, callApi } from './helpers/api';
import { createTestDatabase, until, type TestDatabase } from './helpers/database';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';

/** The API's pool: two connections, so a tenant's share is one and two tenants' callbacks could take both places. */
const API_POOL_MAX = 2;
/** How long the token endpoint stalls at most in the first test, far below the request timeout. */
const STALL_MS = 8_000;
/** PROVIDER_REQUEST_TIMEOUT_SECONDS of the second API app, whose token endpoint never answers in time. */
const SHORT_TIMEOUT_MS = 1_500;

let db: TestDatabase;
let oauth: FakeOAuth;
let apiPool: Pool;
let server: HttpServer;
let shortServer: HttpServer;
/** Ends every stall still held (so the fake server can close). */
const stalls = new Set<() => void>();

beforeAll(async () => {
  [db, oauth] = await Promise.all([createTestDatabase(), startFakeOAuth()]);
  apiPool = createPool(db.url, API_POOL_MAX);
  server = await listen(apiAppWithoutTemporal(apiPool, 'oauth-callback-turns'), '127.0.0.1', 0);
  shortServer = await listen(apiAppWithoutTemporal(apiPool, 'oauth-callback-turns', { providers: { ...TEST_PROVIDER_POLICY, timeoutMs: SHORT_TIMEOUT_MS } }), '127.0.0.1', 0);
});
afterAll(async () => {
  for (const end of stalls) end();
  await server?.close();
  await shortServer?.close();
  await oauth?.close();
  await apiPool?.end();
  await db?.drop();
});

/**
 * A new OAuth app of `tenant` on the fake OAuth server, a connection of the tenant without
 * credentials, and a consent given for it through `apiUrl`: the callback to call (path and query).
 */
async function consented(apiUrl: string, tenant: string): Promise<{ id: string; callback: string }> {
  const admin = (method: string, path: string, body?: unknown) => callApi(apiUrl, TEST_API_KEY, method, path, body);
  const app = await admin('POST', '/oauth-apps', {
    tenant_id: tenant, name: `turns-${randomUUID().slice(0, 8)}`, client_id: oauth.clientId, client_secret: oauth.clientSecret,
    authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${apiUrl}/oauth/callback`, scopes: ['read'],
  });
  expect(app.status, app.text).toBe(201);
  const id = randomUUID();
  const config = { base_url: oauth.url, auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } };
  await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, $2, 'http', $3, $4)`, [id, tenant, `turns-${id.slice(0, 8)}`, config]);
  const start = await admin('POST', `/connections/${id}/oauth/authorize`, { oauth_app_id: app.body.id });
  expect(start.status, start.text).toBe(200);
  const consent = await fetch(new URL(start.body.authorization_url as string), { redirect: 'manual' });
  const back = new URL(consent.headers.get('location')!);
  return { id, callback: `${back.pathname}${back.search}` };
}

/** Makes every code exchange wait until `release()` (or STALL_MS): `arrived` and `answered` count exchanges. */
function stallCodeExchanges(ms: number) {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const timer = setTimeout(release, ms);
  const end = () => {
    clearTimeout(timer);
    release();
  };
  stalls.add(end);
  const seen = { arrived: 0, answered: 0 };
  oauth.beforeCodeAnswer = async () => {
    seen.arrived += 1;
    await gate;
    seen.answered += 1;
  };
  return { seen, release: end };
}

describe("OAuth callbacks and the tenants' turns at the API's pool (real API, Postgres, OAuth server)", () => {
  it("answers a third tenant while two tenants' callbacks wait on a slow token endpoint, then stores both grants", async () => {
    const flows = [await consented(server.url, 'alpha'), await consented(server.url, 'beta')];
    const gamma = (await createApiKey(db, 'gamma')).secret;
    const stall = stallCodeExchanges(STALL_MS);
    try {
      const callbacks = flows.map((flow) => callApi(server.url, null, 'GET', flow.callback));
      // Both exchanges are under way, each callback having found its state and its tenant's turn.
      await until(async () => stall.seen.arrived === 2);
      const other = await callApi(server.url, gamma, 'GET', '/connections');
      const exchangesAnsweredBefore = stall.seen.answered;
      stall.release();
      const done = await Promise.all(callbacks);
      expect(other.status, other.text).toBe(200);
      expect(exchangesAnsweredBefore, 'code exchanges answered before the other tenant was').toBe(0);
      // Each callback took a turn again after its exchange and stored its grant.
      expect(done.map((a) => (a.status === 200 ? 200 : a.text))).toEqual([200, 200]);
      const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from connections where id = any($1) and credential_kind = 'oauth2' and oauth_grant_id is not null`, [flows.map((f) => f.id)]);
      expect(rows[0]!.n).toBe(2);
    } finally {
      stall.release();
      oauth.beforeCodeAnswer = null;
    }
  }, 60_000);

  it('ends a code exchange the token endpoint does not answer at the request timeout (502), and the tenant is answered after it', async () => {
    const flow = await consented(shortServer.url, 'delta');
    const delta = (await createApiKey(db, 'delta')).secret;
    // Stalls far past the timeout (released when the test ends).
    const stall = stallCodeExchanges(60_000);
    try {
      const began = Date.now();
      const answer = await callApi(shortServer.url, null, 'GET', flow.callback);
      const took = Date.now() - began;
      expect(answer.status, answer.text).toBe(502);
      expect(answer.body).toMatchObject({ error: { code: 'token_exchange_failed' } });
      expect(took).toBeGreaterThanOrEqual(SHORT_TIMEOUT_MS - 100);
      expect(took).toBeLessThan(SHORT_TIMEOUT_MS + 5_000);
      expect(stall.seen).toEqual({ arrived: 1, answered: 0 });
      // Nothing of the tenant's is left holding its turn.
      const after = await callApi(shortServer.url, delta, 'GET', '/connections');
      expect(after.status, after.text).toBe(200);
    } finally {
      stall.release();
      oauth.beforeCodeAnswer = null;
    }
  }, 60_000);
});
