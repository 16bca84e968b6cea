// The API as a process serves it (`npm run api`, `npm start`): listening, and the API's part of the
// process's shutdown, one rule for both.
import { cancelCheckedOut, type Pool } from '../db/pool';
import { BackgroundStarts } from '../lib/background-starts';
import { listen, type HttpServer } from '../lib/http';
import type { Logger } from '../lib/logger';
import type { Shutdown } from '../lib/shutdown';

/** What the API's shutdown reaches in its process: the API's pool, the logger, the shutdown. */
export interface ApiProcess {
  pool: Pool;
  logger: Logger;
  shutdown: Shutdown;
}

/** Where the API listens, and its shutdown grace (API_SHUTDOWN_GRACE_SECONDS). */
export interface ApiServing {
  host: string;
  port: number;
  graceSeconds: number;
}

/** The app served: anything answering a fetch Request (the API's Hono app). */
type App = Parameters<typeof listen>[0];

/**
 * The end of a shutdown grace of `graceMs` kept for cancelling the statements still running (and
 * the exit): a second, or half the grace when that is shorter.
 */
function lastStepsMs(graceMs: number): number {
  return Math.min(1000, graceMs / 2);
}

/**
 * Serves the app `build` makes (given the process's background workflow starts, and whether its
 * shutdown has begun: the app's `/readyz` then answers 503 `stopping`) on host:port, logs
 * `api listening`, and registers the API's shutdown. From the start of the shutdown (the signal),
 * the server takes no new connection (a balancer's or kubelet's probe is refused: not ready; the
 * wait for endpoints to drop a terminating process comes before its signal, as the Helm chart's
 * preStop, not inside the grace), every connection still served answers `/readyz` with 503, and
 * requests in flight get what is left of the grace, less
 * its last steps (lastStepsMs), to answer; background workflow starts drain within the same time
 * (a start left unfinished is the reconcile tick's to make); then the statements of `pool`'s
 * connections still checked out are cancelled on the server and those connections closed, so
 * closing the pool does not wait for them (a statement may run up to
 * API_STATEMENT_TIMEOUT_SECONDS). Each write is one transaction, so a request cut this way changed
 * nothing. These steps run before any step registered earlier (the pool itself, a worker beside
 * the API in `npm start`), which stop after them.
 */
export async function serveApi(
  proc: ApiProcess,
  serving: ApiServing,
  build: (background: BackgroundStarts, stopping: () => boolean) => App,
): Promise<HttpServer> {
  const { pool, logger, shutdown } = proc;
  const graceMs = serving.graceSeconds * 1000;
  const answerMs = graceMs - lastStepsMs(graceMs);
  // Steps stop in reverse order: the server, the background starts, then the statements.
  shutdown.add('database-statements', async () => {
    const cancelled = await cancelCheckedOut(pool, Math.max(100, shutdown.remainingMs(graceMs)));
    if (cancelled > 0) logger.warn({ event: 'shutdown', connections: cancelled }, 'grace over: statements still running cancelled');
  });
  const background = new BackgroundStarts((err, what) => logger.warn({ err, what }, 'background workflow start failed; the reconcile tick adopts its job or connection'));
  shutdown.add('background-starts', () => background.drain(shutdown.remainingMs(answerMs)));
  const server = await listen(build(background, () => shutdown.stopping), serving.host, serving.port);
  shutdown.add('http', () => server.close(shutdown.remainingMs(answerMs)));
  logger.info({ url: server.url }, 'api listening');
  return server;
}
