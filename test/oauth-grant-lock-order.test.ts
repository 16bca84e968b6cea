// Two requests about one shared OAuth 2 grant at once, through the real API (no Temporal needed),
// a real OAuth server on 127.0.0.1 (test/helpers/fake-oauth.ts) and real Postgres: the connect
// flow's callback on one connection of the grant (which replaces the grant's tokens and makes every
// connection of it active) and a PATCH giving another connection of the grant new credentials.
// Both take the grant's row and connection rows; taken in opposite orders they deadlocked, and
// Postgres ended one of them with an error.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HttpServer } from '../lib/http';
import { sealCredentials } from '../lib/credentials';
import { TEST_API_KEY, callApi, listenWithoutTemporal } from './helpers/api';
import { createTestDatabase, lockWaits, until, type TestDatabase } from './helpers/database';
import { TEST_KEYRING } from './helpers/deps';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { insertOAuthConnection } from './helpers/oauth-grants';

let db: TestDatabase;
let oauth: FakeOAuth;
let server: HttpServer;

beforeAll(async () => {
  [db, oauth] = await Promise.all([createTestDatabase(), startFakeOAuth()]);
  ({ server } = await listenWithoutTemporal(db.pool, 'oauth-grant-lock-order'));
});
afterAll(async () => {
  await server?.close();
  await oauth?.close();
  await db?.drop();
});

const call = (method: string, path: string, body?: unknown, key: string | null = TEST_API_KEY) => callApi(server.url, key, method, path, body);

const config = () => ({ base_url: oauth.url, auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } });


