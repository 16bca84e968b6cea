import { Hono } from 'hono';
import { readinessProbe } from '../../infra/readiness';
import type { ApiDeps } from '../deps';

/**
 * `GET /healthz` (the process is up) and `GET /readyz` (Postgres and Temporal answer; the answer
 * is reused for a few seconds and concurrent probes share one check, so they cost no more; a 503
 * says when to look again in `Retry-After`).
 */
export function healthRoutes(deps: ApiDeps): Hono {
  const app = new Hono();
  const readiness = readinessProbe(deps);
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const { ready, checks, details } = await readiness();
    if (!ready) c.header('Retry-After', '5');
    return c.json({ status: ready ? 'ok' : 'unavailable', checks, ...(details && { details }) }, ready ? 200 : 503);
  });
  return app;
}
