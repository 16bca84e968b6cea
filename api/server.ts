import { serve, type ServerType } from '@hono/node-server';

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
