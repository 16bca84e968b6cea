// Issue 28's smaller isolation gaps, through the real API, worker, time-skipping Temporal server
// and Postgres: the admin's POST /sync must name the tenant of an app key; resume, PATCH and sync
// are refused while a connection's purge is open; failed tenant-key lookups are rate-limited per
// client address; a write-only key's PATCH answer leaves out the config; a refused cross-tenant
// call is audited so the targeted tenant sees it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Pool } from '../db/pool';
import { callApi, startTestApi, TEST_API_KEY, type TestApi } from './helpers/api';
import { countingQueries } from './helpers/database';
import { useWorkerStack } from './helpers/stack';

const TASK_QUEUE = 'tenant-isolation-edges';

describe('tenant isolation edges', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi(stack, TASK_QUEUE);
  });
  afterAll(async () => {
    await api?.server.close();
  });

  const call = (key: string, method: string, path: string, body?: unknown, url = api.server.url) => callApi(url, key, method, path, body);
  const admin = (method: string, path: string, body?: unknown) => call(TEST_API_KEY, method, path, body);
  const q = <T = any>(sql: string, params: unknown[] = []) => stack.db.pool.query(sql, params).then((r) => r.rows as T[]);

  async function newKey(tenant: string, scopes?: string[]): Promise<string> {
    const res = await admin('POST', `/tenants/${tenant}/api-keys`, scopes ? { scopes } : {});
    expect(res.status, res.text).toBe(201);
    return res.body.secret;
  }

  async function connection(tenant: string, appKey: string, status: 'active' | 'paused' = 'active'): Promise<string> {
    const res = await admin('POST', '/connections', {
      tenant_id: tenant, app_key: appKey, provider: 'demo', status,
      config: { records_per_resource: 1, page_size: 1 }, schedule: { interval_seconds: 86_400 },
    });
    expect(res.status, res.text).toBe(201);
    return res.body.id;
  }

  it('the admin key must name tenant_id with an app_key (400 naming the field); with it, only that tenant’s connection is synced', async () => {
    const mine = await connection('t-one', 'shared-key', 'paused');
    await connection('t-two', 'shared-key', 'paused');
    const missing = await admin('POST', '/sync', { app_key: 'shared-key' });
    expect(missing.status, missing.text).toBe(400);
    expect(missing.body.error.code).toBe('invalid_request');
    expect(missing.body.error.message).toMatch(/^tenant_id: /);
    // Unique to one tenant is not enough either: which tenant is meant must be said.
    await connection('t-one', 'only-one', 'paused');
    expect((await admin('POST', '/sync', { app_key: 'only-one' })).status).toBe(400);
    // Named: the tenant's own connection answers (paused: 409 naming it, nothing written).
    const named = await admin('POST', '/sync', { app_key: 'shared-key', tenant_id: 't-one' });
    expect([named.status, named.body.error.code]).toEqual([409, 'connection_paused']);
    expect(await q('select 1 from sync_jobs where connection_id = $1', [mine])).toEqual([]);
    // A tenant key needs no tenant_id: its own tenant is implied.
    const key = await newKey('t-one');
    expect((await call(key, 'POST', '/sync', { app_key: 'shared-key' })).body.error.code).toBe('connection_paused');
  });

  it('refuses resume, PATCH and sync (409 purge_in_progress) while the connection’s purge is open', async () => {
    // Created paused: an active one's first sync could queue a job before it is disabled below.
    const id = await connection('purgy', 'doomed', 'paused');
    // An open purge as DELETE leaves it (disabled, a purge not yet completed); held open here so
    // the refusals are seen before the purge workflow finishes.
    await q(`update connections set status = 'disabled' where id = $1`, [id]);
    const [purge] = await q<{ id: string }>(`insert into connection_purges (connection_id, tenant_id, status) values ($1, 'purgy', 'running') returning id`, [id]);
    const attempts: [string, string, unknown][] = [
      ['POST', `/connections/${id}/resume`, undefined],
      ['PATCH', `/connections/${id}`, { config: { records_per_resource: 2, page_size: 1 } }],
      ['POST', `/connections/${id}/sync`, { mode: 'full' }],
      ['POST', '/sync', { app_key: 'doomed', tenant_id: 'purgy' }],
      ['POST', '/sync', { app_key: 'doomed', tenant_id: 'purgy', immediate: true }],
    ];
    for (const [method, path, body] of attempts) {
      const res = await admin(method, path, body);
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(409);
      expect(res.body.error).toEqual({ code: 'purge_in_progress', message: expect.stringContaining('being deleted'), purge_id: purge!.id });
    }
    const [row] = await q<{ status: string; config: unknown }>('select status, config from connections where id = $1', [id]);
    expect(row).toEqual({ status: 'disabled', config: { records_per_resource: 1, page_size: 1 } });
    expect(await q('select 1 from sync_jobs where connection_id = $1', [id])).toEqual([]);
    // Once the purge is completed (the row gone or kept), nothing is refused for it any more.
    await q(`update connection_purges set status = 'completed', finished_at = now() where id = $1`, [purge!.id]);
    expect((await admin('POST', `/connections/${id}/resume`)).status).toBe(200);
  });

  it('rate-limits failed tenant-key lookups per client address (429 before any lookup), while the admin and valid keys of other addresses go on', async () => {
    const limited = await startTestApi(stack, TASK_QUEUE, { authFailureLimit: { ratePerSecond: 0.001, burst: 3 } });
    try {
      const valid = await newKey('limity');
      const bogus = (i: number) => `stk_${'0'.repeat(11)}${i}_${'A'.repeat(43)}`;
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await call(bogus(i), 'GET', '/connections', undefined, limited.server.url)).status);
      expect(statuses).toEqual([401, 401, 401, 429, 429]);
      const refused = await fetch(`${limited.server.url}/connections`, { headers: { authorization: `Bearer ${bogus(9)}` } });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
      // From this address a tenant key waits too (its lookup is the cost being bounded)…
      expect((await call(valid, 'GET', '/connections', undefined, limited.server.url)).status).toBe(429);
      // …but the admin key needs no lookup, and the limit is per API process's client address.
      expect((await call(TEST_API_KEY, 'GET', '/connections', undefined, limited.server.url)).status).toBe(200);
      expect((await call(valid, 'GET', '/connections')).status).toBe(200);
    } finally {
      await limited.server.close();
    }
  });

  /** `pool` with a count of the tenant-key lookups made through it. */
  function countingLookups(pool: Pool): { pool: Pool; lookups: () => number } {
    const counting = countingQueries(pool, 'from api_keys where prefix');
    return { pool: counting.pool, lookups: counting.count };
  }

  it("a burst of concurrent requests costs no more key lookups than the key's request bucket, nor the address's failed-lookup bucket, allows", async () => {
    const counting = countingLookups(stack.db.pool);
    const limited = await startTestApi(stack, TASK_QUEUE, {
      pool: counting.pool, rateLimit: { ratePerSecond: 0.001, burst: 2 }, authFailureLimit: { ratePerSecond: 0.001, burst: 3 },
    });
    try {
      const key = await newKey('bursty');
      const get = (k: string) => fetch(`${limited.server.url}/connections`, { headers: { authorization: `Bearer ${k}` } }).then((res) => res.status);
      // Twenty at once with a key whose bucket holds two: two answered, the rest refused before any lookup.
      const statuses = await Promise.all(Array.from({ length: 20 }, () => get(key)));
      expect(statuses.filter((s) => s === 200)).toHaveLength(2);
      expect(statuses.filter((s) => s === 429)).toHaveLength(18);
      expect(counting.lookups()).toBe(2);
      // Twenty made-up keys at once from an address that may fail three lookups: three looked up.
      const bogus = (i: number) => `stk_${'1'.repeat(10)}${String(i).padStart(2, '0')}_${'A'.repeat(43)}`;
      const guesses = await Promise.all(Array.from({ length: 20 }, (_, i) => get(bogus(i))));
      expect(guesses.filter((s) => s === 401)).toHaveLength(3);
      expect(guesses.filter((s) => s === 429)).toHaveLength(17);
      expect(counting.lookups()).toBe(2 + 3);
    } finally {
      await limited.server.close();
    }
  });

  it('a burst of requests with a valid key, within its request bucket, is never refused as failed lookups: lookups beyond the address tokens wait for those in flight', async () => {
    // Every key lookup takes 100 ms, so the whole burst is in flight at once.
    const slow = new Proxy(stack.db.pool, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (prop !== 'query' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          if (typeof args[0] === 'string' && args[0].includes('from api_keys where prefix')) await new Promise((resolve) => setTimeout(resolve, 100));
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const limited = await startTestApi(stack, TASK_QUEUE, {
      pool: slow, rateLimit: { ratePerSecond: 0.001, burst: 100 }, authFailureLimit: { ratePerSecond: 0.001, burst: 3 },
    });
    try {
      const key = await newKey('crowded');
      const get = (k: string) => fetch(`${limited.server.url}/connections`, { headers: { authorization: `Bearer ${k}` } }).then(async (res) => `${res.status} ${res.status === 200 ? '' : await res.text()}`.trim());
      // Twenty at once, well within the key's bucket of 100: no lookup failed, so none is refused.
      const statuses = await Promise.all(Array.from({ length: 20 }, () => get(key)));
      expect(statuses.filter((s) => s !== '200')).toEqual([]);
      // The address still has its three failed lookups: three made-up keys answer 401, a fourth 429.
      const bogus = (i: number) => `stk_${'2'.repeat(10)}${String(i).padStart(2, '0')}_${'B'.repeat(43)}`;
      const guesses = await Promise.all(Array.from({ length: 4 }, (_, i) => get(bogus(i)).then((s) => s.slice(0, 3))));
      expect(guesses.sort()).toEqual(['401', '401', '401', '429']);
    } finally {
      await limited.server.close();
    }
  });

  it('answers a write-only key’s PATCH without the connection’s config (it may change, not read)', async () => {
    const id = await connection('writer-co', 'secret-config', 'paused');
    const writer = await newKey('writer-co', ['write']);
    const empty = await call(writer, 'PATCH', `/connections/${id}`, {});
    expect(empty.status, empty.text).toBe(200);
    expect(empty.body).not.toHaveProperty('config');
    expect(empty.text).not.toContain('records_per_resource');
    const changed = await call(writer, 'PATCH', `/connections/${id}`, { schedule: { interval_seconds: 3600 } });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).not.toHaveProperty('config');
    expect(changed.body.schedule.interval_seconds).toBe(3600);
    // A key that reads, and the admin, see it.
    const both = await newKey('writer-co');
    expect((await call(both, 'PATCH', `/connections/${id}`, {})).body.config).toEqual({ records_per_resource: 1, page_size: 1 });
    expect((await admin('PATCH', `/connections/${id}`, {})).body.config).toEqual({ records_per_resource: 1, page_size: 1 });
  });

  it('audits a refused cross-tenant call so the targeted tenant sees it (target_tenant_id)', async () => {
    const victim = await connection('victim-co', 'target', 'paused');
    const attacker = await newKey('attacker-co');
    expect((await call(attacker, 'POST', `/connections/${victim}/resume`)).status).toBe(404);
    expect((await call(attacker, 'POST', '/webhooks', { tenant_id: 'victim-co', url: 'http://127.0.0.1:9/x', event_types: ['sync.failed'] })).status).toBe(404);
    const seen = await admin('GET', '/audit?tenant_id=victim-co&limit=50');
    expect(seen.status, seen.text).toBe(200);
    const attempts = seen.body.items.filter((e: any) => e.actor.startsWith('key:'));
    expect(attempts).toEqual([
      expect.objectContaining({ method: 'POST', path: '/webhooks', status: 404, tenant_id: 'attacker-co', target_tenant_id: 'victim-co' }),
      expect.objectContaining({ method: 'POST', path: `/connections/${victim}/resume`, status: 404, tenant_id: 'attacker-co', target_tenant_id: 'victim-co', target_id: victim }),
    ]);
    // Still under the caller too, and the connection is unchanged.
    const own = await admin('GET', '/audit?tenant_id=attacker-co&limit=50');
    expect(own.body.items.filter((e: any) => e.status === 404)).toHaveLength(2);
    expect((await q('select status from connections where id = $1', [victim]))[0].status).toBe('paused');
    // The admin's own calls name no other target tenant.
    expect(seen.body.items.filter((e: any) => e.actor === 'admin').every((e: any) => e.target_tenant_id === null)).toBe(true);
  });

  it("audits a call refused for naming another tenant's connection as the source of a shared OAuth 2 grant, so that tenant sees it (target_tenant_id)", async () => {
    const victim = await connection('victim-grant', 'source', 'paused');
    const mine = await connection('attacker-grant', 'mine', 'paused');
    const attacker = await newKey('attacker-grant');
    const credentials = { kind: 'oauth2', grant_from_connection: victim };
    const patched = await call(attacker, 'PATCH', `/connections/${mine}`, { credentials });
    expect([patched.status, patched.body.error?.code]).toEqual([404, 'not_found']);
    const created = await call(attacker, 'POST', '/connections', { tenant_id: 'attacker-grant', app_key: 'shares-victim', provider: 'demo', status: 'paused', credentials });
    expect([created.status, created.body.error?.code]).toEqual([404, 'not_found']);
    const seen = await admin('GET', '/audit?tenant_id=victim-grant&limit=50');
    expect(seen.status, seen.text).toBe(200);
    expect(seen.body.items.filter((e: any) => e.actor.startsWith('key:'))).toEqual([
      expect.objectContaining({ method: 'POST', path: '/connections', status: 404, tenant_id: 'attacker-grant', target_tenant_id: 'victim-grant' }),
      expect.objectContaining({ method: 'PATCH', path: `/connections/${mine}`, status: 404, tenant_id: 'attacker-grant', target_tenant_id: 'victim-grant' }),
    ]);
    expect(await q('select 1 from connections where app_key = $1', ['shares-victim'])).toEqual([]);
    expect((await q('select credential_kind, oauth_grant_id from connections where id = $1', [mine]))[0]).toEqual({ credential_kind: 'token', oauth_grant_id: null });
  });
});
