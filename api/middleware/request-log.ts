import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { Logger } from '../../lib/logger';
import type { ApiEnv } from '../env';

/** What a client's own request id may look like to be logged beside ours (no spaces, no quotes). */
const CLIENT_REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Gives every request an id generated here (a UUID), answered in `X-Request-Id`. A client's own
 * `X-Request-Id` never becomes the request id (it could collide with or impersonate another
 * request's in the logs): it is only logged, as `client_request_id`, when it has a plain shape.
 */
export function serverRequestId(): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const id = randomUUID();
    c.set('requestId', id);
    c.header('X-Request-Id', id);
    await next();
  };
}

/**
 * Gives each request a child logger bound to its request id (from serverRequestId) and logs one
 * line per request with method, path, status and duration. Headers and bodies are never logged
 * (only a client's own request id of a plain shape), so neither the API key nor credentials can
 * reach a log line from here.
 */
export function requestLog(logger: Logger): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const started = performance.now();
    const clientId = c.req.header('x-request-id');
    const log = logger.child({
      request_id: c.get('requestId'),
      ...(clientId !== undefined && CLIENT_REQUEST_ID.test(clientId) && { client_request_id: clientId }),
    });
    c.set('log', log);
    await next();
    const ms = Math.round((performance.now() - started) * 10) / 10;
    const line = { method: c.req.method, path: c.req.path, status: c.res.status, duration_ms: ms };
    if (c.res.status >= 500) log.error(line, 'request failed');
    else log.info(line, 'request');
  };
}
