// A tenant's connect flows cannot take the API's database pool from the other tenants: the OAuth
// callback (called with no API key, its state naming the tenant) takes its tenant's turns as a
// tenant key's request does, so however many of a tenant's callbacks wait (here on their
// connections' rows, which long full-pass deletions of unseen records hold), they hold at most half the pool
// and another tenant's request is answered meanwhile. Real API, Postgres, and an OAuth server on
// 127.0.0.1 (test/helpers/fake-oauth.ts).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { createPool, type Pool } from '../db/pool';
import { listen, type HttpServer } from '../lib/http';
import { TEST_API_KEY, apiAppWithoutTemporal, callApi } from './helpers/api';
import { createTestDatabase, lockWaits, until, type TestDatabase } from './helpers/database';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { capturingLogger } from './helpers/logs';

/** The API's pool: four connections, so half of it is two. */
const API_POOL_MAX = 4;

let db: TestDatabase;
let oauth: FakeOAuth;
let apiPool: Pool;
let server: HttpServer;
/** State lookups of callbacks that have ended. */
let lookups = 0;
const captured = capturingLogger();

beforeAll(async () => {
  [db, oauth] = await Promise.all([createTestDatabase(), startFakeOAuth()]);
  apiPool = createPool(db.url, API_POOL_MAX);
  const counting = new Proxy(apiPool, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop !== 'query' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        if (typeof args[0] === 'string' && args[0].includes('delete from oauth_states where state_hash')) lookups += 1;
        return result;
      };
    },
  });
  server = await listen(apiAppWithoutTemporal(counting, 'oauth-callbacks', { logger: captured.logger }), '127.0.0.1', 0);
});
afterAll(async () => {
  await server?.close();
  await oauth?.close();
  await apiPool?.end();
  await db?.drop();
});

const call = (method: string, path: string, body?: unknown, key: string | null = TEST_API_KEY) => callApi(server.url, key, method, path, body);

describe("a tenant's OAuth callbacks waiting on a lock (real API, Postgres, OAuth server)", () => {
  it("hold at most half the API's pool: another tenant's request is answered meanwhile", async () => {
    const config = { base_url: oauth.url, auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } };
    const app = await call('POST', '/oauth-apps', {
      tenant_id: 'noisy', name: `callbacks-${randomUUID().slice(0, 8)}`, client_id: oauth.clientId, client_secret: oauth.clientSecret,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${server.url}/oauth/callback`, scopes: ['read'],
    });
    expect(app.status, app.text).toBe(201);
    // Four connections of the noisy tenant, each with a connect flow consented: four callbacks to come.
    const ids: string[] = [];
    const callbacks: string[] = [];
    for (let n = 0; n < 4; n++) {
      const id = randomUUID();
      ids.push(id);
      await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'noisy', 'http', $2, $3)`, [id, `flows-${n}`, config]);
      const start = await call('POST', `/connections/${id}/oauth/authorize`, { oauth_app_id: app.body.id });
      expect(start.status, start.text).toBe(200);
      const consent = await fetch(new URL(start.body.authorization_url as string), { redirect: 'manual' });
      const back = new URL(consent.headers.get('location')!);
      callbacks.push(`${back.pathname}${back.search}`);
    }
    const quiet = (await createApiKey(db, 'quiet')).secret;

    // The connections' rows are held (full passes deleting their unseen records read their config FOR SHARE).
    const deletion = await db.pool.connect();
    try {
      await deletion.query('begin');
      await deletion.query('select 1 from connections where id = any($1) for share', [ids]);
      const answers = Promise.all(callbacks.map((path) => call('GET', path, undefined, null)));
      // Every callback found its state; those that hold connections wait for the row (all four
      // without turns; two with them, the other two waiting for their tenant's turn, before or
      // after their code exchange, which runs outside the turn: by the order the turns came in,
      // two to four codes were exchanged).
      await until(async () => (await lockWaits(db.pool)) >= 4 || ((await lockWaits(db.pool)) >= 2 && lookups >= 4), 1500);
      expect(oauth.counts.code).toBeGreaterThanOrEqual(2);
      expect({ inUse: apiPool.totalCount - apiPool.idleCount }).toEqual({ inUse: API_POOL_MAX / 2 });
      // The quiet tenant's request finds a free connection.
      const other = await call('GET', '/connections', undefined, quiet);
      expect(other.status, other.text).toBe(200);
      await deletion.query('commit');
      const done = await answers;
      expect(done.map((a) => (a.status === 200 ? 200 : a.text)), JSON.stringify(captured.lines.filter((l) => JSON.stringify(l).includes('error')).slice(0, 3))).toEqual([200, 200, 200, 200]);
    } finally {
      await deletion.query('rollback').catch(() => undefined);
      deletion.release();
    }
  }, 120_000);
});
