import type { MiddlewareHandler } from 'hono';
import type { Logger } from '../../lib/logger';
import type { ApiEnv } from '../env';

/**
 * Gives each request a child logger bound to its request id (from hono's requestId middleware)
 * and logs one line per request with method, path, status and duration. Headers and bodies are
 * never logged, so neither the API key nor credentials can reach a log line from here.
 */
export function requestLog(logger: Logger): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const started = performance.now();
    const log = logger.child({ request_id: c.get('requestId') });
    c.set('log', log);
    await next();
    const ms = Math.round((performance.now() - started) * 10) / 10;
    const line = { method: c.req.method, path: c.req.path, status: c.res.status, duration_ms: ms };
    if (c.res.status >= 500) log.error(line, 'request failed');
    else log.info(line, 'request');
  };
}
