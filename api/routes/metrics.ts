import { Hono } from 'hono';
import type { Registry } from 'prom-client';

/** More Prometheus text to serve after the registry's own (e.g. the Temporal SDK's metrics). */
export type ExtraMetrics = () => Promise<string>;

/**
 * `GET /metrics` in the Prometheus text format: the registry's metrics, followed by the text of
 * `extra` when given. A failing `extra` is left out rather than failing the scrape.
 */
export function metricsRoutes(registry: Registry, extra?: ExtraMetrics): Hono {
  const app = new Hono();
  app.get('/metrics', async (c) => {
    const [own, more] = await Promise.all([registry.metrics(), extra ? extra().catch(() => '') : '']);
    c.header('Content-Type', registry.contentType);
    return c.body(joinExpositions(own, more));
  });
  return app;
}

/** Two expositions as one: each metric family stays on whole lines. */
function joinExpositions(first: string, second: string): string {
  if (!second) return first;
  return first.endsWith('\n') || first === '' ? first + second : `${first}\n${second}`;
}
