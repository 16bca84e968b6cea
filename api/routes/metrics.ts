import { Hono } from 'hono';
import type { Registry } from 'prom-client';

/** `GET /metrics` in the Prometheus text format. */
export function metricsRoutes(registry: Registry): Hono {
  const app = new Hono();
  app.get('/metrics', async (c) => {
    c.header('Content-Type', registry.contentType);
    return c.body(await registry.metrics());
  });
  return app;
}
