import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { errorBody } from '../errors';

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/**
 * Requires `Authorization: Bearer <adminApiKey>`. Both sides are hashed to fixed-length digests
 * before `timingSafeEqual`, so neither the key's content nor its length leaks through timing.
 * Missing or wrong → 401 before any handler runs, so nothing is created.
 */
export function requireAdminKey(adminApiKey: string): MiddlewareHandler {
  const expected = digest(adminApiKey);
  return async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const given = digest(match?.[1] ?? '');
    if (!match || !timingSafeEqual(given, expected)) {
      c.header('WWW-Authenticate', 'Bearer realm="synctide"');
      return c.json(errorBody('unauthorized', 'a valid admin API key is required: Authorization: Bearer <key>'), 401);
    }
    await next();
  };
}
