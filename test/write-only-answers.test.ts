// What a tenant key with the `write` scope alone gets back from the routes that change things
// (real API app over HTTP on 127.0.0.1, real Postgres, no Temporal: none of these requests reaches
// it). Such a key may change a resource but not read it: an answer gives it ids, status and a
// secret it just made, never what only a GET (the `read` scope) would show. A key with `read`, and
// the admin, get the whole answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, type HttpServer } from '../lib/http';
import { apiAppWithoutTemporal, callApi, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { TEST_PROVIDER_POLICY } from './helpers/deps';

const TASK_QUEUE = 'write-only-answers';

describe('answers to a write-only key', () => {
  const db = useTestDatabase();
  let server: HttpServer;

  beforeAll(async () => {
    // The OAuth apps' token endpoint on a host PROVIDER_HOSTS allows.
    const providers = { ...TEST_PROVIDER_POLICY, allowedHosts: ['idp.example'] };
    server = await listen(apiAppWithoutTemporal(db.pool, TASK_QUEUE, { providers }), '127.0.0.1', 0);
  });
  afterAll(async () => {
    await server?.close();
  });

  const call = (key: string, method: string, path: string, body?: unknown) => callApi(server.url, key, method, path, body);
  const admin = (method: string, path: string, body?: unknown) => call(TEST_API_KEY, method, path, body);

  async function newKey(tenant: string, scopes: string[]): Promise<string> {
    const res = await admin('POST', `/tenants/${tenant}/api-keys`, { scopes });
    expect(res.status, res.text).toBe(201);
    return res.body.secret;
  }

  it("answers a write-only key's PATCH /oauth-apps/{id} without the app's client id, endpoints and scopes", async () => {
    const created = await admin('POST', '/oauth-apps', {
      tenant_id: 'oauth-writer', name: 'hidden-app', client_id: 'client-id-only-readers-see', client_secret: 'client-secret-0123456789',
      authorize_url: 'https://idp.example/authorize', token_url: 'https://idp.example/token', redirect_uri: 'https://synctide.example/oauth/callback', scopes: ['repo'],
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as string;
    const writer = await newKey('oauth-writer', ['write']);

    const empty = await call(writer, 'PATCH', `/oauth-apps/${id}`, {});
    expect(empty.status, empty.text).toBe(200);
    expect(Object.keys(empty.body).sort()).toEqual(['created_at', 'id', 'name', 'tenant_id', 'updated_at']);
    expect(empty.body).toMatchObject({ id, tenant_id: 'oauth-writer', name: 'hidden-app' });
    for (const hidden of ['client-id-only-readers-see', 'idp.example', 'synctide.example', 'repo']) expect(empty.text).not.toContain(hidden);

    // A change it makes is made, and still not answered.
    const changed = await call(writer, 'PATCH', `/oauth-apps/${id}`, { scopes: ['repo', 'user'] });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).not.toHaveProperty('scopes');
    expect((await db.pool.query('select scopes from oauth_apps where id = $1', [id])).rows[0].scopes).toEqual(['repo', 'user']);

    // A key that reads, and the admin, see the whole app.
    const both = await newKey('oauth-writer', ['read', 'write']);
    for (const key of [both, TEST_API_KEY]) {
      const full = await call(key, 'PATCH', `/oauth-apps/${id}`, {});
      expect(full.status, full.text).toBe(200);
      expect(full.body).toMatchObject({ client_id: 'client-id-only-readers-see', authorize_url: 'https://idp.example/authorize', token_url: 'https://idp.example/token', redirect_uri: 'https://synctide.example/oauth/callback', scopes: ['repo', 'user'] });
    }
  });

  it("answers a write-only key's POST /webhooks/{id}/rotate-secret with the new secret but without the webhook's url and event types", async () => {
    const created = await admin('POST', '/webhooks', { tenant_id: 'hook-writer', url: 'https://hooks.example.com/only-readers-see', event_types: ['sync.failed', 'connection.disabled'] });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as string;
    const writer = await newKey('hook-writer', ['write']);

    const rotated = await call(writer, 'POST', `/webhooks/${id}/rotate-secret`, { expire_previous_after_seconds: 60 });
    expect(rotated.status, rotated.text).toBe(200);
    expect(Object.keys(rotated.body).sort()).toEqual(['created_at', 'id', 'previous_secret_expires_at', 'secret', 'tenant_id']);
    expect(rotated.body).toMatchObject({ id, tenant_id: 'hook-writer', secret: expect.stringMatching(/^whsec_/), previous_secret_expires_at: expect.any(String) });
    for (const hidden of ['hooks.example.com', 'only-readers-see', 'sync.failed', 'connection.disabled']) expect(rotated.text).not.toContain(hidden);

    // A key that reads, and the admin, see the whole webhook with the new secret.
    const both = await newKey('hook-writer', ['read', 'write']);
    for (const key of [both, TEST_API_KEY]) {
      const full = await call(key, 'POST', `/webhooks/${id}/rotate-secret`);
      expect(full.status, full.text).toBe(200);
      expect(full.body).toMatchObject({ url: 'https://hooks.example.com/only-readers-see', event_types: ['sync.failed', 'connection.disabled'], secret: expect.stringMatching(/^whsec_/) });
    }
  });
});
