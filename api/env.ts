import type { RequestIdVariables } from 'hono/request-id';
import type { WaitOutsideTurn } from '../commands/turns';
import type { Logger } from '../lib/logger';

/** Who is calling: the admin key (every tenant), or a tenant's key (that tenant only). */
export type Principal =
  | { kind: 'admin' }
  | { kind: 'tenant'; tenantId: string; keyId: string; scopes: string[] };

/**
 * Hono environment of the Synctide API: per-request id, logger, the authenticated caller, the
 * other tenant a tenant key's refused call aimed at (set by the tenant scope, for the audit log),
 * the id of what a route's answer names (set by the route, so the audit log need not re-read the
 * answer), and for a tenant key's request how a wait holding no database connection gives up its
 * turn at the pool meanwhile (set by the tenant turns).
 */
export type ApiEnv = {
  Variables: RequestIdVariables & { log: Logger; principal: Principal; targetTenant?: string; auditTargetId?: string; outsideTurn?: WaitOutsideTurn };
};
