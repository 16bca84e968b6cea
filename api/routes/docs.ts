import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { z, type OpenAPIHono } from '@hono/zod-openapi';
import { WEBHOOK_EVENT_TYPES } from '../../policy/vocabulary';
import type { ApiEnv } from '../env';
import { NUL_IN_URL_MESSAGE } from '../errors';
import { isAdminOnlyPath } from '../middleware/tenant-scope';
import { errorAnswer, errorResponses } from '../schemas/common';
import { ANSWER_EXAMPLES } from '../schemas/examples';
import { WEBHOOK_EVENT_DESCRIPTIONS, WEBHOOK_EVENT_EXAMPLES, webhookEventSchema } from '../schemas/webhook-events';

/** Where `/docs` takes Swagger UI from: the pinned `swagger-ui-dist` package, never a CDN. */
const SWAGGER_UI_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The Swagger UI version served (the installed, pinned package's). */
export const SWAGGER_UI_VERSION = (JSON.parse(readFileSync(path.join(SWAGGER_UI_DIR, 'package.json'), 'utf8')) as { version: string }).version;

/**
 * The Content-Security-Policy of the docs page: scripts, styles and fetches from this origin only
 * (no inline script, no eval, no CDN), inline styles (Swagger UI sets style attributes), images
 * from here or data: URIs (its icons), and no framing.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

// The assets, read once from the package at first use (the bundle is ≈ 1.7 MB).
const ASSETS = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
} as const;
const assetCache = new Map<string, string>();
function asset(name: keyof typeof ASSETS): string {
  let text = assetCache.get(name);
  if (text === undefined) {
    text = readFileSync(path.join(SWAGGER_UI_DIR, name), 'utf8');
    assetCache.set(name, text);
  }
  return text;
}

// The page has no inline script: the initializer is a file of its own, reading the document's
// URL from the page, so the CSP can forbid inline scripts.
const INITIALIZER = `window.addEventListener('load', function () {
  var root = document.getElementById('swagger-ui');
  window.ui = SwaggerUIBundle({ url: root.getAttribute('data-url'), dom_id: '#swagger-ui' });
});
`;

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Synctide API</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css?v=${SWAGGER_UI_VERSION}">
</head>
<body>
  <div id="swagger-ui" data-url="/openapi.json"></div>
  <script src="/docs/swagger-ui-bundle.js?v=${SWAGGER_UI_VERSION}"></script>
  <script src="/docs/init.js?v=${SWAGGER_UI_VERSION}"></script>
</body>
</html>
`;

const DOCS_PATHS = new Set(['/docs', '/openapi.json', '/docs/init.js', ...Object.keys(ASSETS).map((name) => `/docs/${name}`)]);

/** True for the OpenAPI document, the docs page and its assets (open routes: no key needed). */
export function isDocsPath(p: string): boolean {
  return DOCS_PATHS.has(p);
}

/** The methods an OpenAPI path item may hold. */
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** The document's own parts: info, servers, security schemes' use, tags. */
const DOCUMENT_CONFIG = {
  openapi: '3.1.0',
  info: {
    title: 'Synctide API',
    version: '0.1.0',
    description:
      'Connections, syncs, jobs, the records feed and webhooks of Synctide. Every route but /healthz, /readyz and the docs needs ' +
      '`Authorization: Bearer <key>`: the admin key (`adminApiKey`: every tenant, and the admin-only routes /tenants, /audit and /metrics), ' +
      "or a tenant API key (`tenantApiKey`), which sees only its own tenant (another tenant's ids answer 404) and needs the `read` scope " +
      'for GET and the `write` scope for every other method. Every error is `{"error": {"code", "message"}}` with a `code` of the `Error` ' +
      'schema\'s enum. Event payloads sent to webhooks are under `webhooks`, signed per Standard Webhooks.',
  },
  servers: [{ url: '/', description: 'The API that serves this document' }],
  tags: [
    { name: 'connections', description: 'Provider connections, each owned by a `connection:<id>` workflow; deletion and its purge' },
    { name: 'sync', description: 'Syncing an app instance by app key' },
    { name: 'jobs', description: 'Sync jobs: status, progress, backfills, cancellation' },
    { name: 'records', description: "A connection's change feed" },
    { name: 'webhooks', description: 'Subscriptions to events, and their deliveries' },
    { name: 'tenants', description: 'Tenant API keys, limits and the audit log (admin only)' },
    { name: 'oauth', description: "A tenant's OAuth apps and the connect flow that gives a connection OAuth 2 credentials" },
    { name: 'operations', description: 'Probes and metrics' },
  ],
};

/** Who may call `method path`: the admin key only, or also a tenant key with the scope the method needs (the rule tenant-scope.ts enforces). */
function securityOf(path: string, method: string): Record<string, string[]>[] {
  if (isAdminOnlyPath(path)) return [{ adminApiKey: [] }];
  return [{ adminApiKey: [] }, { tenantApiKey: [method === 'get' ? 'read' : 'write'] }];
}

type Document = ReturnType<OpenAPIHono<ApiEnv>['getOpenAPI31Document']>;
type MediaType = { schema?: { $ref?: string }; example?: unknown; examples?: unknown };

/**
 * The OpenAPI document of `app` (registerDocs registered the probes, metrics and event payloads):
 * each operation's security from the admin-only rule unless its route sets one, and each JSON
 * answer of a named schema that shows no example gets that schema's (api/schemas/examples.ts).
 */
export function openApiDocument(app: OpenAPIHono<ApiEnv>): Document {
  const doc = app.getOpenAPI31Document(DOCUMENT_CONFIG);
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      operation.security ??= securityOf(path, method);
      for (const response of Object.values(operation.responses ?? {})) {
        const media = ('content' in response ? response.content?.['application/json'] : undefined) as MediaType | undefined;
        const name = media?.schema?.$ref?.split('/').pop();
        if (media && name && media.example === undefined && media.examples === undefined && name in ANSWER_EXAMPLES) media.example = ANSWER_EXAMPLES[name];
      }
    }
  }
  return doc;
}

