import type { MiddlewareHandler } from 'hono';
import type { UnofficialStatusCode } from 'hono/utils/http-status';
import type { ApiEnv } from '../env';

/** The status logged for a request whose client went away before it ran (nginx's "client closed request"). */
export const CLIENT_GONE = 499 as UnofficialStatusCode;

/**
 * Receives a request's body whole before anything reads it, and keeps its bytes with the request
 * (hono caches them; every later read is of them): a check of what was sent sees the bytes
 * themselves (refuseUnstorable: UTF-8), not text a reader already decoded, and no turn or other
 * place (tenantTurns, after it) is held while a body arrives slowly or never ends. A request whose
 * client goes away before its body has arrived is not run: nobody reads an answer, and one is made
 * for the request log only.
 */
export const receiveBody: MiddlewareHandler<ApiEnv> = async (c, next) => {
  if (c.req.raw.body) {
    try {
      await c.req.arrayBuffer();
    } catch (err) {
      if (c.req.raw.signal.aborted) return c.body(null, CLIENT_GONE);
      throw err;
    }
  }
  return next();
};
