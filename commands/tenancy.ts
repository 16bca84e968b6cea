// Who may see what: API keys (the admin's and tenants'), ownership of resources, the audit log.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import * as apiKeys from '../db/models/api-keys';
import type { ApiKeyRow } from '../db/models/api-keys';
import * as audit from '../db/models/audit';
import type { AuditRow } from '../db/models/audit';
import * as owners from '../db/models/owners';
import { KEY_SCOPES, type KeyScope } from '../policy/vocabulary';
import type { CommandDeps } from './deps';
import { notFound } from './errors';

export type { ApiKeyRow, AuditRow };

/** Kinds of resource a tenant owns, by the path segment that names them. */
export type OwnedKind = 'connection' | 'job' | 'webhook' | 'purge' | 'oauth_app';

/** A tenant key: `stk_<prefix>_<secret>`; the prefix (public) finds the row, the whole key is hashed. */
const TENANT_KEY = /^stk_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$/;

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/** Scopes a tenant key may carry. */
export type { KeyScope };

/** Creates an API key for tenant `tenantId` and returns it with its secret: the only time it is shown. */
export async function createApiKey(
  deps: Pick<CommandDeps, 'pool'>,
  tenantId: string,
  options: { name?: string; scopes?: KeyScope[] } = {},
): Promise<{ key: ApiKeyRow; secret: string }> {
  const prefix = randomBytes(6).toString('hex');
  const secret = `stk_${prefix}_${randomBytes(32).toString('base64url')}`;
  const scopes = [...new Set(options.scopes?.length ? options.scopes : KEY_SCOPES)];
  const key = await apiKeys.insertApiKey(deps.pool, { tenantId, name: options.name ?? null, prefix, secretHash: sha256(secret), scopes });
  return { key, secret };
}

/** A tenant's keys (never their secrets), revoked ones included. */
export function listApiKeys(deps: Pick<CommandDeps, 'pool'>, tenantId: string): Promise<ApiKeyRow[]> {
  return apiKeys.listApiKeys(deps.pool, tenantId);
}

/** Revokes a tenant's key: it stops working at once. Refuses with not_found for another tenant's key. */
export async function revokeApiKey(deps: Pick<CommandDeps, 'pool'>, tenantId: string, id: string): Promise<ApiKeyRow> {
  const row = await apiKeys.revokeApiKey(deps.pool, tenantId, id);
  if (!row) throw notFound('no API key with that id for this tenant');
  return row;
}

/** The public prefix of a well-formed tenant key (it names the key's row and its request bucket), or null for anything else. */
export function tenantKeyPrefix(token: string): string | null {
  return TENANT_KEY.exec(token)?.[1] ?? null;
}

/**
 * The tenant key `token` names, when it is a valid, unrevoked one: the stored hash is compared in
 * constant time. Stamps its `last_used_at` (at most once a minute). Null for anything else.
 */
export async function authenticateTenantKey(deps: Pick<CommandDeps, 'pool'>, token: string): Promise<ApiKeyRow | null> {
  const prefix = tenantKeyPrefix(token);
  if (prefix === null) return null;
  const row = await apiKeys.findActiveApiKeyByPrefix(deps.pool, prefix);
  if (!row || !timingSafeEqual(sha256(token), row.secret_hash)) return null;
  await apiKeys.touchApiKey(deps.pool, row.id);
  return row;
}

/** The tenant that owns a resource, or null when there is no such resource. */
export function ownerOf(deps: Pick<CommandDeps, 'pool'>, kind: OwnedKind, id: string): Promise<string | null> {
  switch (kind) {
    case 'connection':
      return owners.connectionTenant(deps.pool, id);
    case 'job':
      return owners.jobTenant(deps.pool, id);
    case 'webhook':
      return owners.webhookTenant(deps.pool, id);
    case 'purge':
      return owners.purgeTenant(deps.pool, id);
    case 'oauth_app':
      return owners.oauthAppTenant(deps.pool, id);
  }
}

/** Appends one mutating call to the audit log. */
export function recordAudit(deps: Pick<CommandDeps, 'pool'>, entry: Omit<AuditRow, 'id' | 'at'>): Promise<void> {
  return audit.insertAuditEntry(deps.pool, entry);
}

/** A page of the audit log, newest first. */
export function listAudit(deps: Pick<CommandDeps, 'pool'>, query: { tenantId?: string; beforeId?: string; limit: number }) {
  return audit.listAuditEntries(deps.pool, query);
}
