// A PATCH taking a connection out of its OAuth 2 grant (new credentials, or a config whose origin or
// auth no longer fits the credentials) while connect flows of the connection complete, through the
// real API (no Temporal needed), a real OAuth server on 127.0.0.1 (test/helpers/fake-oauth.ts) and
// real Postgres. The grant a connection leaves is locked before the connection's row, the order of a
// callback replacing a grant's tokens (which then writes every connection of the grant); a PATCH
// that took the row first and the grant second (the grant read after the row was moved to it by a
// callback, or the grant left by a config change) deadlocked with such a callback: Postgres ended
// one of them (40P01), answered 500.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../lib/http';
import { TEST_API_KEY, callApi, listenWithoutTemporal } from './helpers/api';
import { createTestDatabase, lockWaits, until, type TestDatabase } from './helpers/database';
import type { LogLines } from './helpers/logs';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { consentedFlows } from './helpers/oauth-grants';
import { poolWithHook } from './helpers/pool-hooks';

let db: TestDatabase;
let oauth: FakeOAuth;
let server: HttpServer;
let lines: LogLines;
/** The test's hooks around statements of the API's transactions (set by a test, each taken once). */
const hooks: {
  /** Before a transaction locks a connection's row to change it (a PATCH, a callback's attach). */
  rowLock: (() => Promise<void>) | null;
  /** After a callback replaced a grant's tokens (its row held to the commit). */
  replaced: (() => Promise<void>) | null;
} = { rowLock: null, replaced: null };

/** Runs hook `name` once, if set: the first statement it matches after it was set. */
const take = (name: keyof typeof hooks) => async () => {
  const hook = hooks[name];
  hooks[name] = null;
  await hook?.();
};

beforeAll(async () => {
  [db, oauth] = await Promise.all([createTestDatabase(), startFakeOAuth()]);
  const always = Number.MAX_SAFE_INTEGER;
  let hooked = poolWithHook(db.pool, 'before', /from connections c where c\.id = \$1[\s\S]*for no key update/, take('rowLock'), always);
  hooked = poolWithHook(hooked, 'after', 'update oauth_grants set credentials = to_jsonb', take('replaced'), always);
  ({ server, lines } = await listenWithoutTemporal(hooked, 'oauth-grant-leaving'));
});
afterAll(async () => {
  await server?.close();
  await oauth?.close();
  await db?.drop();
});

beforeEach(() => {
  lines.length = 0;
});

const call = (method: string, path: string, body?: unknown, key: string | null = TEST_API_KEY) => callApi(server.url, key, method, path, body);

const config = () => ({ base_url: oauth.url, auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } });


/** How many of the API's requests Postgres ended as deadlocked (40P01), by its error log lines. */
const deadlocks = () => lines.filter((line) => (line.err as { code?: string } | undefined)?.code === '40P01').length;

/** A promise and its resolver. */
function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => { open = resolve; });
  return { open, opened };
}

/** A new app of tenant acme on the fake OAuth server, and a connection without credentials with `flows` consents given for it through the app. */
const consented = (flows: number) => consentedFlows(server.url, db.pool, oauth, { prefix: 'leaving', flows, config: config() });

/** The connection's credential and the grants of the app left in the database. */
async function stored(id: string, appId: string) {
  const row = await db.pool.query('select credential_kind, oauth_grant_id from connections where id = $1', [id]);
  const grants = await db.pool.query<{ id: string }>('select id from oauth_grants where oauth_app_id = $1', [appId]);
  return { connection: row.rows[0], grants: grants.rows.map((g) => g.id) };
}

describe('a PATCH taking a connection out of its grant while connect flows of the connection complete', () => {
  it('new credentials, the grant read as none, then the connection moved to a grant whose tokens a callback replaces: no deadlock, both answer 200, no grant left behind', async () => {
    const { appId, id, callbacks } = await consented(2);
    // The PATCH has read the grant the connection leaves (none) and is about to lock its row; then
    // callback 1 makes grant B the connection's (committed), and callback 2 replaces B's tokens and
    // holds B's row. The PATCH then must not hold the connection's row while it waits for B: 2,
    // holding B, takes that row next.
    const patchAtRow = gate();
    const goPatch = gate();
    const secondReplaced = gate();
    const goSecond = gate();
    hooks.rowLock = async () => { patchAtRow.open(); await goPatch.opened; };
    let patch: ReturnType<typeof call> | null = null;
    let second: ReturnType<typeof call> | null = null;
    try {
      patch = call('PATCH', `/connections/${id}`, { credentials: { token: 'static_token_0123456789' } });
      await patchAtRow.opened;
      const first = await call('GET', callbacks[0]!, undefined, null);
      expect([first.status, first.body?.status]).toEqual([200, 'active']);
      hooks.replaced = async () => { secondReplaced.open(); await goSecond.opened; };
      second = call('GET', callbacks[1]!, undefined, null);
      await secondReplaced.opened;
      goPatch.open();
      // The PATCH waits for a lock (B's row, which 2 holds) before 2 goes on.
      await until(async () => (await lockWaits(db.pool)) >= 1);
      goSecond.open();
      const [patched, done] = await Promise.all([patch, second]);
      expect({ deadlocks: deadlocks(), patch: [patched.status, patched.body?.credential_kind ?? patched.text], callback: [done.status, done.body?.status ?? done.text] })
        .toEqual({ deadlocks: 0, patch: [200, 'token'], callback: [200, 'active'] });
    } finally {
      hooks.rowLock = null;
      hooks.replaced = null;
      goPatch.open();
      goSecond.open();
      await Promise.allSettled([patch, second]);
    }
    // The PATCH came last: the connection holds its token, and the grant it left is gone with its tokens.
    expect(await stored(id, appId)).toEqual({ connection: { credential_kind: 'token', oauth_grant_id: null }, grants: [] });
  });

  it("a config change of the connection's auth (its grant no longer fits) while a callback replaces the grant's tokens: no deadlock, both answer 200, no grant left behind", async () => {
    const { appId, id, callbacks } = await consented(2);
    const first = await call('GET', callbacks[0]!, undefined, null);
    expect([first.status, first.body?.status]).toEqual([200, 'active']);
    // Callback 2 replaces the grant's tokens and holds its row; the PATCH (another header for the
    // token: the grant is not sent there, so the connection leaves it) then comes, and 2 goes on once
    // it waits.
    const secondReplaced = gate();
    const goSecond = gate();
    hooks.replaced = async () => { secondReplaced.open(); await goSecond.opened; };
    let patch: ReturnType<typeof call> | null = null;
    let second: ReturnType<typeof call> | null = null;
    try {
      second = call('GET', callbacks[1]!, undefined, null);
      await secondReplaced.opened;
      patch = call('PATCH', `/connections/${id}`, { config: { ...config(), auth: { type: 'header', name: 'X-Api-Token' } } });
      await until(async () => (await lockWaits(db.pool)) >= 1);
      goSecond.open();
      const [patched, done] = await Promise.all([patch, second]);
      expect({ deadlocks: deadlocks(), patch: [patched.status, patched.body?.has_credentials ?? patched.text], callback: [done.status, done.body?.status ?? done.text] })
        .toEqual({ deadlocks: 0, patch: [200, false], callback: [200, 'active'] });
    } finally {
      hooks.replaced = null;
      goSecond.open();
      await Promise.allSettled([patch, second]);
    }
    expect(await stored(id, appId)).toEqual({ connection: { credential_kind: 'token', oauth_grant_id: null }, grants: [] });
  });
});
