import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { authenticateTenantKey } from '../../commands/tenancy';
import type { CommandDeps } from '../../commands/deps';
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

/**
 * Requires `Authorization: Bearer <key>`: the admin key (compared as fixed-length digests with
 * `timingSafeEqual`, so neither its content nor its length leaks through timing) or a tenant's
 * unrevoked API key (found by its public prefix, its hash compared the same way). Sets the
 * `principal`. Missing or wrong → 401 before any handler runs, so nothing is created.
 */
export function authenticate(deps: Pick<CommandDeps, 'pool'>, adminApiKey: string): MiddlewareHandler<ApiEnv> {
  const expected = digest(adminApiKey);
  return async (c, next) => {
    const token = bearer(c);
    if (token === null) return unauthorized(c);
    if (timingSafeEqual(digest(token), expected)) {
      c.set('principal', { kind: 'admin' });
      return next();
    }
    const key = await authenticateTenantKey(deps, token);
    if (!key) return unauthorized(c);
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