describe('a connect flow on one connection of a shared grant while another connection of it is given new credentials', () => {
  it('both requests succeed: the callback replaces the grant for the connections still on it, the PATCH takes the other out of it', async () => {
    const created = await call('POST', '/oauth-apps', {
      tenant_id: 'acme', name: `lock-order-${randomUUID().slice(0, 8)}`, client_id: oauth.clientId, client_secret: oauth.clientSecret,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${server.url}/oauth/callback`, scopes: ['read'],
    });
    expect(created.status).toBe(201);
    const owner = randomUUID();
    const grant = oauth.grant();
    const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + 3_600_000).toISOString(), scopes: ['read'] };
    await insertOAuthConnection(db.pool, { id: owner, tenantId: 'acme', appKey: `lock-owner-${owner.slice(0, 8)}`, config: config(), appId: created.body.id, sealed: sealCredentials(TEST_KEYRING, owner, secret)! });
    const sharer = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [sharer, `lock-sharer-${sharer.slice(0, 8)}`, config()]);
    const shared = await call('PATCH', `/connections/${sharer}`, { credentials: { kind: 'oauth2', grant_from_connection: owner } });
    expect([shared.status, shared.body.credential_kind]).toEqual([200, 'oauth2']);

    // The person consents on the owner; the provider sends them back to the callback.
    const start = await call('POST', `/connections/${owner}/oauth/authorize`, { oauth_app_id: created.body.id });
    expect(start.status).toBe(200);
    const consent = await fetch(new URL(start.body.authorization_url as string), { redirect: 'manual' });
    const back = new URL(consent.headers.get('location')!);

    // The owner's row is busy a moment (a status change, say) when the callback reaches it, after it
    // took the grant; meanwhile the sharer is given a static token.
    const busy = await db.pool.connect();
    try {
      await busy.query('begin');
      await busy.query('select 1 from connections where id = $1 for no key update', [owner]);
      const callback = call('GET', `${back.pathname}${back.search}`, undefined, null);
      await until(async () => (await lockWaits(db.pool)) >= 1);
      const patch = call('PATCH', `/connections/${sharer}`, { credentials: { token: 'sharer_static_token_0123456789' } });
      await until(async () => (await lockWaits(db.pool)) >= 2);
      await busy.query('commit');
      const [done, patched] = await Promise.all([callback, patch]);
      expect([done.status, done.text]).toEqual([200, expect.any(String)]);
      expect([patched.status, patched.text]).toEqual([200, expect.any(String)]);
      expect(patched.body).toMatchObject({ credential_kind: 'token' });
    } finally {
      busy.release();
    }
    const grants = await db.pool.query<{ id: string; oauth_grant_id: string | null }>('select id, oauth_grant_id from connections where id = any($1)', [[owner, sharer]]);
    expect(Object.fromEntries(grants.rows.map((r) => [r.id, r.oauth_grant_id]))).toEqual({ [owner]: owner, [sharer]: null });
  });
});

describe('an OAuth app deleted while a connect flow through it completes', () => {
  /** A new app, a connection without credentials, and the callback URL of a consent given through the app. */
  async function consented() {
    const created = await call('POST', '/oauth-apps', {
      tenant_id: 'acme', name: `deleted-${randomUUID().slice(0, 8)}`, client_id: oauth.clientId, client_secret: oauth.clientSecret,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${server.url}/oauth/callback`, scopes: ['read'],
    });
    expect(created.status).toBe(201);
    const id = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [id, `deleted-${id.slice(0, 8)}`, config()]);
    const start = await call('POST', `/connections/${id}/oauth/authorize`, { oauth_app_id: created.body.id });
    expect(start.status).toBe(200);
    const consent = await fetch(new URL(start.body.authorization_url as string), { redirect: 'manual' });
    const back = new URL(consent.headers.get('location')!);
    return { appId: created.body.id as string, id, callback: `${back.pathname}${back.search}` };
  }

  it('deleted while the token endpoint answers the code exchange: the callback answers 404 naming the app, and the connection holds no grant', async () => {
    const flow = await consented();
    const { asked, release } = oauth.holdCodeAnswer();
    try {
      const callback = call('GET', flow.callback, undefined, null);
      await asked;
      const deleted = await call('DELETE', `/oauth-apps/${flow.appId}`);
      expect(deleted.status).toBe(204);
      release();
      const done = await callback;
      expect([done.status, done.body?.error?.code]).toEqual([404, 'not_found']);
      expect(done.body.error.message).toMatch(/OAuth app/);
    } finally {
      oauth.beforeCodeAnswer = null;
    }
    const row = await db.pool.query('select oauth_grant_id, credential_kind from connections where id = $1', [flow.id]);
    expect(row.rows[0]).toEqual({ oauth_grant_id: null, credential_kind: 'token' });
  });

  it('deleted while the callback stores the grant: the deletion answers 409 oauth_app_in_use, and the callback stores it', async () => {
    const flow = await consented();
    // The connection's row is busy a moment when the callback, holding its new grant, reaches it.
    const busy = await db.pool.connect();
    try {
      await busy.query('begin');
      await busy.query('select 1 from connections where id = $1 for no key update', [flow.id]);
      const callback = call('GET', flow.callback, undefined, null);
      await until(async () => (await lockWaits(db.pool)) >= 1);
      const deletion = call('DELETE', `/oauth-apps/${flow.appId}`);
      await until(async () => (await lockWaits(db.pool)) >= 2);
      await busy.query('commit');
      const [done, deleted] = await Promise.all([callback, deletion]);
      expect([done.status, done.body?.status]).toEqual([200, 'active']);
      expect([deleted.status, deleted.body?.error?.code]).toEqual([409, 'oauth_app_in_use']);
    } finally {
      busy.release();
    }
    const row = await db.pool.query('select oauth_app_id, credential_kind from connections where id = $1', [flow.id]);
    expect(row.rows[0]).toEqual({ oauth_app_id: flow.appId, credential_kind: 'oauth2' });
  });

  it('its connection deleted while the callback stores the grant: 404, and no grant is left behind with its tokens', async () => {
    const flow = await consented();
    // While the token endpoint answers the exchange (the state is consumed), the connection's
    // deletion begins; it holds the row when the callback, holding its new grant, reaches it.
    const deleting = await db.pool.connect();
    const { asked, release } = oauth.holdCodeAnswer();
    try {
      const callback = call('GET', flow.callback, undefined, null);
      await asked;
      await deleting.query('begin');
      await deleting.query('delete from connections where id = $1', [flow.id]);
      release();
      await until(async () => (await lockWaits(db.pool)) >= 1);
      await deleting.query('commit');
      const done = await callback;
      expect([done.status, done.body?.error?.code]).toEqual([404, 'not_found']);
    } finally {
      oauth.beforeCodeAnswer = null;
      deleting.release();
    }
    const grants = await db.pool.query('select id from oauth_grants where oauth_app_id = $1', [flow.appId]);
    expect(grants.rows).toEqual([]);
  });
});

