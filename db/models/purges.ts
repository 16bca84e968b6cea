// SQL of `connection_purges` and of the batched deletes that purge a connection: each statement
// deletes at most `limit` rows, so no table is locked for long.
import type { PurgeStatus } from '../../policy/vocabulary';
import type { Queryable } from '../queryable';
import { ACTIVE_JOBS, PURGE } from '../sql';
import { BATCH_COUNTS, deleteFinishedEventsSql } from './webhooks';

/** A purge as the API shows it. */
export interface PurgeRow {
  id: string;
  connection_id: string;
  tenant_id: string;
  status: PurgeStatus;
  deleted_rows: string;
  created_at: Date;
  finished_at: Date | null;
}

const PURGE_COLUMNS = 'id, connection_id, tenant_id, status, deleted_rows::text as deleted_rows, created_at, finished_at';

/**
 * The advisory lock a connection's deletion takes exclusively and its resume and update share. A
 * sync needs no share of it: its one-statement insert reads the connection row FOR SHARE, and the
 * deletion writes that row disabled under this lock (jobs.insertRequestedJob).
 */
const PURGE_LOCK = `hashtextextended('synctide:connection-purge:' || $1::text, 0)`;

/**
 * Takes connection `connectionId`'s purge lock exclusively until the transaction ends: the
 * transaction that records its purge holds it, so no resume or update (which share it) can pass
 * its check for an open purge while that purge is being recorded (a sync waits instead for the
 * connection row the same transaction writes disabled).
 */
export async function lockForPurge(tx: Queryable, connectionId: string): Promise<void> {
  await tx.query(`select pg_advisory_xact_lock(${PURGE_LOCK})`, [connectionId]);
}

/**
 * Takes connection `connectionId`'s purge lock shared until the transaction ends, then answers its
 * open purge (or null). A statement after it sees any purge recorded before it got the lock, so a
 * change written in the same transaction after a null answer can never follow a purge's start.
 */
export async function findOpenPurgeLocked(tx: Queryable, connectionId: string): Promise<PurgeRow | null> {
  await tx.query(`select pg_advisory_xact_lock_shared(${PURGE_LOCK})`, [connectionId]);
  return findOpenPurge(tx, connectionId);
}

/**
 * findOpenPurgeLocked without waiting: 'busy' when the purge lock cannot be had shared at once (a
 * deletion of the connection is being recorded), with nothing taken.
 */
export async function findOpenPurgeLockedNoWait(tx: Queryable, connectionId: string): Promise<PurgeRow | null | 'busy'> {
  const { rows } = await tx.query<{ got: boolean }>(`select pg_try_advisory_xact_lock_shared(${PURGE_LOCK}) as got`, [connectionId]);
  if (!rows[0]?.got) return 'busy';
  return findOpenPurge(tx, connectionId);
}

/** Inserts a pending purge of a connection; null when one is already open for it. */
export async function insertPurge(db: Queryable, connectionId: string, tenantId: string): Promise<PurgeRow | null> {
  const { rows } = await db.query<PurgeRow>(
    `insert into connection_purges (connection_id, tenant_id) values ($1, $2)
     on conflict (connection_id) where status <> ${PURGE.completed} do nothing returning ${PURGE_COLUMNS}`,
    [connectionId, tenantId],
  );
  return rows[0] ?? null;
}

/** The open (not completed) purge of a connection, or null. */
export async function findOpenPurge(db: Queryable, connectionId: string): Promise<PurgeRow | null> {
  const { rows } = await db.query<PurgeRow>(`select ${PURGE_COLUMNS} from connection_purges where connection_id = $1 and status <> ${PURGE.completed}`, [connectionId]);
  return rows[0] ?? null;
}

/** Purge `id`, or null. */
export async function findPurge(db: Queryable, id: string): Promise<PurgeRow | null> {
  const { rows } = await db.query<PurgeRow>(`select ${PURGE_COLUMNS} from connection_purges where id = $1`, [id]);
  return rows[0] ?? null;
}

/** Marks a pending purge running. */
export async function markPurgeRunning(db: Queryable, id: string): Promise<void> {
  await db.query(`update connection_purges set status = ${PURGE.running} where id = $1 and status = ${PURGE.pending}`, [id]);
}

/** Adds `n` deleted rows to a purge's progress. */
export async function addPurgeProgress(db: Queryable, id: string, n: number): Promise<void> {
  await db.query('update connection_purges set deleted_rows = deleted_rows + $2 where id = $1', [id, n]);
}

/** Marks a purge completed. */
export async function completePurge(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query(`update connection_purges set status = ${PURGE.completed}, finished_at = coalesce(finished_at, $2) where id = $1`, [id, at]);
}

/**
 * Deletes at most `limit` completed purges finished before `cutoff` (the retention clean-up's, as
 * finished jobs are deleted): one row per connection deletion would otherwise stay for good.
 * Open purges stay however old. Returns how many it deleted.
 */
