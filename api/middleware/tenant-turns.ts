import type { MiddlewareHandler } from 'hono';
import type { HeldTurn } from '../../commands/turns';
import type { TenantTurns } from '../../lib/tenant-turns';
import type { ApiEnv } from '../env';
import { CLIENT_GONE } from './receive-body';

/**
 * Holds tenant keys' requests (a request holds one pooled connection at a time; the per-key rate
 * limit bounds how many wait) to their turns (`turns`, the process's TenantTurns at its pool, which
 * the OAuth callback takes its flow's tenant's turns of too: `callbackTurn`). The admin key is not held. A request's body has been
 * received whole before (receiveBody): a client sending its body slowly (or not at all) holds no
 * place meanwhile, so it cannot take the turns other tenants' requests wait for. A request whose
 * client goes away before its turn comes leaves the queue and never runs: nothing it asked for is
 * done once nobody waits for the answer (a client that gave up may send it again), and the
 * tenant's later requests do not wait behind it. A wait of the request that holds no connection
 * (an immediate sync's wait on its workflow, up to IMMEDIATE_SYNC_TIMEOUT_SECONDS) runs through
 * `outsideTurn` (`holdTurn`): the turn is given up for it and taken again after it, so no request,
 * of its tenant or another, waits behind such a wait.
 */
export function tenantTurns(turns: TenantTurns): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const principal = c.get('principal');
    if (principal.kind !== 'tenant') return next();
    const gone = c.req.raw.signal;
    let turn: HeldTurn;
    try {
      turn = await holdTurn(turns, principal.tenantId, gone);
    } catch (err) {
      // Nobody reads an answer: one is made for the request log only.
      if (gone.aborted) return c.body(null, CLIENT_GONE);
      throw err;
    }
    c.set('outsideTurn', turn.outsideTurn);
    try {
      await next();
    } finally {
      turn.end();
    }
  };
}

/**
 * `tenantId`'s turn from `turns`, once it came (a `gone` signal aborted before it came leaves the
 * queue: the wait rejects with the signal's reason), as a request holds it: `end` gives it up (the
 * first call; later ones do nothing), and `outsideTurn` gives it up for a wait that holds no
 * database connection and takes one again after the wait, whether or not the client is still
 * there (what follows the wait runs either way). A turn ended during such a wait is given up again
 * as soon as it is taken.
 */
export async function holdTurn(turns: TenantTurns, tenantId: string, gone?: AbortSignal): Promise<HeldTurn> {
  let done = await turns.take(tenantId, gone);
  let held = true;
  let ended = false;
  return {
    outsideTurn: async (wait) => {
      if (!held) return wait();
      held = false;
      done();
      try {
        return await wait();
      } finally {
        const again = await turns.take(tenantId);
        if (ended) again();
        else {
          done = again;
          held = true;
        }
      }
    },
    end: () => {
      if (ended) return;
      ended = true;
      if (held) {
        held = false;
        done();
      }
    },
  };
}

/**
 * The turn of an OAuth callback, which no API key names the tenant of: taken for its flow's tenant
 * once its state is found (completeAuthorization), from the same `turns` as that tenant's keyed
 * requests, so a tenant's many connect flows hold no more of the pool than its share. A client
 * that goes away before the turn comes leaves the queue (the wait rejects with the signal's
 * reason). Its code exchange, a request to the provider holding no connection, runs through the
 * turn's `outsideTurn`.
 */
export function callbackTurn(turns: TenantTurns, gone: AbortSignal): (tenantId: string) => Promise<HeldTurn> {
  return (tenantId) => holdTurn(turns, tenantId, gone);
}
