// The OpenAPI document as a client generator and a reader need it: every operation named
// (operationId) and described, examples on every JSON answer, Retry-After on 429 and 503, a 500,
// the error codes as an enum, both security schemes with the admin-only routes marked, the event
// payloads under `webhooks`, and the probes and metrics. Only the document is read: no route
// handler runs, so this needs no server. (`npm run lint:openapi` lints the same document with
// redocly's recommended rules.)
import { describe, expect, it } from 'vitest';
import { createApp } from '../api/app';
import type { ApiDeps } from '../api/deps';
import { Registry } from 'prom-client';
import { createLogger } from '../lib/logger';
import { API_ERROR_CODES, WEBHOOK_EVENT_TYPES } from '../policy/vocabulary';

type Json = Record<string, any>;

async function served(): Promise<Json> {
  const app = createApp({ adminApiKey: 'openapi-document-test-0123456789ab', logger: createLogger('silent'), registry: new Registry() } as ApiDeps);
  const res = await app.request('/openapi.json');
  expect(res.status).toBe(200);
  return (await res.json()) as Json;
}

/** Every operation of the document's paths: `METHOD path` and its object. */
function operations(doc: Json): [string, Json][] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => [`${method.toUpperCase()} ${path}`, op as Json] as [string, Json]),
  );
}

describe('the OpenAPI document', () => {
  it('names and describes every operation: a unique camelCase operationId starting with a verb, and a description', async () => {
    const doc = await served();
    const ops = operations(doc);
    expect(ops.length).toBe(40);
    const ids = ops.map(([, op]) => op.operationId);
    expect(ids.filter((id) => typeof id !== 'string')).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    for (const [route, op] of ops) {
      expect(op.operationId, route).toMatch(/^(list|get|create|update|delete|pause|resume|disable|sync|request|schedule|cancel|redeliver|revoke|rotate|start|complete)[A-Z][A-Za-z]*$/);
      expect(op.description?.length ?? 0, route).toBeGreaterThan(30);
    }
    expect(Object.fromEntries(ops.map(([route, op]) => [route, op.operationId]))).toMatchObject({
      'GET /connections': 'listConnections',
      'POST /connections': 'createConnection',
      'POST /webhooks/{id}/deliveries/{delivery_id}/redeliver': 'redeliverWebhookDelivery',
      'POST /webhooks/{id}/rotate-secret': 'rotateWebhookSecret',
      'GET /healthz': 'getHealth',
      'GET /readyz': 'getReadiness',
      'GET /metrics': 'getMetrics',
    });
  });

  it('shows an example of every answer with a body, Retry-After on 429 and 503, and a 500 on every authenticated route', async () => {
    const doc = await served();
    const missing: string[] = [];
    for (const [route, op] of operations(doc)) {
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        for (const [type, media] of Object.entries((response.content ?? {}) as Record<string, Json>)) {
          if (media.example === undefined && Object.keys(media.examples ?? {}).length === 0) missing.push(`${route} ${status} ${type}`);
        }
        if (status === '429' || status === '503') expect(response.headers?.['Retry-After']?.schema, `${route} ${status}`).toEqual({ type: 'integer', minimum: 1 });
      }
      if ((op.security as Json[]).length > 0) expect(Object.keys(op.responses), route).toEqual(expect.arrayContaining(['401', '429', '500']));
    }
    expect(missing).toEqual([]);
    expect(doc.paths['/connections/{id}/sync'].post.responses['409'].content['application/json'].examples.circuit_breaker_open.value).toEqual({
      error: { code: 'circuit_breaker_open', message: expect.any(String) },
    });
  });

  it('declares every tag an operation or event uses, each with a description', async () => {
    const doc = await served();
    const used = new Set([...operations(doc), ...Object.values(doc.webhooks as Record<string, Json>).map((item) => ['', item.post] as [string, Json])].flatMap(([, op]) => op.tags as string[]));
    const declared = Object.fromEntries((doc.tags as Json[]).map((tag) => [tag.name, tag.description]));
    expect([...used].filter((tag) => !declared[tag])).toEqual([]);
  });

  it("gives error.code as the enum of the API's codes", async () => {
    const doc = await served();
    expect(doc.components.schemas.Error.properties.error.properties.code.enum).toEqual([...API_ERROR_CODES]);
  });

  it('declares the admin and the tenant key; admin-only routes take the admin key only, the probes none, the rest a tenant key with the scope the method needs', async () => {
    const doc = await served();
    expect(doc.components.securitySchemes).toMatchObject({ adminApiKey: { type: 'http', scheme: 'bearer' }, tenantApiKey: { type: 'http', scheme: 'bearer' } });
    const security = Object.fromEntries(operations(doc).map(([route, op]) => [route, op.security]));
    for (const [route, requirement] of Object.entries(security)) {
      const [method, path] = route.split(' ') as [string, string];
      if (path === '/healthz' || path === '/readyz' || path === '/oauth/callback') expect(requirement, route).toEqual([]);
      else if (/^\/(tenants|audit|metrics)/.test(path)) expect(requirement, route).toEqual([{ adminApiKey: [] }]);
      else expect(requirement, route).toEqual([{ adminApiKey: [] }, { tenantApiKey: [method === 'GET' ? 'read' : 'write'] }]);
    }
    expect(security['GET /audit']).toEqual([{ adminApiKey: [] }]);
    expect(security['POST /sync']).toEqual([{ adminApiKey: [] }, { tenantApiKey: ['write'] }]);
  });

  it('documents each event type under webhooks: its body (with an example) and the Standard Webhooks headers, the Synctide-* ones deprecated', async () => {
    const doc = await served();
    expect(Object.keys(doc.webhooks)).toEqual([...WEBHOOK_EVENT_TYPES]);
    for (const type of WEBHOOK_EVENT_TYPES) {
      const op = doc.webhooks[type].post;
      const media = op.requestBody.content['application/json'];
      expect(media.schema.properties.type).toMatchObject({ enum: [type] });
      expect(media.schema.required).toEqual(['id', 'type', 'created_at', 'tenant_id', 'data']);
      expect(media.example.type).toBe(type);
      const headers = Object.fromEntries((op.parameters as Json[]).map((p) => [p.name, p.deprecated === true]));
      expect(headers).toEqual({
        'webhook-id': false, 'webhook-timestamp': false, 'webhook-signature': false,
        'synctide-event-id': true, 'synctide-event-type': true, 'synctide-delivery-id': true, 'synctide-signature': true,
      });
    }
    const opened = doc.components.schemas.BreakerOpenedData;
    expect(opened.required.sort()).toEqual(['connection_id', 'consecutive_failures', 'last_error', 'paused_until', 'provider_slug']);
  });
});
