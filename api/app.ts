import { Hono } from 'hono';
import type { ApiDeps } from './deps';
import { healthRoutes } from './routes/health';
import { metricsRoutes } from './routes/metrics';

/** Builds the Hono application; routes are grouped by resource. */
export function createApp(deps: ApiDeps): Hono {
  const app = new Hono();
  app.route('/', healthRoutes(deps));
  app.route('/', metricsRoutes(deps.registry));
  app.notFound((c) => c.json({ error: { code: 'not_found', message: 'no such route' } }, 404));
  app.onError((err, c) => {
    deps.logger.error({ err, path: c.req.path }, 'unhandled API error');
    return c.json({ error: { code: 'internal', message: 'internal error' } }, 500);
  });
  return app;
}
