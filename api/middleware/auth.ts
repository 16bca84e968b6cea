import { createHash, timingSafeEqual } from 'node:crypto';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context, MiddlewareHandler } from 'hono';
import { addressBucket, clientAddress, type TrustedProxies } from '../../lib/client-address';
import { authenticateTenantKey, tenantKeyPrefix } from '../../commands/tenancy';
import type { CommandDeps } from '../../commands/deps';
import type { BucketLimits } from '../../policy/token-bucket';
import type { ApiEnv } from '../env';
import { errorBody } from '../errors';
import { Buckets } from './rate-limit';
import { KEY_SCOPE } from '../../policy/vocabulary';

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

/**
 * The bucket of the client a request comes from (`addressBucket`: an IPv6 client by its /64): the
 * TCP peer, or when that is a trusted proxy the client its X-Forwarded-For names (`clientAddress`).
 */
function clientBucket(c: Context, trusted: TrustedProxies): string {
  let socket: string | undefined;
  try {
    socket = getConnInfo(c).remote.address;
  } catch {
    socket = undefined;
  }
  return addressBucket(clientAddress(socket, c.req.header('x-forwarded-for'), trusted));
}

const rateLimited = (c: Context, retryAfterSeconds: number, message: string) => {
  c.header('Retry-After', String(retryAfterSeconds));
  return c.json(errorBody('rate_limited', `${message}; retry in ${retryAfterSeconds} s`), 429);
};

/** The limits `authenticate` applies, each a token bucket in this process's memory. */
export interface AuthLimits {
  /** Requests per API key (API_RATE_LIMIT_PER_SECOND, API_RATE_LIMIT_BURST): the admin key is one key, each tenant key another. */
  requests?: BucketLimits;
  /** Failed lookups per client address (API_AUTH_FAILURES_PER_MINUTE), shared with the OAuth callback's (`limitStateLookups`). */
  failures?: FailedLookups;
}

/**
 * The tenant-key lookups in flight per client address, each holding a token of the address's
 * failed-lookup bucket (given back when its key is found). A lookup that finds the bucket empty
 * while others of its address are in flight waits for one of them to end and tries again: their
 * tokens may yet come back, and the bucket counts failed lookups, not lookups at once, so a valid
 * key's burst (within its request bucket) is never refused for failures that did not happen. It
 * is refused only once no lookup of its address is in flight and the bucket is still empty: then
 * failed lookups spent it. Either way no more lookups than the bucket holds run at once.
 */
class AddressLookups {
  /** Per address: lookups in flight (never 0: the entry goes with the last) and the requests waiting for one to end. */
  private readonly inFlight = new Map<string, { lookups: number; waiting: (() => void)[] }>();

  constructor(private readonly failures: Buckets) {}

  /** Takes a token of `address` for a lookup about to be made: null once taken, else seconds until the bucket has one. */
  async take(address: string): Promise<number | null> {
    for (;;) {
      const failing = this.failures.take(address);
      const flight = this.inFlight.get(address);
      if (failing === null) {
        if (flight) flight.lookups += 1;
        else this.inFlight.set(address, { lookups: 1, waiting: [] });
        return null;
      }
      if (!flight) return failing;
      await new Promise<void>((resolve) => flight.waiting.push(resolve));
    }
  }

  /** Ends a lookup `take` allowed, giving its token back unless it failed (`giveBack` false: the token stays spent); wakes the lookups waiting. */
  end(address: string, giveBack: boolean): void {
    if (giveBack) this.failures.give(address);
    const flight = this.inFlight.get(address);
    if (!flight) return;
    flight.lookups -= 1;
    if (flight.lookups === 0) this.inFlight.delete(address);
    for (const wake of flight.waiting.splice(0)) wake();
  }
}

/**
 * The lookups made for a caller without a key of its own (a tenant key's, the OAuth callback's
 * state) limited per client address, as one bucket of failed lookups (`AddressLookups`): the TCP
 * peer, or behind a proxy of `trustedProxies` (TRUSTED_PROXIES) the client its X-Forwarded-For
 * names; an IPv6 client by its /64. One instance serves every route that looks something up for
 * such a caller, so an address cannot fail more lookups by spreading them over routes.
 */
export class FailedLookups {
  private readonly lookups: AddressLookups;

  constructor(limits: BucketLimits, private readonly trustedProxies: TrustedProxies = [], now: () => number = Date.now) {
    this.lookups = new AddressLookups(new Buckets(limits, now));
  }

  /** The bucket of the client `c` comes from. */
  address(c: Context): string {
    return clientBucket(c, this.trustedProxies);
  }

  /** Takes a token of `address` for a lookup about to be made: null once taken, else seconds until the bucket has one. */
  take(address: string): Promise<number | null> {
    return this.lookups.take(address);
  }

  /** Ends a lookup `take` allowed: its token comes back unless it failed (`giveBack` false). */
  end(address: string, giveBack: boolean): void {
    this.lookups.end(address, giveBack);
  }
}

