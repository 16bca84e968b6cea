import type { MiddlewareHandler } from 'hono';
import { takeToken, type BucketLimits, type BucketState } from '../../policy/token-bucket';
import type { ApiEnv } from '../env';
import { errorBody } from '../errors';

/** Buckets kept per process; idle full ones are dropped beyond this many. */
const MAX_BUCKETS = 10_000;

/**
 * A token bucket per API key (the admin key is one key, each tenant key another), in this
 * process's memory: over the limit a request answers 429 with `Retry-After` (seconds) before any
 * handler runs, so one tenant's script cannot starve the API for the others. With several API
 * processes behind a balancer each keeps its own buckets (the limit scales with them): each
 * replica is configured with its share of the deployment's limit (docs/security.md). Not shared
 * through Postgres on purpose: that would cost a write per request.
 */
export function rateLimit(limits: BucketLimits, now: () => number = Date.now): MiddlewareHandler<ApiEnv> {
  const buckets = new Map<string, BucketState>();
  return async (c, next) => {
    const principal = c.get('principal');
    const id = principal.kind === 'admin' ? 'admin' : principal.keyId;
    const taken = takeToken(limits, buckets.get(id), now());
    buckets.delete(id);
    buckets.set(id, taken.state);
    if (buckets.size > MAX_BUCKETS) buckets.delete(buckets.keys().next().value!);
    if (!taken.allowed) {
      c.header('Retry-After', String(taken.retryAfterSeconds));
      return c.json(errorBody('rate_limited', `too many requests for this API key; retry in ${taken.retryAfterSeconds} s`), 429);
    }
    await next();
  };
}