/** `GET /readyz`'s answer. */
const ReadinessSchema = z
  .object({
    status: z.enum(['ok', 'unavailable']),
    reason: z
      .enum(['stopping'])
      .optional()
      .openapi({ description: 'stopping: the process\'s shutdown has begun (it finishes the requests in flight, then exits); unavailable whatever its checks say' }),
    checks: z.object({
      postgres: z.enum(['ok', 'unreachable', 'busy']).openapi({ description: 'busy: every connection of the process\'s pool is in use (still ready)' }),
      temporal: z.enum(['ok', 'unreachable']),
    }),
    details: z
      .object({ stale_connections: z.number().int().openapi({ description: 'Active connections whose last successful sync is older than twice their interval' }) })
      .optional()
      .openapi({ description: 'Absent when Postgres did not answer' }),
  })
  .openapi('Readiness');

/** The probes and `/metrics` (plain routes of health.ts and lib/http.ts), documented. */
function registerOperationsPaths(app: OpenAPIHono<ApiEnv>): void {
  const tags = ['operations'];
  // The one refusal an open probe can meet: every URL is checked for NUL before any route.
  // Its example is that refusal's own message (the shared one of invalid_request names a query limit, which a probe has not).
  const refusal = errorAnswer('The URL holds a NUL character (`%00`)', 'invalid_request');
  const nulInUrl = {
    ...refusal,
    content: { 'application/json': { ...refusal.content['application/json'], examples: { invalid_request: { value: { error: { code: 'invalid_request', message: NUL_IN_URL_MESSAGE } } } } } },
  };
  app.openAPIRegistry.registerPath({
    method: 'get', path: '/healthz', tags, operationId: 'getHealth', security: [],
    summary: 'Liveness: the process is up',
    description: 'Answers 200 while the process serves requests; checks nothing else (use /readyz for the servers it needs). No key needed.',
    responses: {
      200: { description: 'Up', content: { 'application/json': { schema: z.object({ status: z.literal('ok') }), example: { status: 'ok' } } } },
      400: nulInUrl,
    },
  });
  app.openAPIRegistry.registerPath({
    method: 'get', path: '/readyz', tags, operationId: 'getReadiness', security: [],
    summary: 'Readiness: Postgres and Temporal answer',
    description:
      'Checks that Postgres and Temporal answer, each within 2 s; the answer is reused for a few seconds and concurrent probes share one check. From the start of the process\'s shutdown it answers 503 with `reason` `stopping`. No key needed.',
    responses: {
      200: {
        description: 'Ready',
        content: { 'application/json': { schema: ReadinessSchema, example: { status: 'ok', checks: { postgres: 'ok', temporal: 'ok' }, details: { stale_connections: 0 } } } },
      },
      503: {
        description: 'Not ready: a server did not answer, or the process is stopping (`reason`); retry after `Retry-After` seconds',
        headers: { 'Retry-After': { description: 'Seconds to wait before probing again', schema: { type: 'integer', minimum: 1 } } },
        content: { 'application/json': { schema: ReadinessSchema, example: { status: 'unavailable', checks: { postgres: 'ok', temporal: 'unreachable' }, details: { stale_connections: 0 } } } },
      },
      400: nulInUrl,
    },
  });
  app.openAPIRegistry.registerPath({
    method: 'get', path: '/metrics', tags, operationId: 'getMetrics',
    summary: 'Prometheus metrics (admin only, unless METRICS_PUBLIC)',
    description: "The process's metrics in the Prometheus text format. Needs the admin key (their labels carry tenant ids) unless the deployment sets METRICS_PUBLIC=true.",
    responses: {
      200: {
        description: 'The metrics',
        content: { 'text/plain': { schema: z.string(), example: '# HELP sync_jobs_total Sync jobs reaching a status: queued when enqueued, completed/failed/cancelled when they end\n# TYPE sync_jobs_total counter\nsync_jobs_total{status="completed",provider="github"} 12\n' } },
      },
      401: errorResponses[401],
      403: errorResponses[403],
      429: errorResponses[429],
      500: errorResponses[500],
    },
  });
}

