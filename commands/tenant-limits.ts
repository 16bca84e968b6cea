// Per-tenant limits: the admin's overrides, and the checks a command makes inside the transaction
// that inserts what the limit counts (the tenant's lock is taken first, so the check and the
// insert cannot interleave with another request of the same tenant).
import type { PoolClient } from 'pg';
import * as limits from '../db/models/tenant-limits';
import type { TenantLimitsRow, TenantUsage } from '../db/models/tenant-limits';
import { withTransaction } from '../db/transaction';
import {
  DEFAULT_TENANT_LIMITS,
  effectiveLimits,
  TENANT_LIMIT_NAMES,
  type TenantLimitKind,
  type TenantLimitOverrides,
  type TenantLimits,
} from '../policy/tenant-limits';
import type { CommandDeps } from './deps';
import { CommandRefused } from './errors';

export type { TenantUsage };

/** The limits that apply to `tenantId`, read after taking its lock in transaction `tx`. */
export async function lockedLimits(deps: Pick<CommandDeps, 'tenantLimits'>, tx: PoolClient, tenantId: string): Promise<TenantLimits> {
  await limits.lockTenant(tx, tenantId);
  const row = await limits.findTenantLimits(tx, tenantId);
  return effectiveLimits(deps.tenantLimits ?? DEFAULT_TENANT_LIMITS, limits.overridesOf(row));
}

/**
 * The refusal of a request over limit `kind` of value `value`: a count limit (connections,
 * webhooks) is a 409 conflict; a rate-type one (with `retryAfterSeconds`) a 429. The answer names
 * the limit and its value.
 */
export function overLimit(kind: TenantLimitKind, value: number, what: string, retryAfterSeconds?: number): CommandRefused {
  const limit = TENANT_LIMIT_NAMES[kind];
  const details = { limit, value, ...(retryAfterSeconds !== undefined && { retry_after_seconds: retryAfterSeconds }) };
  const message = `the tenant has reached its limit of ${value} ${what} (${limit})${retryAfterSeconds === undefined ? '' : `; retry in ${retryAfterSeconds} s`}`;
  return new CommandRefused(retryAfterSeconds === undefined ? 'conflict' : 'limited', 'tenant_limit', message, details);
}

/** A tenant's limits as the admin reads them: the values that apply, the overrides, and what it holds now. */
export interface TenantLimitsView {
  tenantId: string;
  limits: TenantLimits;
  overrides: TenantLimitOverrides;
  usage: TenantUsage;
}

/** Reads tenant `tenantId`'s limits, overrides and usage (any tenant id: one without a row has the defaults). */
export async function getTenantLimits(deps: Pick<CommandDeps, 'pool' | 'tenantLimits'>, tenantId: string): Promise<TenantLimitsView> {
  return withTransaction(deps.pool, async (tx) => view(deps, tenantId, await limits.findTenantLimits(tx, tenantId), tx), { snapshot: true });
}

/** Sets the overrides `change` names (null: back to the default), keeps the others; answers the new view. */
export async function setTenantLimits(deps: Pick<CommandDeps, 'pool' | 'tenantLimits'>, tenantId: string, change: TenantLimitOverrides): Promise<TenantLimitsView> {
  const row = await limits.upsertTenantLimits(deps.pool, tenantId, change);
  return view(deps, tenantId, row, deps.pool);
}

async function view(deps: Pick<CommandDeps, 'tenantLimits'>, tenantId: string, row: TenantLimitsRow | null, db: Parameters<typeof limits.tenantUsage>[0]): Promise<TenantLimitsView> {
  const overrides = limits.overridesOf(row);
  const applying = effectiveLimits(deps.tenantLimits ?? DEFAULT_TENANT_LIMITS, overrides);
  return { tenantId, limits: applying, overrides, usage: await limits.tenantUsage(db, tenantId, applying.connections) };
}
