// Per-tenant limits: the admin's overrides, the tenant lock every limited insert or claim takes,
// and what each limit counts. A check counts inside the transaction that then inserts (or claims),
// after taking the tenant's lock, so two concurrent requests cannot both take the last place.
import { REDELIVERY_WINDOW_MS, type TenantLimitOverrides } from '../../policy/tenant-limits';
import type { Queryable } from '../queryable';
import { JOB, PURGE } from '../sql';

/** Two-key advisory locks in this class are the per-tenant limit locks. */
const TENANT_LOCK_CLASS = 0x7e17;

/** A tenant's overrides row: null columns keep the default. */
export interface TenantLimitsRow {
  tenant_id: string;
  max_connections: number | null;
  max_webhooks: number | null;
  max_immediate_syncs: number | null;
  max_running_jobs: number | null;
  max_redeliveries_per_hour: number | null;
  max_oauth_apps: number | null;
  updated_at: Date;
}

const COLUMNS = 'tenant_id, max_connections, max_webhooks, max_immediate_syncs, max_running_jobs, max_redeliveries_per_hour, max_oauth_apps, updated_at';

/** The overrides of a row as the policy takes them. */
export function overridesOf(row: TenantLimitsRow | null): TenantLimitOverrides {
  return {
    connections: row?.max_connections ?? null,
    webhooks: row?.max_webhooks ?? null,
    immediateSyncs: row?.max_immediate_syncs ?? null,
    runningJobs: row?.max_running_jobs ?? null,
    redeliveriesPerHour: row?.max_redeliveries_per_hour ?? null,
    oauthApps: row?.max_oauth_apps ?? null,
  };
}

/** Takes tenant `tenantId`'s limit lock until the end of transaction `tx`. */
export async function lockTenant(tx: Queryable, tenantId: string): Promise<void> {
  await tx.query('select pg_advisory_xact_lock($1, hashtext($2))', [TENANT_LOCK_CLASS, tenantId]);
}

/** A tenant's overrides, or null when it has none. */
export async function findTenantLimits(db: Queryable, tenantId: string): Promise<TenantLimitsRow | null> {
  const { rows } = await db.query<TenantLimitsRow>(`select ${COLUMNS} from tenant_limits where tenant_id = $1`, [tenantId]);
  return rows[0] ?? null;
}

/**
 * Sets the overrides `change` names (null: back to the default), leaving the others as they are;
 * returns the row.
 */
export async function upsertTenantLimits(db: Queryable, tenantId: string, change: TenantLimitOverrides): Promise<TenantLimitsRow> {
  const has = (k: keyof TenantLimitOverrides) => change[k] !== undefined;
  const { rows } = await db.query<TenantLimitsRow>(
    `insert into tenant_limits as t (tenant_id, max_connections, max_webhooks, max_immediate_syncs, max_running_jobs, max_redeliveries_per_hour, max_oauth_apps)
     values ($1, $2, $4, $6, $8, $10, $12)
     on conflict (tenant_id) do update set
       max_connections = case when $3 then excluded.max_connections else t.max_connections end,
       max_webhooks = case when $5 then excluded.max_webhooks else t.max_webhooks end,
       max_immediate_syncs = case when $7 then excluded.max_immediate_syncs else t.max_immediate_syncs end,
       max_running_jobs = case when $9 then excluded.max_running_jobs else t.max_running_jobs end,
       max_redeliveries_per_hour = case when $11 then excluded.max_redeliveries_per_hour else t.max_redeliveries_per_hour end,
       max_oauth_apps = case when $13 then excluded.max_oauth_apps else t.max_oauth_apps end,
       updated_at = now()
     returning ${COLUMNS}`,
    [
      tenantId,
      change.connections ?? null, has('connections'),
      change.webhooks ?? null, has('webhooks'),
      change.immediateSyncs ?? null, has('immediateSyncs'),
      change.runningJobs ?? null, has('runningJobs'),
      change.redeliveriesPerHour ?? null, has('redeliveriesPerHour'),
      change.oauthApps ?? null, has('oauthApps'),
    ],
  );
  return rows[0]!;
}

/**
 * Tenant `$1`'s connections as its limit (`$2`) counts them: those being purged left out, up to as
 * many as the limit; beyond that they count. A tenant at its limit may so delete connections and
 * create others at once (all of them, even), while the rows it holds stay within twice its limit:
 * purges waiting for a place of its running jobs cannot pile up without bound under a loop of
 * creates and deletes (each a connection row and a purge workflow trying again every 65–95 s).
 */
