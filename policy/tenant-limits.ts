// Per-tenant limits: how much of the shared platform one tenant may hold, so no tenant can crowd
// out another. Each has a default (configuration) and an optional per-tenant override set by the
// admin; the pure rules here decide the effective value and whether a request fits under it.

/** What a tenant may hold at once, or within an hour. */
export interface TenantLimits {
  /** Connections (those being purged no longer count, up to as many as this limit; beyond that they do). */
  connections: number;
  /** Webhooks. */
  webhooks: number;
  /** Immediate syncs running at once. */
  immediateSyncs: number;
  /**
   * Places of running sync jobs: a job takes one per task it runs at once (its connection's
   * `max_parallel_tasks`, no more than its tasks), each holding an activity slot; more wait,
   * queued or retrying, until one ends.
   */
  runningJobs: number;
  /** Webhook redeliveries requested in any sliding hour. */
  redeliveriesPerHour: number;
  /** OAuth apps registered. */
  oauthApps: number;
}

/**
 * The default of TENANT_MAX_OAUTH_STATES: connect flows under way (states stored, neither used nor
 * expired) one tenant may hold at once. A deployment-wide value, not overridden per tenant.
 */
export const DEFAULT_TENANT_MAX_OAUTH_STATES = 1000;

/** The name of the limit on a tenant's connect flows under way, in answers. */
export const OAUTH_STATES_LIMIT_NAME = 'max_oauth_states';

/**
 * Seconds until a connect flow fits again when a tenant holds its limit of them: the oldest one
 * expires then (at least 1). `oldestExpiry` is when the first of the tenant's live states expires.
 */
export function oauthStateRetryAfterSeconds(oldestExpiry: Date, now: Date): number {
  return Math.max(1, Math.ceil((oldestExpiry.getTime() - now.getTime()) / 1000));
}

/** The kinds of limit. */
export type TenantLimitKind = keyof TenantLimits;

/** The largest value a limit takes (2^31 − 1): overrides are stored as Postgres integers. */
export const MAX_TENANT_LIMIT = 2_147_483_647;

/** The defaults when configuration names none (TENANT_MAX_*). */
export const DEFAULT_TENANT_LIMITS: TenantLimits = {
  connections: 1000,
  webhooks: 100,
  immediateSyncs: 2,
  runningJobs: 50,
  redeliveriesPerHour: 100,
  oauthApps: 100,
};

/** Each limit's name in answers, the admin API and the overrides table. */
export const TENANT_LIMIT_NAMES: Record<TenantLimitKind, string> = {
  connections: 'max_connections',
  webhooks: 'max_webhooks',
  immediateSyncs: 'max_immediate_syncs',
  runningJobs: 'max_running_jobs',
  redeliveriesPerHour: 'max_redeliveries_per_hour',
  oauthApps: 'max_oauth_apps',
};

/** A tenant's overrides: null (or absent) keeps the default. */
export type TenantLimitOverrides = { [K in TenantLimitKind]?: number | null };

/** The limits that apply to a tenant: each override where set, else the default. */
export function effectiveLimits(defaults: TenantLimits, overrides: TenantLimitOverrides | null | undefined): TenantLimits {
  const out = { ...defaults };
  for (const kind of Object.keys(defaults) as TenantLimitKind[]) {
    const value = overrides?.[kind];
    if (value !== null && value !== undefined) out[kind] = value;
  }
  return out;
}

/** Whether one more fits: `inUse` are held now (the new one not among them). */
export function fitsUnder(limit: number, inUse: number): boolean {
  return inUse < limit;
}

/**
 * Whether a job taking `wanted` places (the tasks it runs at once) may start running while its
 * tenant's other running jobs take `inUse` of `limit`: when all of its places fit, or, for a job
 * wider than the limit, when it would run alone. A limit of 0 runs none.
 */
export function jobFitsUnder(limit: number, inUse: number, wanted: number): boolean {
  return limit > 0 && (inUse === 0 || inUse + wanted <= limit);
}

/** The length of the redelivery window, in milliseconds. */
export const REDELIVERY_WINDOW_MS = 3_600_000;

/**
 * Seconds until a redelivery fits again: the oldest one inside the window leaves it then
 * (at least 1). `oldest` is the earliest redelivery of the window, `now` the present.
 */
export function redeliveryRetryAfterSeconds(oldest: Date, now: Date): number {
  return Math.max(1, Math.ceil((oldest.getTime() + REDELIVERY_WINDOW_MS - now.getTime()) / 1000));
}

/** Seconds a caller refused an immediate sync for the tenant's limit is told to wait. */
export const IMMEDIATE_SYNC_RETRY_AFTER_SECONDS = 5;

/**
 * How long a job whose tenant runs its limit of jobs waits before it tries to claim again, in
 * seconds: 65–95 s (jittered by `random` in [0, 1)). Above the SDK's one-minute local retry
 * threshold, so a waiting job sleeps on a durable timer and holds no worker slot or cache entry.
 */
export function runningJobsWaitSeconds(random: number): number {
  return 65 + Math.floor(random * 30);
}

/**
 * A tenant's share of a process's database pool of `poolMax` connections: half of it (one at
 * least). An API process serves that many of a tenant key's requests at once (a request holds one
 * pooled connection at a time), and a worker runs that many of a tenant's statements and
 * transactions at once on its activities' pool, so however much one tenant asks at once, or however
 * long its statements wait, the other half serves the other tenants.
 */
export function tenantShareOfPool(poolMax: number): number {
  return Math.max(1, Math.floor(poolMax / 2));
}
