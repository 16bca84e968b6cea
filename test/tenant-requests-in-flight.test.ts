// One tenant's requests cannot take the API's database pool from the others: a tenant key's
// requests in flight in an API process are held to half the pool, the rest wait their turn in
// the process (holding no connection), and another tenant's request is answered meanwhile. Real
// API app and Postgres; a tenant's requests are kept in flight by a row lock the test holds.
import { createServer, request as httpRequest, type ClientRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { createPool, type Pool } from '../db/pool';
import { listen } from '../lib/http';
import { apiAppWithoutTemporal } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { eventually } from './helpers/worker';

/** The API's pool: four connections, so half of it is two. */
const API_POOL_MAX = 4;

describe("a tenant's requests in flight (real API app, real Postgres)", () => {
  const db = useTestDatabase();
  let apiPool: Pool;
  let lookups = 0;
  /** Tenant-key authentications that have ended (the `last_used_at` stamp is their last statement). */
  let touches = 0;
  let app: ReturnType<typeof apiAppWithoutTemporal>;
  /** `pool`, counting the tenant-key lookups and authentications that have ended (`lookups`, `touches`). */
  const counting = (pool: Pool): Pool =>
    new Proxy(pool, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (prop !== 'query' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          if (typeof args[0] === 'string' && args[0].includes('from api_keys where prefix')) lookups += 1;
          if (typeof args[0] === 'string' && args[0].includes('update api_keys set last_used_at')) touches += 1;
          return result;
        };
      },
    });

  beforeAll(() => {
    apiPool = createPool(db.url, API_POOL_MAX);
    // A request past its key's lookup is past authentication.
    app = apiAppWithoutTemporal(counting(apiPool), 'in-flight');
  });
  afterAll(async () => {
    await apiPool?.end();
  });

  const send = async (key: string, method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await app.request(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, text: await res.text() };
  };

  it("answers another tenant while one tenant's requests wait on a lock: that tenant holds at most half the pool, and its others wait without a connection", async () => {
    const alpha = (await createApiKey(db, 'alpha')).secret;
    const beta = (await createApiKey(db, 'beta')).secret;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('alpha', 'demo', 'held', 'paused') returning id`,
    );
    const held = rows[0]!.id;
    // Every PATCH of alpha's connection waits for the row lock this transaction holds.
    const locker = await db.pool.connect();
    let answers: { status: number; text: string }[] = [];
    try {
      await locker.query('begin');
      await locker.query('select 1 from connections where id = $1 for update', [held]);
      const patches = Array.from({ length: 8 }, (_, n) => send(alpha, 'PATCH', `/connections/${held}`, { config: { records_per_resource: n + 1, page_size: 1 } }));
      // Every alpha request is past its key's lookup, and two of them hold connections (waiting on the lock).
      await eventually(async () => (lookups >= 8 && apiPool.totalCount - apiPool.idleCount >= 2 ? true : undefined), {
        describe: async () => ({ lookups, total: apiPool.totalCount, idle: apiPool.idleCount, waiting: apiPool.waitingCount }),
      });
      // Beta's request is answered while alpha's wait: it finds a free connection.
      const other = await send(beta, 'GET', '/connections');
      expect(other.status, other.text).toBe(200);
      expect(apiPool.waitingCount).toBe(0);
      expect(apiPool.totalCount - apiPool.idleCount).toBeLessThanOrEqual(API_POOL_MAX / 2);
      await locker.query('commit');
      answers = await Promise.all(patches);
    } finally {
      await locker.query('rollback').catch(() => undefined);
      locker.release();
    }
    // Alpha's requests were delayed, never refused: each is answered once its turn came.
    expect(answers.map((a) => a.status), JSON.stringify(answers)).toEqual(Array.from({ length: 8 }, () => 200));
  });

  it("answers a third tenant while two tenants' requests wait on locks: tenants with requests in flight leave a place of the pool to a tenant with none", async () => {
    const keys = {
      alpha: (await createApiKey(db, 'alpha')).secret,
      beta: (await createApiKey(db, 'beta')).secret,
      gamma: (await createApiKey(db, 'gamma')).secret,
    };
    const held: Record<'alpha' | 'beta', string> = { alpha: '', beta: '' };
    for (const tenant of ['alpha', 'beta'] as const) {
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'held-two', 'paused') returning id`,
        [tenant],
      );
      held[tenant] = rows[0]!.id;
    }
    const locker = await db.pool.connect();
    let answers: { status: number; text: string }[] = [];
    const before = lookups;
    try {
      await locker.query('begin');
      await locker.query('select 1 from connections where id = any($1) for update', [[held.alpha, held.beta]]);
      const patches = (['alpha', 'beta'] as const).flatMap((tenant) =>
        Array.from({ length: 6 }, (_, n) => send(keys[tenant], 'PATCH', `/connections/${held[tenant]}`, { config: { records_per_resource: n + 1, page_size: 1 } })),
      );
      // Every request is past its key's lookup, and the two tenants hold three connections, each waiting on the lock.
      await eventually(async () => (lookups - before >= 12 && apiPool.totalCount - apiPool.idleCount >= API_POOL_MAX - 1 ? true : undefined), {
        describe: async () => ({ lookups: lookups - before, total: apiPool.totalCount, idle: apiPool.idleCount, waiting: apiPool.waitingCount }),
      });
      // Gamma's request finds the place they left.
      const other = await send(keys.gamma, 'GET', '/connections');
      expect(other.status, other.text).toBe(200);
      expect(apiPool.waitingCount).toBe(0);
      await locker.query('commit');
      answers = await Promise.all(patches);
    } finally {
      await locker.query('rollback').catch(() => undefined);
      locker.release();
    }
    expect(answers.map((a) => a.status), JSON.stringify(answers)).toEqual(Array.from({ length: 12 }, () => 200));
  });

  it("answers a third tenant while two tenants' request bodies are still arriving: a request waits for its body holding no turn", async () => {
    // A pool of two: one place a tenant; two tenants each holding one leave none to a third.
    const smallPool = createPool(db.url, 2);
    const server = await listen(apiAppWithoutTemporal(counting(smallPool), 'in-flight-bodies'), '127.0.0.1', 0);
    const keys = {
      alpha: (await createApiKey(db, 'alpha')).secret,
      beta: (await createApiKey(db, 'beta')).secret,
      gamma: (await createApiKey(db, 'gamma')).secret,
    };
    const uploads: { req: ClientRequest; rest: string; answer: Promise<{ status: number; text: string }> }[] = [];
    try {
      const before = touches;
      for (const tenant of ['alpha', 'beta'] as const) {
        const body = JSON.stringify({ tenant_id: tenant, url: 'https://example.com/hooks', event_types: ['sync.failed'] });
        const req = httpRequest(`${server.url}/webhooks`, {
          method: 'POST',
          headers: { authorization: `Bearer ${keys[tenant]}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        });
        const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
          req.once('response', (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (text += chunk));
            res.once('end', () => resolve({ status: res.statusCode ?? 0, text }));
          });
          req.once('error', reject);
        });
        // The headers and the first bytes: the rest is sent only once gamma has its answer.
        req.write(body.slice(0, 10));
        uploads.push({ req, rest: body.slice(10), answer });
      }
      // Both uploading requests are past authentication: each takes a turn or waits for its body.
      await eventually(async () => (touches - before >= 2 ? true : undefined), { describe: async () => ({ touches: touches - before }) });
      const res = await fetch(`${server.url}/connections`, { headers: { authorization: `Bearer ${keys.gamma}` } });
      expect(res.status, await res.text()).toBe(200);
    } finally {
      for (const upload of uploads) upload.req.end(upload.rest);
    }
    const answers = await Promise.all(uploads.map((u) => u.answer));
    expect(answers.map((a) => a.status), JSON.stringify(answers)).toEqual([201, 201]);
    await server.close();
    await smallPool.end();
  }, 20_000);

  it("drops a request whose client went away while it waited for its turn: it changes nothing, and the tenant's next request does not wait for it", async () => {
    // A pool of two: one place a tenant.
    const smallPool = createPool(db.url, 2);
    const listener = getRequestListener(apiAppWithoutTemporal(counting(smallPool), 'in-flight-gone').fetch);
    // The server's side of each DELETE's connection, closed: the API has then heard the client go.
    let deleteClosed!: () => void;
    const deleteGone = new Promise<void>((resolve) => (deleteClosed = resolve));
    const server = createServer((req, res) => {
      if (req.method === 'DELETE') res.once('close', () => setImmediate(deleteClosed));
      void listener(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const key = (await createApiKey(db, 'epsilon')).secret;
    const send = async (method: string, path: string, body?: unknown) => {
      const headers: Record<string, string> = { authorization: `Bearer ${key}` };
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, text: await res.text() };
    };
    const hook = await send('POST', '/webhooks', { tenant_id: 'epsilon', url: 'https://example.com/hooks', event_types: ['sync.failed'] });
    expect(hook.status, hook.text).toBe(201);
    const webhookId = (JSON.parse(hook.text) as { id: string }).id;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('epsilon', 'demo', 'held-gone', 'paused') returning id`,
    );
    const held = rows[0]!.id;
    const locker = await db.pool.connect();
    try {
      await locker.query('begin');
      await locker.query('select 1 from connections where id = $1 for update', [held]);
      // Epsilon's one place: a PATCH waiting on the lock.
      const patch = send('PATCH', `/connections/${held}`, { config: { records_per_resource: 2, page_size: 1 } });
      await eventually(async () => (smallPool.totalCount - smallPool.idleCount >= 1 ? true : undefined));
      // A DELETE of its webhook waits for a turn; its client goes away meanwhile.
      const before = touches;
      const gone = httpRequest(`${url}/webhooks/${webhookId}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } });
      gone.once('error', () => undefined);
      gone.end();
      await eventually(async () => (touches - before >= 1 ? true : undefined), { describe: async () => ({ touches: touches - before }) });
      gone.destroy();
      await deleteGone;
      await locker.query('commit');
      const patched = await patch;
      expect(patched.status, patched.text).toBe(200);
    } finally {
      await locker.query('rollback').catch(() => undefined);
      locker.release();
    }
    // The tenant's next request runs after any of its own that came first (one place): the
    // webhook is still there, the DELETE never ran.
    const after = await send('GET', `/webhooks/${webhookId}`);
    expect(after.status, after.text).toBe(200);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await smallPool.end();
  }, 20_000);
});
