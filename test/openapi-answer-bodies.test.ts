// Every answer body of the real API held to the OpenAPI document it serves: one request per
// documented operation with a happy answer and at least one 4xx, each answer's status one the
// operation declares, its content type one that status documents, and its body valid (ajv, JSON
// Schema 2020-12 as OpenAPI 3.1 uses, with formats) against the schema documented for that status
// and content type. The real API in front of the Temporal dev server, a worker with the demo
// connector and Postgres; a fake OAuth provider on 127.0.0.1 for the connect flow.
import { randomUUID } from 'node:crypto';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, TEST_API_KEY, type TestApi } from './helpers/api';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { useWorkerStack } from './helpers/stack';

const TASK_QUEUE = 'openapi-answer-bodies';
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

type Json = Record<string, any>;

/** A JSON pointer token. */
const token = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * The document with every object schema that names its properties and says nothing of others
 * closed to others (`unevaluatedProperties: false`). A member of an `allOf` (inline, or the
 * component it names) stays open: the `allOf` itself is closed, which sees the properties of
 * every member.
 */
function closed(doc: Json): Json {
  const members = new Set<string>();
  const scan = (node: unknown): void => {
    if (node === null || typeof node !== 'object') return;
    for (const member of ((node as Json).allOf as Json[] | undefined) ?? []) if (typeof member.$ref === 'string') members.add(member.$ref);
    Object.values(node).forEach(scan);
  };
  scan(doc);
  const close = (node: unknown, open = false): unknown => {
    if (Array.isArray(node)) return node.map((n) => close(n));
    if (node === null || typeof node !== 'object') return node;
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) {
      if (k === 'example' || k === 'examples') out[k] = v;
      else if (k === 'allOf') out[k] = (v as unknown[]).map((m) => close(m, true));
      else out[k] = close(v);
    }
    if (!open && (out.properties || out.allOf) && !('additionalProperties' in out) && !('unevaluatedProperties' in out)) out.unevaluatedProperties = false;
    return out;
  };
  const result = close(doc) as Json;
  for (const ref of members) {
    const name = ref.split('/').pop()!;
    result.components.schemas[name] = close(doc.components.schemas[name], true);
  }
  return result;
}

