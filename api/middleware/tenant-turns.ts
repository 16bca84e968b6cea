import type { MiddlewareHandler } from 'hono';
import { TenantTurns } from '../../lib/tenant-turns';
import type { ApiEnv } from '../env';

/**
 * Holds tenant keys' requests (a request holds one pooled connection at a time; the per-key rate
 * limit bounds how many wait) to their turns (TenantTurns) at a pool of `places` connections, at
 * most `perTenant` of one tenant's at once. The admin key is not held. A request's body is
 * received whole before it waits for its turn: a client sending its body slowly (or not at all)
 * holds no place meanwhile, so it cannot take the turns other tenants' requests wait for.
 */
export function tenantTurns(places: number, perTenant: number): MiddlewareHandler<ApiEnv> {
  const turns = new TenantTurns(places, perTenant);
  return async (c, next) => {
    const principal = c.get('principal');
    if (principal.kind !== 'tenant') return next();
    // Kept by the request (hono caches it): the scope check and the route read it from there.
    if (c.req.raw.body) await c.req.arrayBuffer();
    const done = await turns.take(principal.tenantId);
    try {
      await next();
    } finally {
      done();
    }
  };
}
