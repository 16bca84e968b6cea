import { OpenAPIHono } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import { except } from 'hono/combine';
import { requestId } from 'hono/request-id';
import type { ApiDeps } from './deps';
import type { ApiEnv } from './env';
import { describeIssues, errorBody, errorResponse } from './errors';
import { auditLog } from './middleware/audit';
import { authenticate } from './middleware/auth';
import { rateLimit } from './middleware/rate-limit';
import { tenantScope } from './middleware/tenant-scope';
import { requestLog } from './middleware/request-log';
import { connectionRoutes } from './routes/connections';
import { registerDocs } from './routes/docs';
import { healthRoutes } from './routes/health';
import { jobRoutes } from './routes/jobs';
import { recordRoutes } from './routes/records';
import { webhookRoutes } from './routes/webhooks';
import { metricsRoutes } from '../lib/http';
import { syncRoutes } from './routes/sync';
import { tenancyRoutes } from './routes/tenancy';

/** Largest request body the API reads: 1 MiB. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** Routes anyone may call: probes, docs and (with METRICS_PUBLIC) metrics. */
const OPEN_PATHS = new Set(['/healthz', '/readyz', '/openapi.json', '/docs']);

/**
 * Builds the Hono application: request id and log → body limit → auth (admin or tenant key) →
 * per-key rate limit → audit (refusals of the scope included) → tenant scope → routes grouped by
 * resource. Every error is JSON `{error: {code, message}}`: 400 for schema violations, 401, 403,
 * 404, 409, 413 over 1 MiB, 429, 502/504 when an immediate sync's provider failed or its deadline passed, 503 when Postgres or
 * Temporal is unreachable, 500 otherwise (never a stack, statement or internal detail).
 */
export function createApp(deps: ApiDeps): OpenAPIHono<ApiEnv> {
  const app = new OpenAPIHono<ApiEnv>({
    defaultHook: (result, c) => {
      if (result.success) return;
      return c.json(errorBody('invalid_request', describeIssues(result.error.issues)), 400);
    },
  });
  app.use(requestId());
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
  const guarded = [authenticate(deps, deps.adminApiKey), ...(deps.rateLimit ? [rateLimit(deps.rateLimit)] : []), auditLog(deps), tenantScope(deps)];
  app.use(except((c) => OPEN_PATHS.has(c.req.path) || (c.req.path === '/metrics' && deps.metricsPublic === true), ...guarded));

  app.route('/', healthRoutes(deps));
  app.route('/', metricsRoutes(deps.registry, deps.extraMetrics));
  app.route('/', connectionRoutes(deps));
  app.route('/', syncRoutes(deps));
  app.route('/', jobRoutes(deps));
  app.route('/', recordRoutes(deps));
  app.route('/', webhookRoutes(deps));
  app.route('/', tenancyRoutes(deps));
  registerDocs(app);

  app.notFound((c) => c.json(errorBody('not_found', 'no such route'), 404));
  app.onError((err, c) => {
    const response = errorResponse(c, err);
    if (response.status >= 500) c.get('log')?.error({ err, path: c.req.path }, 'request error');
    return response;
  });
  return app;
}
