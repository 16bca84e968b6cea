// Three connect flows of ONE connection coming back at once, through the real API (no Temporal
// needed), a real OAuth server on 127.0.0.1 (test/helpers/fake-oauth.ts) and real Postgres. Each
// callback reads the connection's grant and decides: replace that grant's tokens, or make a new
// grant the connection's. A decision read before another callback committed can find its grant
// gone by the time it acts: the grant it meant to replace was deleted (a connection's last grant
// is, once the connection takes another). Such a callback decides again on what the connection
// holds now; it never answers 500.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HttpServer } from '../lib/http';
import { TEST_API_KEY, callApi, listenWithoutTemporal } from './helpers/api';
import { createTestDatabase, lockWaits, type TestDatabase } from './helpers/database';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { consentedFlows, insertOAuthConnection } from './helpers/oauth-grants';
import { poolWithHook } from './helpers/pool-hooks';

let db: TestDatabase;
let oauth: FakeOAuth;
let server: HttpServer;
/** The test's hooks, each after a statement of a callback's transaction (set by a test). */
const hooks: {
  /** The connect flow reads the connection's grant to decide what to do. */
  grantRead: (() => Promise<void>) | null;
  /** The connection, about to take its grant, is read for the grant it leaves. */
  leaving: (() => Promise<void>) | null;
  /** A grant's tokens were replaced. */
  replaced: (() => Promise<void>) | null;
} = { grantRead: null, leaving: null, replaced: null };

beforeAll(async () => {
  [db, oauth] = await Promise.all([createTestDatabase(), startFakeOAuth()]);
  // After a callback's statement, the test decides when it goes on.
  const always = Number.MAX_SAFE_INTEGER;
  let hooked = poolWithHook(db.pool, 'after', 'select tenant_id, oauth_grant_id, oauth_app_id from connections where id', async () => hooks.grantRead?.(), always);
  hooked = poolWithHook(hooked, 'after', 'select oauth_grant_id from connections where id = $1', async () => hooks.leaving?.(), always);
  hooked = poolWithHook(hooked, 'after', 'update oauth_grants set credentials = to_jsonb', async () => hooks.replaced?.(), always);
  ({ server } = await listenWithoutTemporal(hooked, 'oauth-concurrent-callbacks'));
});
afterAll(async () => {
  await server?.close();
  await oauth?.close();
  await db?.drop();
});

const call = (method: string, path: string, body?: unknown, key: string | null = TEST_API_KEY) => callApi(server.url, key, method, path, body);

const config = () => ({ base_url: oauth.url, auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } });


/** A new app of tenant acme on the fake OAuth server, and a connection without credentials with `flows` consents given for it through the app. */
const consented = (flows: number) => consentedFlows(server.url, db.pool, oauth, { prefix: 'concurrent', flows, config: config() });

/** A promise and its resolver. */
function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => { open = resolve; });
  return { open, opened };
}