/** Header of a delivery, documented as the receiver sees it. */
const deliveryHeader = (description: string, example: string, deprecated = false) =>
  z.string().openapi({ description, example, ...(deprecated && { param: { deprecated: true } }) });

/** Each event type's delivery, in the document's `webhooks`: its headers and its body. */
function registerWebhookEvents(app: OpenAPIHono<ApiEnv>): void {
  const headers = z.object({
    'webhook-id': deliveryHeader('The event id (the same on every retry and redelivery): deduplicate on it', '7b6a5f4e-3d2c-4b1a-9f8e-7d6c5b4a3f2e'),
    'webhook-timestamp': deliveryHeader('Unix seconds of this attempt; refuse one far from your clock', '1735732800'),
    'webhook-signature': deliveryHeader(
      'Standard Webhooks: `v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed by the bytes of the `whsec_` secret; ' +
        "while a rotated secret's overlap lasts, two such entries, space-separated: the new secret's, then the previous one's (accept the request if either verifies)",
      'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
    ),
    'synctide-event-id': deliveryHeader('Deprecated: the same as webhook-id', '7b6a5f4e-3d2c-4b1a-9f8e-7d6c5b4a3f2e', true),
    'synctide-event-type': deliveryHeader('Deprecated: the event type', 'sync.completed', true),
    'synctide-delivery-id': deliveryHeader('Deprecated: the delivery (one per event and webhook)', 'a8e4c3d2-1b0f-4a9e-8d7c-6b5a4f3e2d1c', true),
    'synctide-signature': deliveryHeader(
      'Deprecated: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed by the secret string; sent beside the standard headers for a deprecation period; ' +
        "while a rotated secret's overlap lasts, one `v1=` per secret, comma-separated: the previous secret's, then the new one's, last (accept the request if any verifies)",
      't=1735732800,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd',
      true,
    ),
  });
  for (const type of WEBHOOK_EVENT_TYPES) {
    app.openAPIRegistry.registerWebhook({
      method: 'post', path: type, tags: ['webhooks'], security: [],
      operationId: `${type.replace(/[._]([a-z])/g, (_, c: string) => c.toUpperCase())}Event`,
      summary: `Event ${type}`,
      description: `${WEBHOOK_EVENT_DESCRIPTIONS[type]} POSTed to each webhook subscribed to \`${type}\`, until it answers 2xx (retried for 25 hours; a 410 Gone fails it at once).`,
      request: {
        headers,
        body: {
          required: true,
          content: {
            'application/json': {
              schema: webhookEventSchema(type),
              example: { id: '7b6a5f4e-3d2c-4b1a-9f8e-7d6c5b4a3f2e', type, created_at: '2025-01-01T12:00:42.000Z', tenant_id: 'acme', data: WEBHOOK_EVENT_EXAMPLES[type] },
            },
          },
        },
      },
      responses: {
        200: { description: 'Any 2xx acknowledges the delivery' },
        410: { description: 'Gone: the receiver takes no more webhooks at this URL. The delivery fails at once, not retried (its attempt is listed with the 410), and the webhook is disabled (`disabled_at`, `disabled_reason`): its other pending deliveries end failed without a request, and no new event is delivered to it until `PATCH /webhooks/{id}` with `enabled: true`' },
        400: { description: 'Any other answer (or none within 10 s) is retried: after 10 s, 20 s, 40 s, … at most hourly, for 25 hours; after a 429 or 503 with `Retry-After` (seconds or an HTTP-date), no sooner than it asks, at most an hour later' },
      },
    });
  }
}

/** The OpenAPI document of every route registered on `app` (call after they all are), and `/docs`. */
export function registerDocs(app: OpenAPIHono<ApiEnv>): void {
  app.openAPIRegistry.registerComponent('securitySchemes', 'adminApiKey', {
    type: 'http',
    scheme: 'bearer',
    description: 'The ADMIN_API_KEY of the deployment: every tenant and every route',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'tenantApiKey', {
    type: 'http',
    scheme: 'bearer',
    description: "A tenant API key (`stk_<prefix>_<secret>`, made by `POST /tenants/{tenant_id}/api-keys`): its own tenant only, never the admin-only routes; the `read` scope for GET, `write` for every other method",
  });
  registerOperationsPaths(app);
  registerWebhookEvents(app);
  app.get('/openapi.json', (c) => c.json(openApiDocument(app)));
  app.get('/docs', (c) => {
    c.header('Content-Security-Policy', DOCS_CSP);
    return c.html(PAGE);
  });
  app.get('/docs/init.js', (c) => {
    c.header('Content-Type', 'text/javascript; charset=utf-8');
    c.header('Cache-Control', 'public, max-age=3600');
    return c.body(INITIALIZER);
  });
  for (const name of Object.keys(ASSETS) as (keyof typeof ASSETS)[]) {
    app.get(`/docs/${name}`, (c) => {
      c.header('Content-Type', ASSETS[name]);
      // Versioned URLs (?v=): a new package version is a new URL.
      c.header('Cache-Control', 'public, max-age=86400');
      return c.body(asset(name));
    });
  }
}
