// Every endpoint that takes a tenant id (in its path, query or body) reads it with one schema and
// one limit, a connection's: 128 characters. 129 is refused with a 400 JSON error naming the field,
// 128 is accepted. Against the real API app over HTTP on 127.0.0.1 and a real Postgres.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, type HttpServer } from '../lib/http';
import { apiAppWithoutTemporal, callApi, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { fakeTemporal } from './helpers/fake-temporal';

type Endpoint = { method: string; template: string; path: (tenant: string) => string; body?: (tenant: string) => unknown; accepted: number };

const hook = { url: 'https://example.com/hooks/synctide', event_types: ['sync.failed'] };
const oauthApp = {
  name: 'long-tenant-app', client_id: 'client', client_secret: 'client-secret',
  authorize_url: 'https://example.com/authorize', token_url: 'https://api.github.com/token', redirect_uri: 'https://example.com/oauth/callback',
};
const q = (tenant: string) => `tenant_id=${encodeURIComponent(tenant)}`;

/** In this order: the connection made first is what POST /sync finds. */
const ENDPOINTS: Endpoint[] = [
  { method: 'POST', template: '/connections', path: () => '/connections', body: (t) => ({ tenant_id: t, app_key: 'long-tenant', provider: 'demo', status: 'paused' }), accepted: 201 },
  { method: 'GET', template: '/connections', path: (t) => `/connections?${q(t)}`, accepted: 200 },
  { method: 'POST', template: '/sync', path: () => '/sync', body: (t) => ({ tenant_id: t, app_key: 'long-tenant' }), accepted: 409 },
  { method: 'GET', template: '/jobs', path: (t) => `/jobs?${q(t)}`, accepted: 200 },
  { method: 'POST', template: '/webhooks', path: () => '/webhooks', body: (t) => ({ tenant_id: t, ...hook }), accepted: 201 },
  { method: 'GET', template: '/webhooks', path: (t) => `/webhooks?${q(t)}`, accepted: 200 },
  { method: 'POST', template: '/oauth-apps', path: () => '/oauth-apps', body: (t) => ({ tenant_id: t, ...oauthApp }), accepted: 201 },
  { method: 'GET', template: '/oauth-apps', path: (t) => `/oauth-apps?${q(t)}`, accepted: 200 },
  { method: 'GET', template: '/audit', path: (t) => `/audit?${q(t)}`, accepted: 200 },
  { method: 'POST', template: '/tenants/{tenant_id}/api-keys', path: (t) => `/tenants/${t}/api-keys`, body: () => ({}), accepted: 201 },
  { method: 'GET', template: '/tenants/{tenant_id}/api-keys', path: (t) => `/tenants/${t}/api-keys`, accepted: 200 },
  { method: 'DELETE', template: '/tenants/{tenant_id}/api-keys/{key_id}', path: (t) => `/tenants/${t}/api-keys/${randomUUID()}`, accepted: 404 },
  { method: 'GET', template: '/tenants/{tenant_id}/limits', path: (t) => `/tenants/${t}/limits`, accepted: 200 },
  { method: 'PATCH', template: '/tenants/{tenant_id}/limits', path: (t) => `/tenants/${t}/limits`, body: () => ({ max_connections: 5 }), accepted: 200 },
];

describe('one tenant id rule on every endpoint (real API app over HTTP, real Postgres)', () => {
  const db = useTestDatabase();
  let server: HttpServer;
  beforeAll(async () => {
    server = await listen(apiAppWithoutTemporal(db.pool, 'tenant-id-limit', { temporal: fakeTemporal().client }), '127.0.0.1', 0);
  });
  afterAll(async () => {
    await server?.close();
  });
  const call = (method: string, path: string, body?: unknown) => callApi(server.url, TEST_API_KEY, method, path, body);

  it('covers every endpoint of the OpenAPI document that takes a tenant_id', async () => {
    const doc = (await call('GET', '/openapi.json')).body;
    const resolve = (schema: any): any => (schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema);
    // A body's schema, or any of the schemas it is one or all of, has a tenant_id property.
    const hasTenantId = (schema: any): boolean => {
      const s = resolve(schema);
      return Boolean(s?.properties?.tenant_id) || [...(s?.oneOf ?? []), ...(s?.anyOf ?? []), ...(s?.allOf ?? [])].some(hasTenantId);
    };
    const taking: string[] = [];
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const inParams = (op.parameters ?? []).some((p: any) => p.name === 'tenant_id');
        const inBody = hasTenantId(op.requestBody?.content?.['application/json']?.schema);
        if (inParams || inBody) taking.push(`${method.toUpperCase()} ${path}`);
      }
    }
    expect(taking.sort()).toEqual(ENDPOINTS.map((e) => `${e.method} ${e.template}`).sort());
  });

  it('refuses a tenant id of 129 characters with a 400 naming tenant_id, and accepts one of 128', async () => {
    const long = 't'.repeat(129);
    for (const e of ENDPOINTS) {
      const res = await call(e.method, e.path(long), e.body?.(long));
      expect([res.status, res.body], `${e.method} ${e.template}`).toEqual([400, { error: { code: 'invalid_request', message: 'tenant_id: must be at most 128 characters' } }]);
    }
    const { rows } = await db.pool.query<{ n: number }>(
      `select ((select count(*) from connections) + (select count(*) from webhooks) + (select count(*) from oauth_apps) + (select count(*) from api_keys) + (select count(*) from tenant_limits))::int as n`,
    );
    expect(rows[0]!.n).toBe(0);
    const fits = 'f'.repeat(128);
    for (const e of ENDPOINTS) {
      const res = await call(e.method, e.path(fits), e.body?.(fits));
      expect(res.status, `${e.method} ${e.template}: ${res.text}`).toBe(e.accepted);
    }
    // Listed back under it: the queries matched the rows the bodies made.
    expect((await call('GET', `/connections?${q(fits)}`)).body.items).toHaveLength(1);
    expect((await call('GET', `/webhooks?${q(fits)}`)).body.items).toHaveLength(1);
    expect((await call('GET', `/oauth-apps?${q(fits)}`)).body.items).toHaveLength(1);
  });
});
