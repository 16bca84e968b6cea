import { Hono } from 'hono';
import { readinessProbe } from '../../infra/readiness';
import type { ApiDeps } from '../deps';

/**
 * `GET /healthz` (the process is up) and `GET /readyz` (Postgres and Temporal answer; the answer
 * is reused for a few seconds and concurrent probes share one check, so they cost no more; a 503
 * says when to look again in `Retry-After`). From the start of the process's shutdown, `/readyz`
 * answers 503 with `reason: "stopping"` whatever its checks say, so a probe answered during the
 * drain takes the process out of its balancer.
 */
export function healthRoutes(deps: ApiDeps): Hono {
  const app = new Hono();
  const readiness = readinessProbe(deps);
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const { ready, checks, details } = await readiness();
    // Read once the checks answered: a shutdown that began while they ran counts.
    const stopping = deps.stopping?.() === true;
    const serving = ready && !stopping;
    if (!serving) c.header('Retry-After', '5');
    return c.json({ status: serving ? 'ok' : 'unavailable', ...(stopping && { reason: 'stopping' as const }), checks, ...(details && { details }) }, serving ? 200 : 503);
  });
  return app;
}
