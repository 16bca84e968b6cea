import { Hono } from 'hono';
import { checkReadiness } from '../../commands/readiness';
import type { ApiDeps } from '../deps';

/** `GET /healthz` (the process is up) and `GET /readyz` (Postgres and Temporal answer). */
export function healthRoutes(deps: ApiDeps): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const { ready, checks, details } = await checkReadiness(deps);
    return c.json({ status: ready ? 'ok' : 'unavailable', checks, ...(details && { details }) }, ready ? 200 : 503);
  });
  return app;
}
