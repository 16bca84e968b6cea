// SQL of `pending_deselections`: what a config change stopped selecting whose records are not all
// tombstoned yet (migration 0068), one row per unit: a whole resource type (`id_prefix` empty) or
// the records of a type whose ids start with `id_prefix`. Written by the config change, read and
// finished by the reconcile tick in batches (`tombstoneDeselectedBatch` in records.ts).
import type { Queryable } from '../queryable';
import { PURGE } from '../sql';

/** One deselected unit of a connection: a resource type whole (`idPrefix` empty), or its records under `idPrefix`. */
export interface DeselectionUnit {
  resourceType: string;
  idPrefix: string;
}

/** A pending deselection: its unit, and where its next batch starts (`afterId`, in the records key's order). */
export interface PendingDeselection extends DeselectionUnit {
  connectionId: string;
  afterId: string;
}

/** A pending deselection to finish, with what the tick needs to judge it (its connection's provider) and to share its batches (its tenant). */
export interface DeselectionToFinish extends PendingDeselection {
  providerSlug: string;
  tenantId: string;
}

const UNIT_COLUMNS = 'd.connection_id as "connectionId", d.resource_type as "resourceType", d.id_prefix as "idPrefix", d.after_id as "afterId"';

/**
 * Records `units` of connection `connectionId` as pending, each from its `afterId` (where the
 * change's own batch stopped; empty: from the start): a unit already pending starts over from
 * there (a record it passed because a later config selected it again may be deselected now).
 */
export async function recordDeselections(tx: Queryable, connectionId: string, units: readonly (DeselectionUnit & { afterId: string })[]): Promise<void> {
  if (units.length === 0) return;
  await tx.query(
    `insert into pending_deselections (connection_id, resource_type, id_prefix, after_id)
     select $1, u.resource_type, u.id_prefix, u.after_id from unnest($2::text[], $3::text[], $4::text[]) as u(resource_type, id_prefix, after_id)
     on conflict (connection_id, resource_type, id_prefix) do update set after_id = excluded.after_id, created_at = now()`,
    [connectionId, units.map((u) => u.resourceType), units.map((u) => u.idPrefix), units.map((u) => u.afterId)],
  );
}

/** Connection `connectionId`'s pending deselections. */
export async function listDeselections(db: Queryable, connectionId: string): Promise<PendingDeselection[]> {
  const { rows } = await db.query<PendingDeselection>(
    `select ${UNIT_COLUMNS} from pending_deselections d where d.connection_id = $1 order by d.created_at, d.resource_type, d.id_prefix`,
    [connectionId],
  );
  return rows;
}

/** Deletes `units` of connection `connectionId` from the pending deselections (selected again, or finished). */
export async function forgetDeselections(tx: Queryable, connectionId: string, units: readonly DeselectionUnit[]): Promise<void> {
  if (units.length === 0) return;
  await tx.query(
    `delete from pending_deselections d using unnest($2::text[], $3::text[]) as u(resource_type, id_prefix)
      where d.connection_id = $1 and d.resource_type = u.resource_type and d.id_prefix = u.id_prefix`,
    [connectionId, units.map((u) => u.resourceType), units.map((u) => u.idPrefix)],
  );
}

/**
 * Where the turns of tenants start: just after tenant `after` (in tenant id order, wrapping
 * round), or, with no tenant to go on from, at position `offset` (modulo the number of tenants
 * listed) of the tenants in id order.
 */
export type DeselectionTurnsStart = { after: string } | { offset: number };

/**
 * Up to `limit` pending deselections of connections of `providers`, with their connections'
 * providers and tenants; none of a connection whose purge is open (the purge deletes its records,
 * and these rows with the connection). Taken in turns of tenants: every tenant's oldest first,
 * then every tenant's second oldest, and so on, so a tenant with many pending (or older ones)
 * never fills the list and keeps another tenant's out. Within a turn the tenants come in id order
 * from `start`, wrapping round, so with more tenants than `limit` a caller that starts each call
 * where the last one stopped reaches every tenant.
 */
export async function findDeselectionsToFinish(db: Queryable, providers: readonly string[], limit: number, start: DeselectionTurnsStart = { offset: 0 }): Promise<DeselectionToFinish[]> {
  const after = 'after' in start ? start.after : null;
  const offset = 'offset' in start ? Math.max(0, Math.floor(start.offset)) : 0;
  const { rows } = await db.query<DeselectionToFinish>(
    `with units as (
       select ${UNIT_COLUMNS}, c.provider_slug as "providerSlug", c.tenant_id as "tenantId", d.created_at,
              row_number() over (partition by c.tenant_id order by d.created_at, d.connection_id, d.resource_type, d.id_prefix) as turn
         from pending_deselections d join connections c on c.id = d.connection_id
        where c.provider_slug = any($2::text[])
          and not exists (select 1 from connection_purges p where p.connection_id = d.connection_id and p.status <> ${PURGE.completed})
     ), tenants as (
       select t."tenantId", row_number() over (order by t."tenantId") - 1 as k, count(*) over () as n,
              case when $3::text is null then $4::bigint else count(*) filter (where t."tenantId" <= $3::text) over () end as first
         from (select distinct "tenantId" from units) t
     )
     select u."connectionId", u."resourceType", u."idPrefix", u."afterId", u."providerSlug", u."tenantId"
       from units u join tenants t on t."tenantId" = u."tenantId"
      order by u.turn, (t.k - t.first % t.n + t.n) % t.n, u.created_at, u."connectionId", u."resourceType", u."idPrefix" limit $1`,
    [limit, [...providers], after, offset],
  );
  return rows;
}

/**
 * Locks pending deselection `unit` of connection `connectionId` until the transaction ends and
 * answers where its next batch starts; null when it is no longer pending (finished, or selected again).
 */
export async function lockDeselection(tx: Queryable, connectionId: string, unit: DeselectionUnit): Promise<{ afterId: string } | null> {
  const { rows } = await tx.query<{ afterId: string }>(
    `select d.after_id as "afterId" from pending_deselections d
      where d.connection_id = $1 and d.resource_type = $2 and d.id_prefix = $3 for update`,
    [connectionId, unit.resourceType, unit.idPrefix],
  );
  return rows[0] ?? null;
}

/** Moves pending deselection `unit`'s next batch to start at `afterId`. */
export async function advanceDeselection(tx: Queryable, connectionId: string, unit: DeselectionUnit, afterId: string): Promise<void> {
  await tx.query(
    'update pending_deselections set after_id = $4 where connection_id = $1 and resource_type = $2 and id_prefix = $3',
    [connectionId, unit.resourceType, unit.idPrefix, afterId],
  );
}

/** How many deselections are pending, and the age in seconds of the oldest (0 when none): one statement. */
export async function findDeselectionBacklog(db: Queryable): Promise<{ pending: number; oldestSeconds: number }> {
  const { rows } = await db.query<{ pending: number; oldest_seconds: number }>(
    `select count(*)::int as pending, coalesce(extract(epoch from now() - min(created_at)), 0)::float8 as oldest_seconds from pending_deselections`,
  );
  return { pending: rows[0]!.pending, oldestSeconds: rows[0]!.oldest_seconds };
}