describe('a connect flow started while its connection or app is deleted', () => {
  /** A new app and a connection without credentials. */
  async function appAndConnection() {
    const created = await call('POST', '/oauth-apps', {
      tenant_id: 'acme', name: `start-${randomUUID().slice(0, 8)}`, client_id: oauth.clientId, client_secret: oauth.clientSecret,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${server.url}/oauth/callback`, scopes: ['read'],
    });
    expect(created.status).toBe(201);
    const id = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [id, `start-${id.slice(0, 8)}`, config()]);
    return { appId: created.body.id as string, id };
  }

  for (const [what, table] of [['connection', 'connections'], ['OAuth app', 'oauth_apps']] as const) {
    it(`its ${what} deleted as the flow is stored: 404, not 500, and no flow is left`, async () => {
      const { appId, id } = await appAndConnection();
      // The row's deletion is under way (uncommitted) when the start stores its flow.
      const deleting = await db.pool.connect();
      try {
        await deleting.query('begin');
        await deleting.query(`delete from ${table} where id = $1`, [table === 'connections' ? id : appId]);
        const start = call('POST', `/connections/${id}/oauth/authorize`, { oauth_app_id: appId });
        await until(async () => (await lockWaits(db.pool)) >= 1);
        await deleting.query('commit');
        const done = await start;
        expect([done.status, done.body?.error?.code]).toEqual([404, 'not_found']);
      } finally {
        deleting.release();
      }
      expect((await db.pool.query('select 1 from oauth_states where connection_id = $1 or oauth_app_id = $2', [id, appId])).rowCount).toBe(0);
    });
  }
});

describe('a grant shared from a connection that leaves it at the same time', () => {
  it('the share answers 409 grant_source_not_oauth2 (the source holds no grant any more), not 500, and the source takes its token', async () => {
    const created = await call('POST', '/oauth-apps', {
      tenant_id: 'acme', name: `leaving-${randomUUID().slice(0, 8)}`, client_id: oauth.clientId, client_secret: oauth.clientSecret,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${server.url}/oauth/callback`, scopes: ['read'],
    });
    expect(created.status).toBe(201);
    const source = randomUUID();
    const grant = oauth.grant();
    const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + 3_600_000).toISOString(), scopes: ['read'] };
    await insertOAuthConnection(db.pool, { id: source, tenantId: 'acme', appKey: `leaving-${source.slice(0, 8)}`, config: config(), appId: created.body.id, sealed: sealCredentials(TEST_KEYRING, source, secret)! });
    const target = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [target, `target-${target.slice(0, 8)}`, config()]);
    // The source's row is busy a moment when its PATCH (a static token: it leaves its grant, the
    // grant's last connection) reaches it; meanwhile the target asks to share the source's grant.
    const busy = await db.pool.connect();
    try {
      await busy.query('begin');
      await busy.query('select 1 from connections where id = $1 for no key update', [source]);
      const leaving = call('PATCH', `/connections/${source}`, { credentials: { token: 'source_static_token_0123456789' } });
      await until(async () => (await lockWaits(db.pool)) >= 1);
      const sharing = call('PATCH', `/connections/${target}`, { credentials: { kind: 'oauth2', grant_from_connection: source } });
      await until(async () => (await lockWaits(db.pool)) >= 2);
      await busy.query('commit');
      const [left, shared] = await Promise.all([leaving, sharing]);
      expect([left.status, left.body?.credential_kind]).toEqual([200, 'token']);
      expect([shared.status, shared.body?.error?.code]).toEqual([409, 'grant_source_not_oauth2']);
    } finally {
      busy.release();
    }
    const rows = await db.pool.query('select oauth_grant_id, credential_kind from connections where id = $1', [target]);
    expect(rows.rows[0]).toEqual({ oauth_grant_id: null, credential_kind: 'token' });
  });
});
