// One tenant's requests cannot take the API's database pool from the others: a tenant key's
// requests in flight in an API process are held to half the pool, the rest wait their turn in
// the process (holding no connection), and another tenant's request is answered meanwhile. Real
// API app and Postgres; a tenant's requests are kept in flight by a row lock the test holds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { createPool, type Pool } from '../db/pool';
import { apiAppWithoutTemporal } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { eventually } from './helpers/worker';

/** The API's pool: four connections, so half of it is two. */
const API_POOL_MAX = 4;

describe("a tenant's requests in flight (real API app, real Postgres)", () => {
  const db = useTestDatabase();
  let apiPool: Pool;
  let lookups = 0;
  let app: ReturnType<typeof apiAppWithoutTemporal>;

  beforeAll(() => {
    apiPool = createPool(db.url, API_POOL_MAX);
    // Counts the tenant-key lookups that have ended: a request past it is past authentication.
    const counting = new Proxy(apiPool, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (prop !== 'query' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          if (typeof args[0] === 'string' && args[0].includes('from api_keys where prefix')) lookups += 1;
          return result;
        };
      },
    });
    app = apiAppWithoutTemporal(counting, 'in-flight');
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
});
