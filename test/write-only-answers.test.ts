// What a tenant key with the `write` scope alone gets back from the routes that change things
// (real API app over HTTP on 127.0.0.1, real Postgres, no Temporal: none of these requests reaches
// it). Such a key may change a resource but not read it: an answer gives it ids, status and a
// secret it just made, never what only a GET (the `read` scope) would show. A key with `read`, and
// the admin, get the whole answer.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, type HttpServer } from '../lib/http';
import { syncJobWorkflowId } from '../temporal/ids';
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
    expect(Object.keys(rotated.body).sort()).toEqual(['created_at', 'disabled_at', 'disabled_reason', 'id', 'previous_secret_expires_at', 'secret', 'tenant_id']);
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

  it("answers a write-only key's PATCH /webhooks/{id} (enable, disable) with the webhook's state but without its url and event types", async () => {
    const created = await admin('POST', '/webhooks', { tenant_id: 'hook-toggler', url: 'https://hooks.example.com/toggled-only-readers-see', event_types: ['sync.failed'] });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as string;
    const writer = await newKey('hook-toggler', ['write']);

    const disabled = await call(writer, 'PATCH', `/webhooks/${id}`, { enabled: false });
    expect(disabled.status, disabled.text).toBe(200);
    expect(Object.keys(disabled.body).sort()).toEqual(['created_at', 'disabled_at', 'disabled_reason', 'id', 'tenant_id']);
    expect(disabled.body).toMatchObject({ id, tenant_id: 'hook-toggler', disabled_at: expect.any(String), disabled_reason: expect.any(String) });
    for (const hidden of ['hooks.example.com', 'only-readers-see', 'sync.failed']) expect(disabled.text).not.toContain(hidden);

    // A key that reads, and the admin, see the whole webhook.
    const both = await newKey('hook-toggler', ['read', 'write']);
    for (const key of [both, TEST_API_KEY]) {
      const full = await call(key, 'PATCH', `/webhooks/${id}`, { enabled: true });
      expect(full.status, full.text).toBe(200);
      expect(full.body).toMatchObject({ url: 'https://hooks.example.com/toggled-only-readers-see', event_types: ['sync.failed'], disabled_at: null, disabled_reason: null });
    }
  });

  it("answers a write-only key's POST /jobs/schedule that repeats an Idempotency-Key with the job's id and status but without its progress, counts and error", async () => {
    const tenant = 'job-writer';
    const window = { start: '2025-01-01T00:00:00.000Z', end: '2025-01-02T00:00:00.000Z' };
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'backfilled', 'active') returning id`, [tenant]);
    const connectionId = rows[0]!.id;
    // What an earlier POST /jobs/schedule with the key wrote (made by a key that reads, say); the backfill has since failed.
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, priority, scheduled_at, window_start, window_end,
                              payload, idempotency_key, workflow_id, started_at, finished_at, last_error, total_tasks, completed_tasks, failed_tasks, processed_entities)
       values ($1, $2, $3, 'incremental', 'backfill', 'failed', 0, now(), $4, $5, '{"reason":"replay"}', 'k-write-only', $6, now(), now(),
               'provider said: repository octo-org/only-readers-see is archived', 2, 1, 1, 4321)`,
      [jobId, connectionId, tenant, window.start, window.end, syncJobWorkflowId(jobId)],
    );
    const repeat = (key: string) =>
      fetch(`${server.url}/jobs/schedule`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'k-write-only' },
        body: JSON.stringify({ pairId: connectionId, window, payload: { reason: 'replay' } }),
      }).then(async (res) => ({ status: res.status, text: await res.text() }));

    const writer = await newKey(tenant, ['write']);
    const answer = await repeat(writer);
    expect(answer.status, answer.text).toBe(202);
    const body = JSON.parse(answer.text);
    expect(body).toMatchObject({ id: jobId, connection_id: connectionId, status: 'failed', trigger: 'backfill', window, payload: { reason: 'replay' } });
    for (const hidden of ['error', 'counts', 'processed_entities', 'progress_percentage', 'total_tasks', 'completed_tasks', 'failed_tasks', 'started_at', 'finished_at', 'retry_count']) {
      expect(body, hidden).not.toHaveProperty(hidden);
    }
    expect(answer.text).not.toContain('only-readers-see');
    expect(answer.text).not.toContain('4321');

    // A key that reads, and the admin, see the whole job.
    const both = await newKey(tenant, ['read', 'write']);
    for (const key of [both, TEST_API_KEY]) {
      const full = await repeat(key);
      expect(full.status, full.text).toBe(202);
      expect(JSON.parse(full.text)).toMatchObject({ id: jobId, processed_entities: 4321, error: { message: expect.stringContaining('only-readers-see') } });
    }
  });
});
