// A tenant key's request holds one pooled connection at a time: the API gives a tenant half its
// pool's worth of requests at once (tenantTurns), which keeps the other half for the other tenants
// only while no request runs two statements at once. Real API app and Postgres; every statement a
// request sends on the API's pool is counted while it runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import type { Pool } from '../db/pool';
import { apiAppWithoutTemporal } from './helpers/api';
import { useTestDatabase } from './helpers/database';

describe("a tenant key's request on the API's pool (real API app, real Postgres)", () => {
  const db = useTestDatabase();
  let inFlight = 0;
  let most = 0;
  let app: ReturnType<typeof apiAppWithoutTemporal>;
  /** `pool`, counting its statements in flight (`inFlight`) and the most at once (`most`). */
  const counting = (pool: Pool): Pool =>
    new Proxy(pool, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (prop !== 'query' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          inFlight += 1;
          most = Math.max(most, inFlight);
          try {
            return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          } finally {
            inFlight -= 1;
          }
        };
      },
    });

  beforeAll(() => {
    app = apiAppWithoutTemporal(counting(db.pool), 'request-connections');
  });
  afterAll(() => undefined);

  const send = async (key: string, method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await app.request(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, text: await res.text() };
  };

  it('reads a connection, and refuses a sync while its breaker is open, one statement at a time', async () => {
    const key = (await createApiKey(db, 'alpha')).secret;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('alpha', 'demo', 'broken', 'disabled') returning id`,
    );
    const id = rows[0]!.id;
    await db.pool.query(
      `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, last_failure_at, paused_until)
       values ($1, 'demo', 5, now(), now() + interval '1 hour')`,
      [id],
    );
    most = 0;
    const read = await send(key, 'GET', `/connections/${id}`);
    expect(read.status, read.text).toBe(200);
    expect({ read: most }).toEqual({ read: 1 });

    await db.pool.query(`update connections set status = 'active' where id = $1`, [id]);
    most = 0;
    const refused = await send(key, 'POST', '/sync', { app_key: 'broken' });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.text).toContain('circuit_breaker_open');
    expect({ refused: most }).toEqual({ refused: 1 });
  });
});
