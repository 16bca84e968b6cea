import type { MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import type { Registry } from 'prom-client';
import { httpMetrics } from '../../lib/metrics';
import type { ApiEnv } from '../env';

/** Methods counted by name; any other is counted as `other`, so a client cannot add series. */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** The `route` label of a request that matched no route (404): one series, whatever the path. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * Counts every answer in `http_requests_total{method,route,status}` and observes its time in
 * `http_request_duration_seconds`. `route` is the template of the route the request matched
 * (`/connections/:id`), the same whether a route or a middleware before it (auth, rate limit,
 * tenant scope) answered; a path no route matches is `unmatched`.
 */
export function recordHttpMetrics(registry: Registry): MiddlewareHandler<ApiEnv> {
  const { requests, duration } = httpMetrics(registry);
  return async (c, next) => {
    const started = performance.now();
    await next();
    const seconds = (performance.now() - started) / 1000;
    // Middlewares are registered for every method ('ALL'); the route itself under its own.
    const route = [...matchedRoutes(c)].reverse().find((r) => r.method !== 'ALL')?.path ?? UNMATCHED_ROUTE;
    const labels = { method: KNOWN_METHODS.has(c.req.method) ? c.req.method : 'other', route, status: String(c.res.status) };
    requests.inc(labels);
    duration.observe(labels, seconds);
  };
}