describe('three connect flows of one connection completing at once', () => {
  it('the callback whose grant was replaced and deleted under it decides again: all three answer 200 and the connection holds one live grant', async () => {
    const app = await call('POST', '/oauth-apps', {
      tenant_id: 'acme', name: `concurrent-${randomUUID().slice(0, 8)}`, client_id: oauth.clientId, client_secret: oauth.clientSecret,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${server.url}/oauth/callback`, scopes: ['read'],
    });
    expect(app.status).toBe(201);
    const id = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [id, `concurrent-${id.slice(0, 8)}`, config()]);
    // Three consents given for the connection (three browser tabs, say).
    const callbacks: string[] = [];
    for (let i = 0; i < 3; i++) {
      const start = await call('POST', `/connections/${id}/oauth/authorize`, { oauth_app_id: app.body.id });
      expect(start.status).toBe(200);
      const consent = await fetch(new URL(start.body.authorization_url as string), { redirect: 'manual' });
      const back = new URL(consent.headers.get('location')!);
      callbacks.push(`${back.pathname}${back.search}`);
    }

    // 1 and 2 both read "no grant"; 1 makes grant A the connection's and commits; 3 then reads A;
    // 2 makes its grant B the connection's (A, used by no connection, is deleted) and commits; only
    // then does 3 act on what it read (replace A's tokens).
    const secondRead = gate();
    const thirdRead = gate();
    let second: Promise<Awaited<ReturnType<typeof call>>> | null = null;
    let reads = 0;
    hooks.grantRead = async () => {
      reads += 1;
      if (reads === 1) await secondRead.opened;
      else if (reads === 2) { secondRead.open(); await thirdRead.opened; }
      else if (reads === 3) { thirdRead.open(); await second; }
    };
    let done: Awaited<ReturnType<typeof call>>[];
    let firstGrant = '';
    try {
      const first = call('GET', callbacks[0]!, undefined, null);
      while (reads < 1) await new Promise((r) => setTimeout(r, 10));
      second = call('GET', callbacks[1]!, undefined, null);
      const one = await first;
      expect([one.status, one.text]).toEqual([200, expect.any(String)]);
      const held = await db.pool.query<{ oauth_grant_id: string | null }>('select oauth_grant_id from connections where id = $1', [id]);
      expect(held.rows[0]!.oauth_grant_id).not.toBeNull();
      firstGrant = held.rows[0]!.oauth_grant_id!;
      const third = call('GET', callbacks[2]!, undefined, null);
      done = [one, await second, await third];
    } finally {
      hooks.grantRead = null;
    }
    expect(done.map((d) => [d.status, d.body?.status ?? d.text])).toEqual([[200, 'active'], [200, 'active'], [200, 'active']]);
    const grants = await db.pool.query<{ id: string }>('select id from oauth_grants where oauth_app_id = $1', [app.body.id]);
    const row = await db.pool.query<{ oauth_grant_id: string | null; credential_kind: string }>('select oauth_grant_id, credential_kind from connections where id = $1', [id]);
    expect(grants.rows).toHaveLength(1);
    expect(row.rows[0]).toEqual({ oauth_grant_id: grants.rows[0]!.id, credential_kind: 'oauth2' });
    // The third callback found the first's grant gone and read the connection's grant again.
    expect(grants.rows[0]!.id).not.toBe(firstGrant);
    expect(reads).toBe(4);
  });

  it('a callback whose grant is gone at each of its decisions answers 409 conflict, not 500, and the connection keeps its current grant', async () => {
    const app = await call('POST', '/oauth-apps', {
      tenant_id: 'acme', name: `changing-${randomUUID().slice(0, 8)}`, client_id: oauth.clientId, client_secret: oauth.clientSecret,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${server.url}/oauth/callback`, scopes: ['read'],
    });
    expect(app.status).toBe(201);
    const id = randomUUID();
    await insertOAuthConnection(db.pool, { id, tenantId: 'acme', appKey: `changing-${id.slice(0, 8)}`, config: config(), appId: app.body.id, sealed: '"held"' });
    const start = await call('POST', `/connections/${id}/oauth/authorize`, { oauth_app_id: app.body.id });
    expect(start.status).toBe(200);
    const consent = await fetch(new URL(start.body.authorization_url as string), { redirect: 'manual' });
    const back = new URL(consent.headers.get('location')!);
    // Each time the callback has read the connection's grant, the connection takes another grant
    // (committed), and the one read, used by no connection, is deleted.
    let latest = '';
    hooks.grantRead = async () => {
      latest = randomUUID();
      await db.pool.query(`insert into oauth_grants (id, tenant_id, oauth_app_id, credentials) values ($1, 'acme', $2, '"other"')`, [latest, app.body.id]);
      await db.pool.query('update connections set oauth_grant_id = $2 where id = $1', [id, latest]);
    };
    let done;
    try {
      done = await call('GET', `${back.pathname}${back.search}`, undefined, null);
    } finally {
      hooks.grantRead = null;
    }
    expect([done.status, done.body?.error?.code]).toEqual([409, 'conflict']);
    const row = await db.pool.query<{ oauth_grant_id: string | null }>('select oauth_grant_id from connections where id = $1', [id]);
    expect(row.rows[0]!.oauth_grant_id).toBe(latest);
    const grants = await db.pool.query<{ id: string; credentials: unknown }>('select id, credentials from oauth_grants where oauth_app_id = $1', [app.body.id]);
    expect(grants.rows).toEqual([{ id: latest, credentials: 'other' }]);
  });

  it('a callback making a new grant the connection takes while another replaces the grant it leaves: no deadlock, both answer 200', async () => {
    const { appId, id, callbacks } = await consented(3);
    // 2 reads "no grant" as the grant it leaves, to make its new grant B the connection's; 1 then
    // makes grant A the connection's and commits; 3 reads A and replaces A's tokens (holding A's
    // row); 2 then takes the connection's row, and must not wait for A while holding it (3, holding
    // A, waits for that row next).
    const secondLeaving = gate();
    const goSecond = gate();
    const thirdReplaced = gate();
    const goThird = gate();
    let leaving = 0;
    let replaced = 0;
    hooks.leaving = async () => {
      leaving += 1;
      if (leaving === 1) { secondLeaving.open(); await goSecond.opened; }
    };
    hooks.replaced = async () => {
      replaced += 1;
      if (replaced === 1) { thirdReplaced.open(); await goThird.opened; }
    };
    let done: Awaited<ReturnType<typeof call>>[];
    try {
      const second = call('GET', callbacks[1]!, undefined, null);
      await secondLeaving.opened;
      const one = await call('GET', callbacks[0]!, undefined, null);
      const third = call('GET', callbacks[2]!, undefined, null);
      await thirdReplaced.opened;
      goSecond.open();
      // 2 waits for a lock (A's row, which 3 holds) before 3 goes on.
      while ((await lockWaits(db.pool)) < 1) await new Promise((r) => setTimeout(r, 10));
      goThird.open();
      done = [one, await second, await third];
    } finally {
      hooks.leaving = null;
      hooks.replaced = null;
    }
    expect(done.map((d) => d.status)).toEqual([200, 200, 200]);
    const grants = await db.pool.query<{ id: string }>('select id from oauth_grants where oauth_app_id = $1', [appId]);
    const row = await db.pool.query<{ oauth_grant_id: string | null }>('select oauth_grant_id from connections where id = $1', [id]);
    expect(grants.rows).toHaveLength(1);
    expect(row.rows[0]!.oauth_grant_id).toBe(grants.rows[0]!.id);
  });
});
