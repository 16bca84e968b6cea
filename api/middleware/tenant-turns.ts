import type { MiddlewareHandler } from 'hono';
import type { ApiEnv } from '../env';

/**
 * Holds a tenant key's requests in flight in this API process to `max` at once (the admin key is
 * not held): one more waits, in the order it came and holding no database connection, until one
 * of its tenant's ends. A burst is thus delayed, never refused (the per-key rate limit bounds how
 * many wait), and one tenant's slow requests (a feed scan, a wait on a row lock) cannot take every
 * pooled connection while another tenant's request queues behind them.
 */
export function tenantTurns(max: number): MiddlewareHandler<ApiEnv> {
  /** Per tenant with a request in flight: how many, and the requests waiting for one to end. */
  const tenants = new Map<string, { running: number; waiting: (() => void)[] }>();
  return async (c, next) => {
    const principal = c.get('principal');
    if (principal.kind !== 'tenant') return next();
    let turns = tenants.get(principal.tenantId);
    if (!turns) {
      turns = { running: 0, waiting: [] };
      tenants.set(principal.tenantId, turns);
    }
    // A request that finds its tenant's places taken waits for one ended request to hand its place on.
    if (turns.running >= max) await new Promise<void>((resolve) => turns.waiting.push(resolve));
    else turns.running += 1;
    try {
      await next();
    } finally {
      const wake = turns.waiting.shift();
      if (wake) wake();
      else if (--turns.running === 0) tenants.delete(principal.tenantId);
    }
  };
}