const COUNT_CONNECTIONS = `select (count(*) filter (where not c.purging) + greatest(0, count(*) filter (where c.purging) - $2::bigint))::int
    from (select exists (select 1 from connection_purges p where p.connection_id = c.id and p.status <> ${PURGE.completed}) as purging
            from connections c where c.tenant_id = $1) c`;
/**
 * SQL of the start of the redelivery window ending now. Redeliveries are written and counted by
 * the database's clock alone: API processes whose clocks differ count each other's.
 */
const REDELIVERY_WINDOW_START = `now() - make_interval(secs => ${REDELIVERY_WINDOW_MS / 1000})`;

/** Tenant `$1`'s webhooks. */
const COUNT_WEBHOOKS = 'select count(*)::int from webhooks where tenant_id = $1';
/** Tenant `$1`'s OAuth apps. */
const COUNT_OAUTH_APPS = 'select count(*)::int from oauth_apps where tenant_id = $1';
/**
 * Tenant `$1`'s immediate syncs still counted (their lease not expired). Leases are written and
 * read by the database's clock alone: API processes whose clocks differ still see each other's.
 */
const COUNT_IMMEDIATE_SYNCS = 'select count(*)::int from immediate_sync_leases where tenant_id = $1 and expires_at > now()';
/**
 * Tenant `$1`'s places of its running-jobs limit taken, each holding an activity slot: a running
 * job takes as many as the tasks it runs at once (`parallel_tasks`, set when it is prepared; 1
 * before), a purge under way (`running`: it has its place) one. `exceptJob` and `exceptPurge` are conditions
 * leaving out the one asking.
 */
const runningPlaces = (exceptJob = '', exceptPurge = '') =>
  `(select coalesce(sum(parallel_tasks), 0)::int from sync_jobs where tenant_id = $1 and status = ${JOB.running}${exceptJob})
   + (select count(*)::int from connection_purges where tenant_id = $1 and status = ${PURGE.running}${exceptPurge})`;

/** What a tenant holds now, for the limits that count rows. */
export interface TenantUsage {
  connections: number;
  webhooks: number;
  immediate_syncs: number;
  /** Places of the running-jobs limit taken (one per task a running job runs at once, one per purge under way). */
  running_jobs: number;
  redeliveries_last_hour: number;
  oauth_apps: number;
}

/** Everything a tenant holds now, each as its limit counts it (`connectionLimit`: the connection limit that applies to it). */
export async function tenantUsage(db: Queryable, tenantId: string, connectionLimit: number): Promise<TenantUsage> {
  const { rows } = await db.query<TenantUsage>(
    `select
       (${COUNT_CONNECTIONS}) as connections,
       (${COUNT_WEBHOOKS}) as webhooks,
       (${COUNT_IMMEDIATE_SYNCS}) as immediate_syncs,
       (${runningPlaces()}) as running_jobs,
       (select count(*)::int from webhook_redeliveries where tenant_id = $1 and at > ${REDELIVERY_WINDOW_START}) as redeliveries_last_hour,
       (${COUNT_OAUTH_APPS}) as oauth_apps`,
    [tenantId, connectionLimit],
  );
  return rows[0]!;
}

/** A tenant's connections as its limit `limit` counts them: those being purged left out, up to `limit` of them. */
export async function countConnections(db: Queryable, tenantId: string, limit: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`select (${COUNT_CONNECTIONS}) as n`, [tenantId, limit]);
  return rows[0]!.n;
}

/** A tenant's webhooks. */
export async function countWebhooks(db: Queryable, tenantId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`select (${COUNT_WEBHOOKS}) as n`, [tenantId]);
  return rows[0]!.n;
}

/** A tenant's OAuth apps. */
export async function countOAuthApps(db: Queryable, tenantId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`select (${COUNT_OAUTH_APPS}) as n`, [tenantId]);
  return rows[0]!.n;
}

/**
 * The places a tenant's running jobs other than `exceptJobId` take (`running`), the places that
 * job takes (`own`), and the tenant's override of the running-jobs limit (null: the default), in
 * one statement: a claim reads them on its hot path.
 */
