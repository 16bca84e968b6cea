import type { Context, MiddlewareHandler } from 'hono';
import type { CommandDeps } from '../../commands/deps';
import { ownerOf, type OwnedKind } from '../../commands/tenancy';
import { KEY_SCOPE } from '../../policy/vocabulary';
import type { ApiEnv } from '../env';
import { errorBody } from '../errors';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Paths only the admin key may call: they span tenants or manage keys. */
const ADMIN_ONLY = /^\/(tenants(\/|$)|audit$|metrics$)/;

/** True for a path only the admin key may call (also how the OpenAPI document marks its operations). */
export const isAdminOnlyPath = (path: string): boolean => ADMIN_ONLY.test(path);

/** The resource a path names by id: `/connections/{id}...`, `/jobs/{id}...`, `/webhooks/{id}...`, `/purges/{id}`. */
const PATH_RESOURCES: [RegExp, OwnedKind][] = [
  [/^\/connections\/([^/]+)/, 'connection'],
  [/^\/jobs\/([^/]+)/, 'job'],
  [/^\/webhooks\/([^/]+)/, 'webhook'],
  [/^\/purges\/([^/]+)/, 'purge'],
  [/^\/oauth-apps\/([^/]+)/, 'oauth_app'],
];

/** Body and query fields that name a connection by id (and, in a body, `credentials.grant_from_connection`). */
const CONNECTION_FIELDS = ['connection_id', 'pairId', 'connectorId'];

/** The resource `path` names by id, when it names one by a UUID. */
export function pathResource(path: string): { kind: OwnedKind; id: string } | null {
  for (const [pattern, kind] of PATH_RESOURCES) {
    const raw = pattern.exec(path)?.[1];
    // Decoded as the router decodes a path parameter, so an escaped id is checked as the route sees it.
    const id = raw === undefined ? undefined : safeDecode(raw);
    if (id && UUID.test(id)) return { kind, id };
  }
  return null;
}

/** A path segment percent-decoded, or as it came when its escapes are not valid UTF-8. */
export function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** The JSON body of a request as an object, or null (not JSON, or not an object: the route answers 400). */
export async function jsonObjectBody(c: Context): Promise<Record<string, unknown> | null> {
  if (!/^application\/([\w.-]+\+)?json/i.test(c.req.header('content-type') ?? '')) return null;
  try {
    const body: unknown = await c.req.json();
    return body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : null;
  } catch (err) {
    // Not JSON: the route's validator answers 400. Anything else (a body over the limit) goes on up.
    if (err instanceof SyntaxError) return null;
    throw err;
  }
}

/**
 * Keeps a tenant key inside its tenant, before any route runs: a path, query or body naming
 * another tenant, or another tenant's connection, job, webhook or purge, answers 404 exactly as a
 * missing one does (no existence leak), so nothing is read or changed. Admin-only paths answer
 * 403; a key without the `write` scope may only read. The admin key passes untouched.
 */
export function tenantScope(deps: Pick<CommandDeps, 'pool'>): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const principal = c.get('principal');
    if (principal.kind === 'admin') return next();
    const forbidden = (message: string) => c.json(errorBody('forbidden', message), 403);
    const hidden = () => c.json(errorBody('not_found', 'no such resource'), 404);
    if (ADMIN_ONLY.test(c.req.path)) return forbidden('this route needs the admin key');
    const reading = c.req.method === 'GET' || c.req.method === 'HEAD';
    const needed = reading ? KEY_SCOPE.read : KEY_SCOPE.write;
    if (!principal.scopes.includes(needed)) return forbidden(`this key lacks the ${needed} scope`);

    // The other tenant a refused call aimed at is kept for the audit log, so that tenant sees it.
    const aimedAt = (tenant: unknown) => {
      if (typeof tenant === 'string') c.set('targetTenant', tenant);
      return hidden();
    };
    const owns = async (kind: OwnedKind, id: unknown) => {
      if (typeof id !== 'string' || !UUID.test(id)) return true;
      const owner = await ownerOf(deps, kind, id);
      if (owner !== null && owner !== principal.tenantId) c.set('targetTenant', owner);
      return owner === principal.tenantId;
    };
    const named = pathResource(c.req.path);
    if (named && !(await owns(named.kind, named.id))) return hidden();

    const query = c.req.query();
    if (query.tenant_id !== undefined && query.tenant_id !== principal.tenantId) return aimedAt(query.tenant_id);
    for (const field of CONNECTION_FIELDS) if (!(await owns('connection', query[field]))) return hidden();

    if (!reading) {
      const body = await jsonObjectBody(c);
      if (body) {
        if (body.tenant_id !== undefined && body.tenant_id !== principal.tenantId) return aimedAt(body.tenant_id);
        for (const field of CONNECTION_FIELDS) if (!(await owns('connection', body[field]))) return hidden();
        if (!(await owns('oauth_app', body.oauth_app_id))) return hidden();
        // The source of a shared OAuth 2 grant names a connection too, inside the credentials.
        const credentials = body.credentials && typeof body.credentials === 'object' ? (body.credentials as Record<string, unknown>) : null;
        if (!(await owns('connection', credentials?.grant_from_connection))) return hidden();
      }
    }
    return next();
  };
}
