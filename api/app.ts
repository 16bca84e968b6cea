import { OpenAPIHono } from '@hono/zod-openapi';
import { trace } from '@opentelemetry/api';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { except } from 'hono/combine';
import { secureHeaders } from 'hono/secure-headers';
import type { ApiDeps } from './deps';
import type { ApiEnv } from './env';
import { describeIssues, errorBody, errorResponse, NUL_IN_URL_MESSAGE } from './errors';
import { auditLog } from './middleware/audit';
import { authenticate, FailedLookups, limitStateLookups } from './middleware/auth';
import { recordHttpMetrics } from './middleware/http-metrics';
import { receiveBody } from './middleware/receive-body';
import { tenantScope } from './middleware/tenant-scope';
import { temporalDeadline } from './middleware/temporal-deadline';
import { tenantTurns } from './middleware/tenant-turns';
import { TenantTurns } from '../lib/tenant-turns';
import { tenantShareOfPool } from '../policy/tenant-limits';
import { requestLog, serverRequestId } from './middleware/request-log';
import { connectionRoutes } from './routes/connections';
import { isDocsPath, registerDocs } from './routes/docs';
import { healthRoutes } from './routes/health';
import { OAUTH_CALLBACK_PATH, oauthRoutes } from './routes/oauth';
import { jobRoutes } from './routes/jobs';
import { recordRoutes } from './routes/records';
import { webhookRoutes } from './routes/webhooks';
import { metricsRoutes } from '../lib/http';
import { activeTracing } from '../lib/tracing';
import { syncRoutes } from './routes/sync';
import { tenancyRoutes } from './routes/tenancy';
import { unstorableIn } from '../policy/storable-text';
import { firstNumberNotHeld } from '../policy/exact-json';

/** Largest request body the API reads: 1 MiB. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Deepest nesting of arrays and objects a JSON body may have (the body's own object or array is
 * level 1): every check and statement that walks a value recursively (this one, the size rules'
 * JSON.stringify, the connectors' schemas) takes it whole, where thousands of levels, which fit
 * in a few KiB, overflow the stack and would answer 500.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * What in `value` the API refuses, the first in document order: nesting deeper than
 * MAX_JSON_DEPTH, a `__proto__` key (an object field's schema copies its keys into a new object,
 * which takes that one as its prototype: it was dropped from what is stored, and the checks read
 * the keys under it as the field's own), or a character Postgres cannot store in any string or
 * key; null for nothing. Walked without recursion, so no depth overflows this walk itself.
 */
function findUnstorable(value: unknown): 'depth' | 'proto' | 'nul' | 'surrogate' | null {
  const pending: { value: unknown; depth: number; key?: true }[] = [{ value, depth: 0 }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { value: item, depth } = next;
    if (next.key && item === '__proto__') return 'proto';
    if (typeof item === 'string') {
      const found = unstorableIn(item);
      if (found) return found;
      continue;
    }
    if (!item || typeof item !== 'object') continue;
    if (depth + 1 > MAX_JSON_DEPTH) return 'depth';
    const entries: [string | null, unknown][] = Array.isArray(item) ? item.map((inner) => [null, inner]) : Object.entries(item);
    // Pushed last to first, so they are taken in document order.
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, inner] = entries[i]!;
      pending.push({ value: inner, depth: depth + 1 });
      if (key !== null) pending.push({ value: key, depth: depth + 1, key: true });
    }
  }
  return null;
}

const UNSTORABLE_MESSAGE = {
  utf8: 'body: must be UTF-8 text',
  depth: `body: must not nest arrays or objects more than ${MAX_JSON_DEPTH} levels deep`,
  proto: 'body: must not contain the key "__proto__" (a JavaScript object takes it as its prototype, not as a key)',
  nul: 'body: must not contain NUL (\\u0000) characters',
  surrogate: 'body: must not contain a UTF-16 surrogate without its pair (\\ud800-\\udfff)',
} as const;

/**
 * The refusal of a JSON number a double does not hold (`number`, as written, its first 40
 * characters): every body is read by JSON.parse, so it would be checked and stored as another
 * number (1e400 as null, 1e-400 as 0, 9007199254740993 as 9007199254740992).
 */