describe('answers of the real API against the schemas of its OpenAPI document', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let api: TestApi;
  let oauth: FakeOAuth;
  let doc: Json;
  let ajv: Ajv2020;
  /** operationId → the statuses checked. */
  const checked = new Map<string, Set<number>>();

  beforeAll(async () => {
    api = await startTestApi(stack, TASK_QUEUE);
    oauth = await startFakeOAuth();
    doc = (await (await fetch(`${api.server.url}/openapi.json`)).json()) as Json;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    // An answer must not carry a property its schema does not name: a client generated from the
    // document would not know it. (An object the document leaves open keeps its
    // additionalProperties.)
    ajv.addSchema(closed(doc), 'openapi');
  });
  afterAll(async () => {
    await api?.server.close();
    await oauth?.close();
  });

  /** The response object of `status` for `method path`, its `$ref` followed. */
  function documented(method: string, path: string, status: number): Json | undefined {
    let response = doc.paths[path]?.[method]?.responses?.[String(status)] as Json | undefined;
    while (response?.$ref) response = (response.$ref as string).slice(2).split('/').reduce((o: Json, k) => o[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
    return response;
  }

  /**
   * Sends `method url` (the operation `path` of the document) and checks the answer against the
   * document: the status `status`, declared by the operation, a documented content type and a body
   * its schema accepts. Answers the body (parsed when JSON).
   */
  async function check(method: 'get' | 'post' | 'patch' | 'delete', path: string, url: string, status: number, opts: { body?: unknown; key?: string | null } = {}): Promise<any> {
    const key = opts.key === undefined ? TEST_API_KEY : opts.key;
    const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${api.server.url}${url}`, { method: method.toUpperCase(), headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), redirect: 'manual' });
    const text = await res.text();
    const what = `${method.toUpperCase()} ${url} → ${res.status} ${text.slice(0, 500)}`;
    expect(res.status, what).toBe(status);
    const operation = doc.paths[path]?.[method] as Json | undefined;
    expect(operation, `${method.toUpperCase()} ${path} is documented`).toBeDefined();
    const response = documented(method, path, status);
    expect(response, `${what}: the status is declared`).toBeDefined();
    if (!checked.has(operation!.operationId)) checked.set(operation!.operationId, new Set());
    checked.get(operation!.operationId)!.add(status);
    if (!response!.content) {
      expect(text, `${what}: no body is documented`).toBe('');
      return undefined;
    }
    const mediaType = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
    expect(Object.keys(response!.content), `${what}: its content type ${mediaType}`).toContain(mediaType);
    const body: unknown = mediaType === 'application/json' ? JSON.parse(text) : text;
    const pointer = `openapi#/paths/${token(path)}/${method}/responses/${status}/content/${token(mediaType)}/schema`;
    const validate = ajv.getSchema(pointer) as ValidateFunction | undefined;
    expect(validate, `${pointer} compiles`).toBeDefined();
    const valid = validate!(body);
    expect(valid ? [] : validate!.errors, `${what}: the body against its documented schema`).toEqual([]);
    return body;
  }

  const ZERO = '00000000-0000-4000-8000-000000000000';

  it('probes and metrics', async () => {
    await check('get', '/healthz', '/healthz', 200, { key: null });
    await check('get', '/healthz', '/healthz?x=%00', 400, { key: null });
    await check('get', '/readyz', '/readyz', 200, { key: null });
    await check('get', '/readyz', '/readyz?x=%00', 400, { key: null });
    await check('get', '/metrics', '/metrics', 200);
    await check('get', '/metrics', '/metrics', 401, { key: null });
  });

  it('connections, syncs, jobs, backfills, the records feed and purges', async () => {
    const demo = { tenant_id: 'acme', provider: 'demo', config: { records_per_resource: 3, page_size: 3 }, schedule: { interval_seconds: 3600 } };
    const created = await check('post', '/connections', '/connections', 201, { body: { ...demo, app_key: 'bodies' } });
    const id = created.id as string;
    await check('post', '/connections', '/connections', 409, { body: { ...demo, app_key: 'bodies' } });
    await check('get', '/connections', '/connections?tenant_id=acme', 200);
    await check('get', '/connections', '/connections?limit=0', 400);
    await check('get', '/connections/{id}', `/connections/${id}`, 200);
    await check('get', '/connections/{id}', `/connections/${ZERO}`, 404);
    await check('patch', '/connections/{id}', `/connections/${id}`, 200, { body: { schedule: { interval_seconds: 7200 } } });
    await check('patch', '/connections/{id}', `/connections/${ZERO}`, 404, { body: { schedule: { interval_seconds: 7200 } } });

    const accepted = await check('post', '/connections/{id}/sync', `/connections/${id}/sync`, 202, { body: { mode: 'full' } });
    await check('post', '/connections/{id}/sync', `/connections/${id}/sync`, 400, { body: { mode: 'sideways' } });
    const jobId = accepted.job_id as string;
    await check('get', '/jobs/{id}', `/jobs/${jobId}?include_tasks=true`, 200);
    await check('get', '/jobs/{id}', `/jobs/${ZERO}`, 404);
    await check('get', '/jobs', `/jobs?connection_id=${id}`, 200);
    await check('get', '/jobs', '/jobs?status=sideways', 400);
    await check('post', '/sync', '/sync', 202, { body: { tenant_id: 'acme', app_key: 'bodies', mode: 'incremental', resource_types: ['issues'] } });
    await check('post', '/sync', '/sync', 404, { body: { tenant_id: 'acme', app_key: 'nobody' } });
    await check('post', '/jobs/schedule', '/jobs/schedule', 202, { body: { pairId: id, window: { start: '2025-01-01T00:00:00Z', end: '2025-01-02T00:00:00Z' } } });
    await check('post', '/jobs/schedule', '/jobs/schedule', 404, { body: { pairId: ZERO, window: { start: '2025-01-01T00:00:00Z', end: '2025-01-02T00:00:00Z' } } });

    // The full sync stores the demo's records; then the feed has changes and a cursor.
    for (let job: any; (job = await check('get', '/jobs/{id}', `/jobs/${jobId}`, 200)).status !== 'completed'; ) {
      expect(['queued', 'running', 'retrying'], JSON.stringify(job)).toContain(job.status);
      await new Promise((r) => setTimeout(r, 200));
    }
    await check('post', '/sync', '/sync', 200, { body: { tenant_id: 'acme', app_key: 'bodies', immediate: true, resource_types: ['users'] } });
    const page = await check('get', '/connections/{id}/records', `/connections/${id}/records?limit=2`, 200);
    expect(page.items.length).toBeGreaterThan(0);
    await check('get', '/connections/{id}/records', `/connections/${id}/records?cursor=not-a-cursor`, 400);
    await check('get', '/connections/{id}/records', `/connections/${ZERO}/records`, 404);
    await check('post', '/jobs/{id}/cancel', `/jobs/${jobId}/cancel`, 409);
    const running = await check('post', '/connections/{id}/sync', `/connections/${id}/sync`, 202, { body: { mode: 'full', resource_types: ['pull_requests'] } });
    await check('post', '/jobs/{id}/cancel', `/jobs/${running.job_id}/cancel`, 202);

    await check('post', '/connections/{id}/pause', `/connections/${id}/pause`, 200);
    await check('post', '/connections/{id}/sync', `/connections/${id}/sync`, 409, { body: {} });
    await check('post', '/connections/{id}/resume', `/connections/${id}/resume`, 200);
    await check('post', '/connections/{id}/disable', `/connections/${id}/disable`, 200);
    await check('post', '/connections/{id}/pause', `/connections/${id}/pause`, 409);
    await check('post', '/connections/{id}/resume', `/connections/${ZERO}/resume`, 404);
    await check('post', '/connections/{id}/disable', `/connections/${ZERO}/disable`, 404);
    const purge = await check('delete', '/connections/{id}', `/connections/${id}`, 202);
    await check('delete', '/connections/{id}', `/connections/${ZERO}`, 404);
    await check('get', '/purges/{id}', `/purges/${purge.id}`, 200);
    await check('get', '/purges/{id}', `/purges/${ZERO}`, 404);
  });

  it('webhooks and their deliveries', async () => {
    const hook = await check('post', '/webhooks', '/webhooks', 201, { body: { tenant_id: 'acme', url: 'https://93.184.215.14/hooks', event_types: ['sync.completed'] } });
    await check('post', '/webhooks', '/webhooks', 400, { body: { tenant_id: 'acme', url: 'ftp://example.com/hooks', event_types: ['sync.completed'] } });
    await check('get', '/webhooks', '/webhooks?tenant_id=acme', 200);
    await check('get', '/webhooks', '/webhooks?limit=1000', 400);
    await check('get', '/webhooks/{id}', `/webhooks/${hook.id}`, 200);
    await check('get', '/webhooks/{id}', `/webhooks/${ZERO}`, 404);
    await check('post', '/webhooks/{id}/rotate-secret', `/webhooks/${hook.id}/rotate-secret`, 200, { body: { expire_previous_after_seconds: 0 } });
    await check('post', '/webhooks/{id}/rotate-secret', `/webhooks/${ZERO}/rotate-secret`, 404, { body: {} });
    // Disabled (its answer shows when and why), then enabled again for the redelivery below.
    await check('patch', '/webhooks/{id}', `/webhooks/${hook.id}`, 200, { body: { enabled: false } });
    await check('patch', '/webhooks/{id}', `/webhooks/${hook.id}`, 200, { body: { enabled: true } });
    await check('patch', '/webhooks/{id}', `/webhooks/${ZERO}`, 404, { body: { enabled: true } });
    // Its redelivery below goes nowhere off this machine: nothing listens on the discard port.
    await stack.db.pool.query(`update webhooks set url = 'http://127.0.0.1:9/hooks' where id = $1`, [hook.id]);
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `with event as (insert into webhook_events (tenant_id, event_type, payload) values ('acme', 'sync.completed', '{}') returning id)
       insert into webhook_deliveries (webhook_id, event_id, status, attempts) select $1, id, 'failed', 1 from event returning id`,
      [hook.id],
    );
    const deliveries = await check('get', '/webhooks/{id}/deliveries', `/webhooks/${hook.id}/deliveries`, 200);
    expect(deliveries.items).toHaveLength(1);
    await check('get', '/webhooks/{id}/deliveries', `/webhooks/${ZERO}/deliveries`, 404);
    await check('post', '/webhooks/{id}/deliveries/{delivery_id}/redeliver', `/webhooks/${hook.id}/deliveries/${rows[0]!.id}/redeliver`, 202);
    await check('post', '/webhooks/{id}/deliveries/{delivery_id}/redeliver', `/webhooks/${hook.id}/deliveries/${ZERO}/redeliver`, 404);
    await check('delete', '/webhooks/{id}', `/webhooks/${hook.id}`, 204);
    await check('delete', '/webhooks/{id}', `/webhooks/${hook.id}`, 404);
  });

  it('tenant keys, limits and the audit log', async () => {
    const key = await check('post', '/tenants/{tenant_id}/api-keys', '/tenants/acme/api-keys', 201, { body: { name: 'bodies', scopes: ['read'] } });
    await check('post', '/tenants/{tenant_id}/api-keys', '/tenants/acme/api-keys', 400, { body: { scopes: ['everything'] } });
    await check('get', '/tenants/{tenant_id}/api-keys', '/tenants/acme/api-keys', 200);
    // A tenant key on an admin route.
    await check('get', '/tenants/{tenant_id}/api-keys', '/tenants/acme/api-keys', 403, { key: key.secret });
    await check('delete', '/tenants/{tenant_id}/api-keys/{key_id}', `/tenants/acme/api-keys/${key.id}`, 200);
    await check('delete', '/tenants/{tenant_id}/api-keys/{key_id}', `/tenants/acme/api-keys/${ZERO}`, 404);
    await check('get', '/tenants/{tenant_id}/limits', '/tenants/acme/limits', 200);
    await check('get', '/tenants/{tenant_id}/limits', '/tenants/acme/limits', 401, { key: 'not-a-key' });
    await check('patch', '/tenants/{tenant_id}/limits', '/tenants/acme/limits', 200, { body: { max_connections: 50, max_webhooks: null } });
    await check('patch', '/tenants/{tenant_id}/limits', '/tenants/acme/limits', 400, { body: { max_connections: -1 } });
    await check('get', '/audit', '/audit?tenant_id=acme', 200);
    await check('get', '/audit', '/audit?limit=0', 400);
  });

  it('OAuth apps and the connect flow', async () => {
    const redirect = `${api.server.url}/oauth/callback`;
    const app = await check('post', '/oauth-apps', '/oauth-apps', 201, {
      body: { tenant_id: 'acme', name: 'bodies', client_id: oauth.clientId, client_secret: oauth.clientSecret, authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: redirect, scopes: ['read'] },
    });
    await check('post', '/oauth-apps', '/oauth-apps', 400, { body: { tenant_id: 'acme', name: 'no spaces allowed' } });
    await check('get', '/oauth-apps', '/oauth-apps?tenant_id=acme', 200);
    await check('get', '/oauth-apps', '/oauth-apps?limit=0', 400);
    await check('get', '/oauth-apps/{id}', `/oauth-apps/${app.id}`, 200);
    await check('get', '/oauth-apps/{id}', `/oauth-apps/${ZERO}`, 404);
    await check('patch', '/oauth-apps/{id}', `/oauth-apps/${app.id}`, 200, { body: { scopes: ['read', 'write'] } });
    await check('patch', '/oauth-apps/{id}', `/oauth-apps/${ZERO}`, 404, { body: { scopes: ['read'] } });

    const id = randomUUID();
    const config = { base_url: oauth.url, auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } };
    await stack.db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config, status) values ($1, 'acme', 'http', 'bodies-oauth', $2, 'needs_reauth')`, [id, config]);
    const start = await check('post', '/connections/{id}/oauth/authorize', `/connections/${id}/oauth/authorize`, 200, { body: { oauth_app_id: app.id } });
    await check('post', '/connections/{id}/oauth/authorize', `/connections/${id}/oauth/authorize`, 400, { body: { oauth_app_id: app.id, redirect_uri: `${redirect}/` } });
    const consent = await fetch(start.authorization_url as string, { redirect: 'manual' });
    expect(consent.status).toBe(302);
    const back = new URL(consent.headers.get('location')!);
    await check('get', '/oauth/callback', `${back.pathname}${back.search}`, 200, { key: null });
    // Single use: the same state again is refused.
    await check('get', '/oauth/callback', `${back.pathname}${back.search}`, 400, { key: null });

    // An app a connection holds cannot be deleted; one nobody holds can.
    await check('delete', '/oauth-apps/{id}', `/oauth-apps/${app.id}`, 409);
    const spare = await check('post', '/oauth-apps', '/oauth-apps', 201, {
      body: { tenant_id: 'acme', name: 'spare', client_id: 'c', client_secret: 's', authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: redirect },
    });
    await check('delete', '/oauth-apps/{id}', `/oauth-apps/${spare.id}`, 204);
  });

  it('every documented operation was answered once with a 2xx and once with a 4xx', () => {
    const operations = Object.values(doc.paths as Record<string, Json>).flatMap((item) => Object.values(item).map((op) => (op as Json).operationId as string));
    const missing = operations.filter((op) => {
      const statuses = [...(checked.get(op) ?? [])];
      return !statuses.some((s) => s >= 200 && s < 300) || !statuses.some((s) => s >= 400 && s < 500);
    });
    expect(missing).toEqual([]);
  });
});