export async function deleteCompletedPurgesBatch(db: Queryable, cutoff: Date, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `delete from connection_purges where id in (
       select id from connection_purges where status = ${PURGE.completed} and coalesce(finished_at, created_at) < $1 limit $2)`,
    [cutoff, limit],
  );
  return rowCount ?? 0;
}

/** Ids of the connection's active jobs (whose workflows a purge stops). */
export async function findActiveJobIds(db: Queryable, connectionId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(`select id from sync_jobs where connection_id = $1 and status in (${ACTIVE_JOBS})`, [connectionId]);
  return rows.map((r) => r.id);
}

/**
 * What one batch delete of a connection's rows did: how many rows its statement chose (at most its
 * limit) and how many of them it deleted. Fewer deleted than chosen: another delete (the retention
 * clean-up) took some first, or an event kept for its redelivery. Fewer chosen than the limit:
 * the statement saw every row of the step that was left, so nothing of it remains.
 */
export interface PurgeBatch {
  chosen: number;
  deleted: number;
}

async function batch(db: Queryable, sql: string, connectionId: string, limit: number): Promise<PurgeBatch> {
  const { rows } = await db.query<PurgeBatch>(sql, [connectionId, limit]);
  return rows[0]!;
}

/** Deletes up to `limit` of the connection's records (tombstones included). */
export async function deleteRecordsBatch(db: Queryable, connectionId: string, limit: number): Promise<PurgeBatch> {
  return batch(
    db,
    `with chosen as (select connection_id, resource_type, external_id from records where connection_id = $1 limit $2),
          deleted as (delete from records where (connection_id, resource_type, external_id) in (select * from chosen) returning 1)
     ${BATCH_COUNTS}`,
    connectionId,
    limit,
  );
}

/** Deletes up to `limit` seen-set rows of the connection's tasks (sync_seen has no foreign key to cascade). */
export async function deleteSeenBatch(db: Queryable, connectionId: string, limit: number): Promise<PurgeBatch> {
  return batch(
    db,
    `with chosen as (select s.task_id, s.external_id from sync_seen s
                       join sync_tasks t on t.id = s.task_id join sync_jobs j on j.id = t.job_id
                      where j.connection_id = $1 limit $2),
          deleted as (delete from sync_seen where (task_id, external_id) in (select * from chosen) returning 1)
     ${BATCH_COUNTS}`,
    connectionId,
    limit,
  );
}

/** Deletes up to `limit` of the connection's jobs, with their tasks and logs (by cascade). */
export async function deleteJobsBatch(db: Queryable, connectionId: string, limit: number): Promise<PurgeBatch> {
  return batch(
    db,
    `with chosen as (select id from sync_jobs where connection_id = $1 limit $2),
          deleted as (delete from sync_jobs where id in (select id from chosen) returning 1)
     ${BATCH_COUNTS}`,
    connectionId,
    limit,
  );
}

/**
 * Deletes up to `limit` of the connection's webhook events none of whose deliveries is still
 * pending, with their deliveries and attempts (by cascade). An event still being delivered (such
 * as the `connection.disabled` the deletion itself wrote) outlives the connection until it is
 * delivered or given up; the retention clean-up deletes it then. One whose redelivery commits
 * while this runs is kept too (`deleteFinishedEventsSql`).
 */
export async function deleteWebhookEventsBatch(db: Queryable, connectionId: string, limit: number): Promise<PurgeBatch> {
  return batch(db, deleteFinishedEventsSql('e.connection_id = $1'), connectionId, limit);
}

/** Deletes the connection row; its sync state, breaker stats, alerts and anything left cascade. */
export async function deleteConnectionRow(db: Queryable, connectionId: string): Promise<number> {
  const { rowCount } = await db.query('delete from connections where id = $1', [connectionId]);
  return rowCount ?? 0;
}

/**
 * Open purges (`pending`: their workflow may never have started, or it waits for a place of its
 * tenant's running-jobs limit; `running`: it may have ended before it completed, terminated or
 * lost with its server) created before `before` and not among `running` (those whose workflow is
 * known to run), at most `limit`, each tenant's oldest in turn (every tenant's oldest, then every
 * tenant's second oldest, …, oldest first within a turn), so one tenant's backlog (many deletions
 * while Temporal was away) does not hold another tenant's purges back for as many ticks as it
 * takes to start it: the reconcile tick starts the workflow of each. Those known to run are left
 * out by the statement, not after its limit: a tenant deleting many connections has many purges
 * waiting for a place with their workflows running, and a lost one behind them must still be found.
 */
export async function findOpenPurgesCreatedBefore(db: Queryable, before: Date, running: string[], limit: number): Promise<{ id: string; connection_id: string }[]> {
  const { rows } = await db.query<{ id: string; connection_id: string }>(
    `select id, connection_id from (
       select id, connection_id, created_at, row_number() over (partition by tenant_id order by created_at, id) as turn
         from connection_purges
        where status <> ${PURGE.completed} and created_at < $1 and not (id = any ($2::uuid[]))) open
      order by open.turn, open.created_at, open.id limit $3`,
    [before, running, limit],
  );
  return rows;
}
