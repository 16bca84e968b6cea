import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Registry } from 'prom-client';

/** A listening HTTP server. */
export interface HttpServer {
  url: string;
  /**
   * Stops accepting connections, closes idle ones, and resolves once every request in flight has
   * had its answer; connections still open `graceMs` (default HTTP_CLOSE_GRACE_MS) later are cut,
   * so it never waits longer on a hanging request.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * How long requests in flight may take to answer once a server closes (a shutdown step). Within
 * the 10 s Docker gives a container between SIGTERM and SIGKILL by default, with room for the
 * steps after it.
 */
export const HTTP_CLOSE_GRACE_MS = 5_000;

/** Serves a Hono app on host:port and resolves once it listens. */
export function listen(app: { fetch: (request: Request) => Response | Promise<Response> }, host: string, port: number): Promise<HttpServer> {
  return new Promise((resolve, reject) => {
    let closing = false;
    const answering = new Set<ServerResponse>();
    // Without a `createServer` option the server is node:http's.
    const server = serve({ fetch: app.fetch, hostname: host, port }, (info) => {
      const shownHost = host === '0.0.0.0' ? '127.0.0.1' : host;
      const close = (graceMs = HTTP_CLOSE_GRACE_MS) => {
        closing = true;
        return closeGracefully(server, answering, graceMs);
      };
      resolve({ url: `http://${shownHost}:${info.port}`, close });
    }) as Server;
    server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
      // A request that arrives on an open connection while the server closes is that connection's last.
      if (closing) return lastOnItsConnection(server, res);
      answering.add(res);
      res.once('close', () => answering.delete(res));
    });
    server.once('error', reject);
  });
}

/**
 * Closes `server`: no new connection, idle ones closed at once, and each request in flight
 * (`answering`) gets its answer before its connection closes; whatever is still open `graceMs`
 * later is cut.
 */
function closeGracefully(server: Server, answering: ReadonlySet<ServerResponse>, graceMs: number): Promise<void> {
  return new Promise<void>((done) => {
    const cut = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearTimeout(cut);
      done();
    });
    for (const res of answering) lastOnItsConnection(server, res);
    // Keep-alive connections between requests: nothing to answer there.
    server.closeIdleConnections();
  });
}

/** The connection of `res` closes once `res` is answered, rather than wait for another request. */
function lastOnItsConnection(server: Server, res: ServerResponse): void {
  // Not answered yet: it answers with `Connection: close` and Node closes the connection after it.
  if (!res.headersSent) res.shouldKeepAlive = false;
  // Answering already (kept alive): the connection is idle once the answer is out.
  else if (!res.writableFinished) res.once('finish', () => server.closeIdleConnections());
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