export async function runningJobsAndOverride(
  db: Queryable,
  tenantId: string,
  exceptJobId: string,
): Promise<{ running: number; own: number; max_running_jobs: number | null }> {
  const { rows } = await db.query<{ running: number; own: number; max_running_jobs: number | null }>(
    `select (${runningPlaces(' and id <> $2')}) as running,
            coalesce((select parallel_tasks from sync_jobs where id = $2), 1)::int as own,
            (select max_running_jobs from tenant_limits where tenant_id = $1) as max_running_jobs`,
    [tenantId, exceptJobId],
  );
  return rows[0]!;
}

/**
 * A tenant's immediate syncs still counted at `at`, with its override of the immediate-sync limit
 * (null: the default), in one statement: the API's first look at a request, before any lock.
 */
export async function immediateSyncsAndOverride(db: Queryable, tenantId: string): Promise<{ running: number; max_immediate_syncs: number | null }> {
  const { rows } = await db.query<{ running: number; max_immediate_syncs: number | null }>(
    `select (${COUNT_IMMEDIATE_SYNCS}) as running,
            (select max_immediate_syncs from tenant_limits where tenant_id = $1) as max_immediate_syncs`,
    [tenantId],
  );
  return rows[0]!;
}

/**
 * The places a tenant's running jobs and purges other than purge `exceptPurgeId` take (`running`),
 * how many of them are purges (`purges`), and its override of the running-jobs limit (null: the
 * default), in one statement: a purge asks before it starts.
 */
export async function runningPlacesBesidePurge(
  db: Queryable,
  tenantId: string,
  exceptPurgeId: string,
): Promise<{ running: number; purges: number; max_running_jobs: number | null }> {
  const { rows } = await db.query<{ running: number; purges: number; max_running_jobs: number | null }>(
    `select (${runningPlaces('', ' and id <> $2')}) as running,
            (select count(*)::int from connection_purges where tenant_id = $1 and status = ${PURGE.running} and id <> $2) as purges,
            (select max_running_jobs from tenant_limits where tenant_id = $1) as max_running_jobs`,
    [tenantId, exceptPurgeId],
  );
  return rows[0]!;
}

/** A tenant's immediate syncs still counted now (their lease not expired). */
export async function countImmediateSyncs(db: Queryable, tenantId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`select (${COUNT_IMMEDIATE_SYNCS}) as n`, [tenantId]);
  return rows[0]!.n;
}

/** Counts an immediate sync request (lease `id`) against its tenant for `lastsMs` from now (the database's), or until its release. */
export async function insertImmediateSyncLease(db: Queryable, lease: { id: string; tenantId: string; connectionId: string; lastsMs: number }): Promise<void> {
  await db.query(
    'insert into immediate_sync_leases (id, tenant_id, connection_id, expires_at) values ($1, $2, $3, now() + make_interval(secs => $4::float8 / 1000))',
    [lease.id, lease.tenantId, lease.connectionId, lease.lastsMs],
  );
}

/** Stops counting lease `id`, and drops the tenant's leases expired by the database's clock. */
export async function releaseImmediateSyncLease(db: Queryable, id: string, tenantId: string): Promise<void> {
  await db.query('delete from immediate_sync_leases where id = $1 or (tenant_id = $2 and expires_at <= now())', [id, tenantId]);
}

/** The tenant's redeliveries inside the window ending now: how many, when the oldest was, and now (the database's). */
export async function redeliveriesInWindow(db: Queryable, tenantId: string): Promise<{ n: number; oldest: Date | null; now: Date }> {
  const { rows } = await db.query<{ n: number; oldest: Date | null; now: Date }>(
    `select count(*)::int as n, min(at) as oldest, now() as now from webhook_redeliveries where tenant_id = $1 and at > ${REDELIVERY_WINDOW_START}`,
    [tenantId],
  );
  return rows[0]!;
}

/** Records a redelivery of `deliveryId` by tenant `tenantId` now, dropping the tenant's rows the window has left. */
export async function insertRedelivery(db: Queryable, entry: { tenantId: string; deliveryId: string }): Promise<void> {
  await db.query(
    `with old as (delete from webhook_redeliveries where tenant_id = $1 and at <= ${REDELIVERY_WINDOW_START})
     insert into webhook_redeliveries (tenant_id, delivery_id, at) values ($1, $2, now())`,
    [entry.tenantId, entry.deliveryId],
  );
}