const numberNotHeldMessage = (number: string) =>
  `body: must not contain a number a double does not hold (${number.length > 40 ? `${number.slice(0, 40)}…` : number}): it would be stored as another number`;

/** Reads UTF-8 and throws on anything else (a byte sequence that is not UTF-8). */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Whether `bytes` are UTF-8 text. */
function isUtf8(bytes: ArrayBuffer): boolean {
  try {
    strictUtf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/**
 * Refuses with 400 a JSON body that is not UTF-8 (as JSON must be: its other bytes would be read
 * as U+FFFD and stored so, something other than what was sent, as a Latin-1 "é" would),
 * a NUL character (`\u0000` in JSON, `%00` in the URL), and in a JSON body a
 * UTF-16 surrogate without its pair (`"\ud800"`): jsonb refuses both, and the failed statement
 * would quote its neighbours (credentials) into logs; text cannot hold a NUL, and would get U+FFFD
 * in place of the surrogate, storing something other than what was sent. Also a JSON body nested
 * deeper than MAX_JSON_DEPTH (400, not a stack overflow's 500 in a later check), one with a
 * `__proto__` key anywhere (an object field would drop it, see findUnstorable), and one holding a
 * number a double does not hold (`heldByDouble`: 1e400, 1e-400, 9007199254740993): every body is
 * read by JSON.parse, so it would be checked and stored as another number (null, 0,
 * 9007199254740992).
 */
const refuseUnstorable: MiddlewareHandler<ApiEnv> = async (c, next) => {
  const url = c.req.url;
  if (url.includes('\u0000') || /%00/.test(url)) return c.json(errorBody('invalid_request', NUL_IN_URL_MESSAGE), 400);
  if (c.req.method !== 'GET' && c.req.method !== 'HEAD' && /json/i.test(c.req.header('content-type') ?? '')) {
    let body: unknown;
    let text: string;
    try {
      if (!isUtf8(await c.req.arrayBuffer())) return c.json(errorBody('invalid_request', UNSTORABLE_MESSAGE.utf8), 400);
      text = await c.req.text();
      body = JSON.parse(text);
    } catch (err) {
      // Not JSON: the route's validator answers. Anything else (a body over the limit) goes on up.
      if (err instanceof SyntaxError) return next();
      throw err;
    }
    const unstorable = findUnstorable(body);
    if (unstorable) return c.json(errorBody('invalid_request', UNSTORABLE_MESSAGE[unstorable]), 400);
    const number = firstNumberNotHeld(text);
    if (number !== null) return c.json(errorBody('invalid_request', numberNotHeldMessage(number)), 400);
  }
  return next();
};

/**
 * Sets the request span's `url.full` (which @hono/otel records as the whole URL) to the URL
 * without its query: a query may carry a secret (the OAuth callback's `code` and `state`), and
 * spans carry none, as outbound spans leave out their URL's query too.
 */
const urlWithoutQueryOnSpan: MiddlewareHandler<ApiEnv> = async (c, next) => {
  const url = new URL(c.req.url);
  trace.getActiveSpan()?.setAttribute('url.full', `${url.origin}${url.pathname}`);
  return next();
};

/**
 * Probes and the metrics scrape: called every few seconds by the orchestrator and Prometheus, they
 * make no request span (nor spans of their queries, which have no span to go under).
 */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * Routes anyone may call: probes, docs (isDocsPath), (with METRICS_PUBLIC) metrics, and the OAuth
 * callback, which a person's browser reaches from the provider (its single-use state is its proof).
 */
const OPEN_PATHS = new Set(['/healthz', '/readyz', OAUTH_CALLBACK_PATH]);

/**
 * Builds the Hono application: (with tracing on, but for probes and the metrics scrape) the
 * request's span, named by its route, in the trace of an incoming `traceparent` or a new one, its
 * URL without the query → request metrics → security headers → request id (generated here) and log → body
 * limit → (the OAuth callback only) its state lookups held to the address's failed-lookup bucket → auth (admin or tenant key) → per-key rate limit →
 * the body received whole (its bytes kept for every later read) → a tenant key's turn, or none once its client has gone (its tenant's requests in flight held to half the database pool; more wait) → audit (refusals of the
 * scope included) → tenant scope → the request's deadline for its calls to Temporal (API_TEMPORAL_TIMEOUT_SECONDS) → refusal of a JSON body that is not UTF-8 and of what Postgres cannot store (NUL, lone surrogates), of nesting deeper than 64 levels, of a `__proto__` key and of a number a double does not hold → routes grouped by resource. Every answer carries hono's secure
 * headers (nosniff, no framing, no referrer, HSTS for when it is served over TLS) and a CSP that
 * allows nothing (the docs page sets its own); an answer that sets no Cache-Control gets
 * `no-store`, so no cache or proxy keeps a tenant's data. Every error is JSON
 * `{error: {code, message}}`: 400 for schema violations, 401, 403, 404, 409, 413 over 1 MiB, 429,
 * 502/504 when an immediate sync's provider failed or its deadline passed, 503 when the database
 * pool had no free connection in time (`busy`) or Postgres or Temporal is unreachable
 * (`unavailable`; Temporal also when the request's deadline for it passed), 500 otherwise (never a stack, statement or internal detail).
 */
export function createApp(deps: ApiDeps): OpenAPIHono<ApiEnv> {
  const app = new OpenAPIHono<ApiEnv>({
    defaultHook: (result, c) => {
      if (result.success) return;
      return c.json(errorBody('invalid_request', describeIssues(result.error.issues)), 400);
    },
  });
  const tracing = activeTracing();
  if (tracing) app.use(except((c) => UNTRACED_PATHS.has(c.req.path), tracing.requestSpans(), urlWithoutQueryOnSpan));
  app.use(recordHttpMetrics(deps.registry));
  app.use(
    secureHeaders({
      contentSecurityPolicy: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] },
      xFrameOptions: 'DENY',
      // A route's own header (the docs page's CSP, the assets' caching) wins.
      overwrite: false,
    }),
  );
  app.use(async (c, next) => {
    await next();
    if (!c.res.headers.has('Cache-Control')) c.header('Cache-Control', 'no-store');
  });
  app.use(serverRequestId());
  app.use(requestLog(deps.logger));
  app.use(
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      // The rest of an oversized body is not read: close the connection so no client reuses it.
      onError: (c) => {
        c.header('Connection', 'close');
        return c.json(errorBody('payload_too_large', `the request body exceeds ${MAX_BODY_BYTES} bytes (1 MiB)`), 413);
      },
    }),
  );
  const failedLookups = deps.authFailureLimit && new FailedLookups(deps.authFailureLimit, deps.trustedProxies ?? []);
  app.use(OAUTH_CALLBACK_PATH, limitStateLookups(failedLookups));
  // A pool without its size (a test's stand-in), or none (the app the OpenAPI document is read
  // from, which serves no request), counts as pg's default of 10.
  const poolMax = (deps.pool as ApiDeps['pool'] | undefined)?.options?.max ?? 10;
  // One set of turns at the pool: tenant keys' requests and the OAuth callbacks of their tenants.
  const turns = new TenantTurns(poolMax, tenantShareOfPool(poolMax));
  const guarded = [
    authenticate(deps, deps.adminApiKey, { requests: deps.rateLimit, failures: failedLookups }),
    receiveBody,
    tenantTurns(turns),
    auditLog(deps),
    tenantScope(deps),
  ];
  app.use(except((c) => OPEN_PATHS.has(c.req.path) || isDocsPath(c.req.path) || (c.req.path === '/metrics' && deps.metricsPublic === true), ...guarded));
  // Counted from the request's first call to Temporal: its wait for its turn and its statements are not Temporal's time.
  app.use(temporalDeadline(deps));

  app.use(refuseUnstorable);

  app.route('/', healthRoutes(deps));
  app.route('/', metricsRoutes(deps.registry, deps.extraMetrics));
  app.route('/', connectionRoutes(deps));
  app.route('/', syncRoutes(deps));
  app.route('/', jobRoutes(deps));
  app.route('/', recordRoutes(deps));
  app.route('/', webhookRoutes(deps));
  app.route('/', tenancyRoutes(deps));
  app.route('/', oauthRoutes(deps, turns));
  registerDocs(app);

  app.notFound((c) => c.json(errorBody('not_found', 'no such route'), 404));
  app.onError((err, c) => {
    const response = errorResponse(c, err);
    if (response.status >= 500) c.get('log')?.error({ err, path: c.req.path }, 'request error');
    return response;
  });
  return app;
}
