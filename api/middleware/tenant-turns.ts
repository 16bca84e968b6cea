import type { MiddlewareHandler } from 'hono';
import { TenantTurns } from '../../lib/tenant-turns';
import type { ApiEnv } from '../env';
import { CLIENT_GONE } from './receive-body';

/**
 * Holds tenant keys' requests (a request holds one pooled connection at a time; the per-key rate
 * limit bounds how many wait) to their turns (TenantTurns) at a pool of `places` connections, at
 * most `perTenant` of one tenant's at once. The admin key is not held. A request's body has been
 * received whole before (receiveBody): a client sending its body slowly (or not at all) holds no
 * place meanwhile, so it cannot take the turns other tenants' requests wait for. A request whose
 * client goes away before its turn comes leaves the queue and never runs: nothing it asked for is
 * done once nobody waits for the answer (a client that gave up may send it again), and the
 * tenant's later requests do not wait behind it.
 */
export function tenantTurns(places: number, perTenant: number): MiddlewareHandler<ApiEnv> {
  const turns = new TenantTurns(places, perTenant);
  return async (c, next) => {
    const principal = c.get('principal');
    if (principal.kind !== 'tenant') return next();
    const gone = c.req.raw.signal;
    let done: () => void;
    try {
      done = await turns.take(principal.tenantId, gone);
    } catch (err) {
      // Nobody reads an answer: one is made for the request log only.
      if (gone.aborted) return c.body(null, CLIENT_GONE);
      throw err;
    }
    try {
      await next();
    } finally {
      done();
    }
  };
}
