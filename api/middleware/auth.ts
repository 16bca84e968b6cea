import { createHash, timingSafeEqual } from 'node:crypto';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context, MiddlewareHandler } from 'hono';
import { authenticateTenantKey, looksLikeTenantKey } from '../../commands/tenancy';
import type { CommandDeps } from '../../commands/deps';
import { takeToken, type BucketLimits, type BucketState } from '../../policy/token-bucket';
import type { ApiEnv } from '../env';
import { errorBody } from '../errors';

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/** The bearer token of a request, or null. */
function bearer(c: Context): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '');
  return match?.[1] ?? null;
}

const unauthorized = (c: Context) => {
  c.header('WWW-Authenticate', 'Bearer realm="synctide"');
  return c.json(errorBody('unauthorized', 'a valid API key is required: Authorization: Bearer <key>'), 401);
};

/** Client addresses whose failed lookups are remembered; the oldest are dropped beyond this many. */
const MAX_FAILURE_BUCKETS = 10_000;

/** The address of the client's TCP connection (the balancer's, behind one); `unknown` without a socket. */
function clientAddress(c: Context): string {
  try {
    return getConnInfo(c).remote.address ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * Requires `Authorization: Bearer <key>`: the admin key (compared as fixed-length digests with
 * `timingSafeEqual`, so neither its content nor its length leaks through timing) or a tenant's
 * unrevoked API key (found by its public prefix, its hash compared the same way). Sets the
 * `principal`. Missing or wrong → 401 before any handler runs, so nothing is created.
 *
 * Each failed lookup of a well-formed tenant key takes a token from a bucket of the client's
 * address (`failureLimit`: API_AUTH_FAILURES_PER_MINUTE, in this process's memory); once it is
 * empty, a tenant key from that address is answered 429 with `Retry-After` before any lookup, so
 * guessed keys cannot turn into unbounded database work. The admin key needs no lookup and is
 * never held back by it.
 */
export function authenticate(
  deps: Pick<CommandDeps, 'pool'>,
  adminApiKey: string,
  failureLimit?: BucketLimits,
  now: () => number = Date.now,
): MiddlewareHandler<ApiEnv> {
  const expected = digest(adminApiKey);
  const failures = new Map<string, BucketState>();
  return async (c, next) => {
    const token = bearer(c);
    if (token === null) return unauthorized(c);
    if (timingSafeEqual(digest(token), expected)) {
      c.set('principal', { kind: 'admin' });
      return next();
    }
    if (!looksLikeTenantKey(token)) return unauthorized(c);
    const address = failureLimit ? clientAddress(c) : '';
    if (failureLimit) {
      // Looked at, not taken: only a failed lookup spends a token.
      const peek = takeToken(failureLimit, failures.get(address), now());
      if (!peek.allowed) {
        c.header('Retry-After', String(peek.retryAfterSeconds));
        return c.json(errorBody('rate_limited', `too many failed API key lookups from this address; retry in ${peek.retryAfterSeconds} s`), 429);
      }
    }
    const key = await authenticateTenantKey(deps, token);
    if (!key) {
      if (failureLimit) {
        const taken = takeToken(failureLimit, failures.get(address), now());
        failures.delete(address);
        failures.set(address, taken.state);
        if (failures.size > MAX_FAILURE_BUCKETS) failures.delete(failures.keys().next().value!);
      }
      return unauthorized(c);
    }
    c.set('principal', { kind: 'tenant', tenantId: key.tenant_id, keyId: key.id, scopes: key.scopes });
    return next();
  };
}

/**
 * The tenant a listing or lookup must be limited to: a tenant key's own tenant whatever was asked
 * (the scope middleware already answered 404 to another tenant's id), or what the admin asked for.
 */
export function tenantFilter(c: Context<ApiEnv>, requested: string | undefined): string | undefined {
  const principal = c.get('principal');
  return principal.kind === 'tenant' ? principal.tenantId : requested;
}
