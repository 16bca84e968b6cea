// A connect flow whose connection's config was changed, between the authorize step and the
// callback, to an auth that sends no token (an http connection's `basic`), through the real API
// (no Temporal needed), a real OAuth server on 127.0.0.1 (test/helpers/fake-oauth.ts) and real
// Postgres. The authorize step refuses such a config (409 `invalid_connection_config`): a grant
// the config never sends would be stored, and every sync fail for good. The callback decides on the
// config as it is when it stores the grant, under the connection's row lock: it refuses the same
// way and stores no grant, no tokens.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HttpServer } from '../lib/http';
import { TEST_API_KEY, callApi, listenWithoutTemporal } from './helpers/api';
import { createTestDatabase, lockWaits, until, type TestDatabase } from './helpers/database';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { consentedFlows } from './helpers/oauth-grants';

let db: TestDatabase;
let oauth: FakeOAuth;
let server: HttpServer;

beforeAll(async () => {
  [db, oauth] = await Promise.all([createTestDatabase(), startFakeOAuth()]);
  ({ server } = await listenWithoutTemporal(db.pool, 'oauth-callback-config'));
});
afterAll(async () => {
  await server?.close();
  await oauth?.close();
  await db?.drop();
});

const call = (method: string, path: string, body?: unknown, key: string | null = TEST_API_KEY) => callApi(server.url, key, method, path, body);

const config = (auth: Record<string, unknown>) => ({ base_url: oauth.url, auth, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } });

/** A new app of tenant acme on the fake OAuth server, a connection with bearer auth and no credentials, and the callback of a consent given for it. */
async function consented(): Promise<{ appId: string; id: string; callback: string }> {
  const { appId, id, callbacks } = await consentedFlows(server.url, db.pool, oauth, { prefix: 'config', flows: 1, config: config({ type: 'bearer' }) });
  return { appId, id, callback: callbacks[0]! };
}


/** What the connection holds and the grants of the app, as stored. */
async function stored(id: string, appId: string) {
  const row = await db.pool.query('select credential_kind, oauth_grant_id, credentials is not null as own_credentials from connections where id = $1', [id]);
  const grants = await db.pool.query('select id from oauth_grants where oauth_app_id = $1', [appId]);
  return { connection: row.rows[0], grants: grants.rows };
}

/** The PATCH that makes the connection's auth `basic`, with a username and password. */
const toBasic = (id: string) =>
  call('PATCH', `/connections/${id}`, { config: config({ type: 'basic' }), credentials: { username: 'user', password: 'a-password-0123' } });

const refusal = {
  status: 409,
  code: 'invalid_connection_config',
  message: expect.stringMatching(/^the connection's config sends no token an OAuth 2 grant could give: auth type 'basic' sends a username and password/),
};

describe("a connect flow's callback for a connection whose config no longer sends a token", () => {
  it('changed to basic auth before the person comes back: 409 invalid_connection_config, no code exchanged, no grant stored', async () => {
    const flow = await consented();
    expect((await toBasic(flow.id)).status).toBe(200);
    const exchanged = oauth.counts.code;
    const done = await call('GET', flow.callback, undefined, null);
    expect({ status: done.status, code: done.body?.error?.code, message: done.body?.error?.message }).toEqual(refusal);
    expect(oauth.counts.code).toBe(exchanged);
    expect(await stored(flow.id, flow.appId)).toEqual({ connection: { credential_kind: 'token', oauth_grant_id: null, own_credentials: true }, grants: [] });
  });

  it('changed to basic auth while the token endpoint answers the code exchange: 409 invalid_connection_config, no grant stored, the basic credentials kept', async () => {
    const flow = await consented();
    const { asked, release } = oauth.holdCodeAnswer();
    try {
      const callback = call('GET', flow.callback, undefined, null);
      await asked;
      expect((await toBasic(flow.id)).status).toBe(200);
      release();
      const done = await callback;
      expect({ status: done.status, code: done.body?.error?.code, message: done.body?.error?.message }).toEqual(refusal);
    } finally {
      oauth.beforeCodeAnswer = null;
    }
    expect(await stored(flow.id, flow.appId)).toEqual({ connection: { credential_kind: 'token', oauth_grant_id: null, own_credentials: true }, grants: [] });
    const row = await call('GET', `/connections/${flow.id}`);
    expect([row.body?.credential_kind, row.body?.config?.auth]).toEqual(['token', { type: 'basic' }]);
  });

  it("changed to basic auth by a transaction holding the connection's row when the callback stores its grant: the callback waits for it, then answers 409 and stores nothing", async () => {
    const flow = await consented();
    const { asked, release } = oauth.holdCodeAnswer();
    const changing = await db.pool.connect();
    try {
      const callback = call('GET', flow.callback, undefined, null);
      await asked;
      // The config change's transaction has written the row (not yet committed) when the callback,
      // its code exchanged, reaches the row to attach the grant.
      await changing.query('begin');
      await changing.query('update connections set config = $2 where id = $1', [flow.id, config({ type: 'basic' })]);
      release();
      await until(async () => (await lockWaits(db.pool)) >= 1);
      await changing.query('commit');
      const done = await callback;
      expect({ status: done.status, code: done.body?.error?.code, message: done.body?.error?.message }).toEqual(refusal);
    } finally {
      oauth.beforeCodeAnswer = null;
      changing.release();
    }
    expect(await stored(flow.id, flow.appId)).toEqual({ connection: { credential_kind: 'token', oauth_grant_id: null, own_credentials: false }, grants: [] });
  });
});