/**
 * Requires `Authorization: Bearer <key>`: the admin key (compared as fixed-length digests with
 * `timingSafeEqual`, so neither its content nor its length leaks through timing) or a tenant's
 * unrevoked API key (found by its public prefix, its hash compared the same way). Sets the
 * `principal`. Missing or wrong → 401 before any handler runs, so nothing is created.
 *
 * Each key has a request bucket (`limits.requests`): over it, 429 with `Retry-After` before any
 * handler runs, so one tenant's script cannot starve the API for the others. A tenant key's
 * bucket is named by the key's public prefix and its token is taken *before* the key is looked
 * up: a key over its rate costs no database work however fast, or however many at once, its
 * requests are sent. The token is given back when no key is found, so a made-up token carrying
 * someone's prefix takes nothing from their bucket beyond its own lookup.
 *
 * Each lookup of a well-formed tenant key also takes a token from a bucket of the client's
 * address (`limits.failures`; the TCP peer, or behind a proxy of `limits.trustedProxies` the
 * client its X-Forwarded-For names; an IPv6 client by its /64), given back when the key is found: only failed lookups spend it,
 * and no more lookups than it holds are in flight at once (a lookup finding it empty while others
 * of its address are in flight waits for them: `AddressLookups`). Once failed lookups have emptied
 * it, a tenant key from that address is answered 429 before any lookup, so guessed keys cannot
 * turn into unbounded database work either, sent one after another or all at once. The admin key
 * needs no lookup and is never held back by it.
 */
export function authenticate(deps: Pick<CommandDeps, 'pool'>, adminApiKey: string, limits: AuthLimits = {}, now: () => number = Date.now): MiddlewareHandler<ApiEnv> {
  const expected = digest(adminApiKey);
  const requests = limits.requests && new Buckets(limits.requests, now);
  const lookups = limits.failures;
  const overRate = (c: Context, retryAfter: number) => rateLimited(c, retryAfter, 'too many requests for this API key');
  return async (c, next) => {
    const token = bearer(c);
    if (token === null) return unauthorized(c);
    if (timingSafeEqual(digest(token), expected)) {
      const wait = requests?.take('admin') ?? null;
      if (wait !== null) return overRate(c, wait);
      c.set('principal', { kind: 'admin' });
      return next();
    }
    const prefix = tenantKeyPrefix(token);
    if (prefix === null) return unauthorized(c);
    const bucket = `key:${prefix}`;
    // Both tokens are taken before the lookup, so requests in flight at once cannot all see the
    // same last token; each is given back once the lookup says it did not count (the request
    // token when no key was found, the address's when one was).
    const wait = requests?.take(bucket) ?? null;
    if (wait !== null) return overRate(c, wait);
    const address = lookups ? lookups.address(c) : '';
    const failing = lookups ? await lookups.take(address) : null;
    if (failing !== null) {
      requests?.give(bucket);
      return rateLimited(c, failing, 'too many failed API key lookups from this address');
    }
    let key: Awaited<ReturnType<typeof authenticateTenantKey>>;
    try {
      key = await authenticateTenantKey(deps, token);
    } catch (err) {
      // Not an answer about the key (the database is away): neither token counts.
      requests?.give(bucket);
      lookups?.end(address, true);
      throw err;
    }
    // Given back before the lookups waiting for it try again (a found key spent nothing).
    lookups?.end(address, key !== null);
    if (!key) {
      requests?.give(bucket);
      return unauthorized(c);
    }
    c.set('principal', { kind: 'tenant', tenantId: key.tenant_id, keyId: key.id, scopes: key.scopes });
    return next();
  };
}

/**
 * Holds the OAuth callback (the one route anyone may call that looks something up: its state) to
 * the failed-lookup limit of the client's address that tenant-key lookups spend (`failures`, the
 * same instance): a callback answered 400 (its state unknown, used or expired, or none given)
 * spends a token, one whose state was found gives it back. Once failed lookups have emptied the
 * bucket, 429 before any lookup, so made-up states cannot turn into unbounded database work.
 */
export function limitStateLookups(failures: FailedLookups | undefined): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    if (!failures) return next();
    const address = failures.address(c);
    const failing = await failures.take(address);
    if (failing !== null) return rateLimited(c, failing, 'too many failed OAuth state lookups from this address');
    // An error no answer was made of (not about the state) counts as found: it spends nothing.
    let failed = false;
    try {
      await next();
      failed = c.res.status === 400;
    } finally {
      failures.end(address, !failed);
    }
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

/**
 * Whether the caller may read what it changes: the admin key, or a tenant key with the `read`
 * scope. A key without it may change a resource but not read it, so a write route's answer to
 * such a key leaves out what only a read would show (ids, status and a secret it just made stay).
 */
export function mayRead(c: Context<ApiEnv>): boolean {
  const principal = c.get('principal');
  return principal.kind === 'admin' || principal.scopes.includes(KEY_SCOPE.read);
}

/**
 * A write route's answer: `full` to a caller that may read it, else `full` without the fields only
 * a read would show (`readOnly`).
 */
export function writeAnswer<T extends object, K extends keyof T>(c: Context<ApiEnv>, full: T, readOnly: readonly K[]): T | Omit<T, K> {
  if (mayRead(c)) return full;
  const answer: Partial<T> = { ...full };
  for (const key of readOnly) delete answer[key];
  return answer as Omit<T, K>;
}
