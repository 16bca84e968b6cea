import { createHash, timingSafeEqual } from 'node:crypto';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import type { Registry } from 'prom-client';

/** A listening HTTP server. */
export interface HttpServer {
  url: string;
  close(): Promise<void>;
}

/** Serves a Hono app on host:port and resolves once it listens. */
export function listen(app: { fetch: (request: Request) => Response | Promise<Response> }, host: string, port: number): Promise<HttpServer> {
  return new Promise((resolve, reject) => {
    let server: ServerType | undefined = undefined;
    server = serve({ fetch: app.fetch, hostname: host, port }, (info) => {
      const shownHost = host === '0.0.0.0' ? '127.0.0.1' : host;
      resolve({
        url: `http://${shownHost}:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            if ('closeAllConnections' in server!) (server as { closeAllConnections(): void }).closeAllConnections();
            server!.close(() => done());
          }),
      });
    });
    server.once('error', reject);
  });
}

/** More Prometheus text to serve after the registry's own (e.g. the Temporal SDK's metrics). */
export type ExtraMetrics = () => Promise<string>;

/**
 * `GET /metrics` in the Prometheus text format: the registry's metrics, followed by the text of
 * `extra` when given. A failing `extra` is left out rather than failing the scrape. With
 * `bearerKey`, a scrape must send `Authorization: Bearer <bearerKey>` (compared in constant time).
 */
export function metricsRoutes(registry: Registry, extra?: ExtraMetrics, bearerKey?: string): Hono {
  const app = new Hono();
  const expected = bearerKey === undefined ? null : createHash('sha256').update(bearerKey).digest();
  app.get('/metrics', async (c) => {
    if (expected) {
      const given = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1] ?? '';
      if (!timingSafeEqual(createHash('sha256').update(given).digest(), expected)) {
        c.header('WWW-Authenticate', 'Bearer realm="synctide"');
        return c.json({ error: { code: 'unauthorized', message: 'the admin API key is required: Authorization: Bearer <key>' } }, 401);
      }
    }
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
