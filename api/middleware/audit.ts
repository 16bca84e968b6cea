import type { Context, MiddlewareHandler } from 'hono';
import type { CommandDeps } from '../../commands/deps';
import { ownerOf, recordAudit } from '../../commands/tenancy';
import type { ApiEnv } from '../env';
import { unstorableIn } from '../../policy/storable-text';
import { MAX_TENANT_ID_CHARS } from '../schemas/common';
import { jsonObjectBody, pathResource, safeDecode } from './tenant-scope';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A tenant id a request named, as its audit entry keeps it: null for text no tenant can have
 * (longer than any route takes, or holding what Postgres cannot store), which would fail the
 * entry's write (an index entry holds a few KiB; text holds no NUL) and leave the call unaudited.
 */
const recordedTenant = (value: string | null | undefined): string | null =>
  value && value.length <= MAX_TENANT_ID_CHARS && unstorableIn(value) === null ? value : null;

/** The path of a request as its audit entry keeps it: as the router read it, or as it was sent when that holds a NUL (`%00`). */
const recordedPath = (c: Context<ApiEnv>): string => (unstorableIn(c.req.path) ? new URL(c.req.url).pathname : c.req.path);

/**
 * Writes one `audit_log` row per mutating call (every method but GET, HEAD, OPTIONS) that passed
 * authentication and the rate limit and ran (not one dropped before its turn, its client gone), a call the tenant scope then refuses (403, 404) included: who (admin, or the tenant key's id), what (method and path), the target's id
 * and tenant, when, and the answer's status. A tenant key's call refused because it named another
 * tenant's resource or tenant_id also records that tenant (`target_tenant_id`), so the tenant it
 * aimed at sees the attempt in its own audit log. Bodies are never recorded, so no secret is. A
 * tenant id no tenant can have is recorded as null (`recordedTenant`), so no request's text fails
 * its entry's write; a write that fails anyway is logged and does not change the answer.
 */
export function auditLog(deps: Pick<CommandDeps, 'pool'>): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    if (['GET', 'HEAD', 'OPTIONS'].includes(c.req.method)) return next();
    const principal = c.get('principal');
    const target = pathResource(c.req.path);
    const tenantPath = /^\/tenants\/([^/]+)/.exec(c.req.path)?.[1];
    // Looked up before the call: a DELETE may remove the target.
    let tenantId: string | null = principal.kind === 'tenant' ? principal.tenantId : null;
    if (!tenantId && tenantPath) tenantId = safeDecode(tenantPath);
    if (!tenantId && target) tenantId = await ownerOf(deps, target.kind, target.id).catch(() => null);
    if (!tenantId) {
      const body = await jsonObjectBody(c);
      if (typeof body?.tenant_id === 'string') tenantId = body.tenant_id;
      else if (typeof body?.pairId === 'string' && UUID.test(body.pairId)) tenantId = await ownerOf(deps, 'connection', body.pairId).catch(() => null);
    }
    await next();
    let targetId = target?.id ?? /\/api-keys\/([0-9a-f-]{36})$/i.exec(c.req.path)?.[1] ?? null;
    // The id the route said its answer names (POST /sync), else the answer's `id` or `job_id`.
    if (!targetId && c.res.status < 300) targetId = c.get('auditTargetId') ?? null;
    if (!targetId && c.res.status < 300 && c.res.headers.get('content-type')?.includes('json')) {
      const answer = (await c.res.clone().json().catch(() => null)) as { id?: unknown; job_id?: unknown } | null;
      const id = answer?.id ?? answer?.job_id;
      if (typeof id === 'string') targetId = id;
    }
    await recordAudit(deps, {
      actor: principal.kind === 'admin' ? 'admin' : `key:${principal.keyId}`,
      api_key_id: principal.kind === 'admin' ? null : principal.keyId,
      tenant_id: recordedTenant(tenantId),
      method: c.req.method,
      path: recordedPath(c),
      target_id: targetId,
      target_tenant_id: c.res.status === 404 ? recordedTenant(c.get('targetTenant')) : null,
      status: c.res.status,
    }).catch((err: unknown) => c.get('log').warn({ err, path: c.req.path }, 'audit log write failed'));
  };
}
