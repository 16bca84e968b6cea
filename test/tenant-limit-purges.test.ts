// A tenant's connection limit bounds the connection rows it holds, also while it deletes: a
// connection being purged no longer counts, so a tenant at its limit may delete one and create
// another at once, but only as many as its limit (purges waiting for a place of the tenant's
// running jobs would otherwise pile up without bound: a create-and-delete loop at the key's request
// rate leaves a connection row and a purge workflow, retrying every 65–95 s, for each round). Real
// API app over HTTP on 127.0.0.1 and a real Postgres; Temporal faked, so no purge runs (as none
// runs while the tenant's places are taken).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, type HttpServer } from '../lib/http';
import { apiAppWithoutTemporal, callApi, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { fakeTemporal } from './helpers/fake-temporal';

describe('connections being purged and the connection limit (real API app over HTTP, real Postgres)', () => {
  const db = useTestDatabase();
  let server: HttpServer;
  beforeAll(async () => {
    server = await listen(apiAppWithoutTemporal(db.pool, 'tenant-limit-purges', { temporal: fakeTemporal().client }), '127.0.0.1', 0);
  });
  afterAll(async () => {
    await server?.close();
  });
  const call = (key: string, method: string, path: string, body?: unknown) => callApi(server.url, key, method, path, body);
  async function tenantKey(tenant: string, maxConnections: number): Promise<string> {
    expect((await call(TEST_API_KEY, 'PATCH', `/tenants/${tenant}/limits`, { max_connections: maxConnections })).status).toBe(200);
    const res = await call(TEST_API_KEY, 'POST', `/tenants/${tenant}/api-keys`, {});
    expect(res.status, res.text).toBe(201);
    return res.body.secret;
  }
  const create = (key: string, tenant: string, appKey: string) =>
    call(key, 'POST', '/connections', { tenant_id: tenant, app_key: appKey, provider: 'demo', status: 'paused' });
  const rowsOf = async (tenant: string) => (await db.pool.query('select 1 from connections where tenant_id = $1', [tenant])).rowCount;

  it('a tenant at its limit deletes a connection and creates another at once', async () => {
    const key = await tenantKey('swap', 2);
    for (const appKey of ['a', 'b']) expect((await create(key, 'swap', appKey)).status).toBe(201);
    const over = await create(key, 'swap', 'c');
    expect([over.status, over.body.error.code, over.body.error.limit]).toEqual([409, 'tenant_limit', 'max_connections']);
    const first = (await call(key, 'GET', '/connections')).body.items[0].id;
    expect((await call(key, 'DELETE', `/connections/${first}`)).status).toBe(202);
    expect((await create(key, 'swap', 'c')).status).toBe(201);
  });

  it('a create-and-delete loop holds no more connections than twice the limit: past its limit of connections being purged, they count', async () => {
    const key = await tenantKey('loop', 2);
    const answers: number[] = [];
    for (let round = 0; round < 10; round++) {
      const made = await create(key, 'loop', `round-${round}`);
      answers.push(made.status);
      if (made.status !== 201) {
        expect([made.body.error.code, made.body.error.limit]).toEqual(['tenant_limit', 'max_connections']);
        continue;
      }
      expect((await call(key, 'DELETE', `/connections/${made.body.id}`)).status).toBe(202);
    }
    // Two purging connections no longer count; the third and fourth do, one each: the fifth create is refused.
    expect(answers).toEqual([201, 201, 201, 201, 409, 409, 409, 409, 409, 409]);
    expect(await rowsOf('loop')).toBe(4);
    // The admin reads the usage as the limit counts it.
    const limits = await call(TEST_API_KEY, 'GET', '/tenants/loop/limits');
    expect(limits.body.usage.connections).toBe(2);
  });
});
