// The answers a tenant key with the `write` scope alone gets from the write routes that leave out
// what only a read shows (PATCH /connections/{id}, PATCH /oauth-apps/{id}, PATCH /webhooks/{id},
// POST /webhooks/{id}/rotate-secret, POST /jobs/schedule) are answers the OpenAPI document
// describes: each body is valid against its operation's schema, closed to properties it does not
// name, and a key that reads gets the same properties as the admin. Real API app over HTTP on
// 127.0.0.1, real Postgres, no Temporal (none of these requests reaches it).
import { randomUUID } from 'node:crypto';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, type HttpServer } from '../lib/http';
import { syncJobWorkflowId } from '../temporal/ids';
import { apiAppWithoutTemporal, callApi, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { TEST_PROVIDER_POLICY } from './helpers/deps';

const TASK_QUEUE = 'write-only-answer-schemas';
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
type Json = Record<string, any>;

/** The document with every object schema that names its properties closed to others. */
function closed(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(closed);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === 'example' || k === 'examples' ? v : closed(v);
  if (out.properties && !('additionalProperties' in out) && !('unevaluatedProperties' in out)) out.unevaluatedProperties = false;
  return out;
}

describe("write-only keys' answers against the OpenAPI document", () => {
  const db = useTestDatabase();
  let server: HttpServer;
  let ajv: Ajv2020;

  beforeAll(async () => {
    const providers = { ...TEST_PROVIDER_POLICY, allowedHosts: ['idp.example'] };
    server = await listen(apiAppWithoutTemporal(db.pool, TASK_QUEUE, { providers }), '127.0.0.1', 0);
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as Json;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema(closed(doc) as Json, 'openapi');
  });
  afterAll(async () => {
    await server?.close();
  });

  const admin = (method: string, path: string, body?: unknown) => callApi(server.url, TEST_API_KEY, method, path, body);
  const token = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
  const newKey = async (tenant: string, scopes: string[]) => {
    const res = await admin('POST', `/tenants/${tenant}/api-keys`, { scopes });
    expect(res.status, res.text).toBe(201);
    return res.body.secret as string;
  };

  /** Sends the request with each key and checks each answer against the schema of `status`. */
  async function each(route: { method: string; path: string; url: string; status: number; body?: unknown; headers?: Record<string, string> }, tenant: string, hidden: string[]) {
    const keys = { writer: await newKey(tenant, ['write']), reader: await newKey(tenant, ['read', 'write']), admin: TEST_API_KEY };
    const answers: Record<string, Json> = {};
    for (const [who, key] of Object.entries(keys)) {
      const res = await fetch(`${server.url}${route.url}`, {
        method: route.method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...route.headers },
        body: route.body === undefined ? undefined : JSON.stringify(route.body),
      });
      const text = await res.text();
      expect(res.status, `${who}: ${text}`).toBe(route.status);
      const body = JSON.parse(text) as Json;
      const pointer = `openapi#/paths/${token(route.path)}/${route.method.toLowerCase()}/responses/${route.status}/content/application~1json/schema`;
      const validate = ajv.getSchema(pointer) as ValidateFunction | undefined;
      expect(validate, pointer).toBeDefined();
      const valid = validate!(body);
      expect(valid ? [] : validate!.errors, `${who}: ${route.method} ${route.path} ${text}`).toEqual([]);
      answers[who] = body;
    }
    for (const field of hidden) expect(answers.writer, field).not.toHaveProperty(field);
    expect(Object.keys(answers.reader!).sort()).toEqual(Object.keys(answers.admin!).sort());
    expect(Object.keys(answers.writer!).sort()).toEqual(Object.keys(answers.admin!).filter((k) => !hidden.includes(k)).sort());
  }

  it('PATCH /connections/{id}', async () => {
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status, config) values ('s-conn', 'demo', 'a', 'active', '{"k":"v"}') returning id`);
    await each({ method: 'PATCH', path: '/connections/{id}', url: `/connections/${rows[0]!.id}`, status: 200, body: {} }, 's-conn', ['config']);
  });

  it('PATCH /oauth-apps/{id}', async () => {
    const created = await admin('POST', '/oauth-apps', {
      tenant_id: 's-app', name: 'n', client_id: 'cid', client_secret: 'client-secret-0123456789',
      authorize_url: 'https://idp.example/authorize', token_url: 'https://idp.example/token', redirect_uri: 'https://synctide.example/oauth/callback', scopes: ['repo'],
    });
    expect(created.status, created.text).toBe(201);
    await each({ method: 'PATCH', path: '/oauth-apps/{id}', url: `/oauth-apps/${created.body.id}`, status: 200, body: {} }, 's-app', ['client_id', 'authorize_url', 'token_url', 'redirect_uri', 'scopes']);
  });

  it('PATCH /webhooks/{id} and POST /webhooks/{id}/rotate-secret', async () => {
    const created = await admin('POST', '/webhooks', { tenant_id: 's-hook', url: 'https://hooks.example.com/x', event_types: ['sync.failed'] });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as string;
    await each({ method: 'PATCH', path: '/webhooks/{id}', url: `/webhooks/${id}`, status: 200, body: { enabled: false } }, 's-hook', ['url', 'event_types']);
    await each({ method: 'POST', path: '/webhooks/{id}/rotate-secret', url: `/webhooks/${id}/rotate-secret`, status: 200, body: {} }, 's-hook', ['url', 'event_types']);
  });

  it('POST /jobs/schedule repeating an Idempotency-Key', async () => {
    const tenant = 's-job';
    const window = { start: '2025-01-01T00:00:00.000Z', end: '2025-01-02T00:00:00.000Z' };
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'b', 'active') returning id`, [tenant]);
    const connectionId = rows[0]!.id;
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, priority, scheduled_at, window_start, window_end,
                              payload, idempotency_key, workflow_id, started_at, finished_at, last_error, total_tasks, completed_tasks, failed_tasks, processed_entities)
       values ($1, $2, $3, 'incremental', 'backfill', 'failed', 0, now(), $4, $5, '{"reason":"replay"}', 'k-schemas', $6, now(), now(), 'boom', 2, 1, 1, 7)`,
      [jobId, connectionId, tenant, window.start, window.end, syncJobWorkflowId(jobId)],
    );
    await each(
      { method: 'POST', path: '/jobs/schedule', url: '/jobs/schedule', status: 202, body: { pairId: connectionId, window, payload: { reason: 'replay' } }, headers: { 'idempotency-key': 'k-schemas' } },
      tenant,
      ['started_at', 'finished_at', 'retry_count', 'max_retries', 'retry_after', 'total_tasks', 'completed_tasks', 'failed_tasks', 'processed_entities', 'counts', 'progress_percentage', 'error'],
    );
  });
});
