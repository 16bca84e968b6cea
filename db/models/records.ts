// SQL of `records`: the synced data, keyed by (connection, resource type, external id). Pages are
// written in one statement each; an unchanged record costs no write (but its fetch time, while
// that can still order it against another version).
import type { PoolClient } from 'pg';
import { CURSOR_CLOCK_SKEW_MS } from '../../policy/cursor';
import { exactJson, parseExactJson } from '../../policy/exact-json';
import type { ConnectorRecord } from '../../policy/records';
import type { RecordChangeKind } from '../../policy/vocabulary';
import type { Queryable } from '../queryable';
import { CHANGE, MODE, PURGE, TASK } from '../sql';
import type { PartitionProgress } from './tasks';

/** Two-key advisory locks in this class are the per-connection change-feed locks. */
const FEED_LOCK_CLASS = 0x5eed;

/**
 * Takes connection `connectionId`'s change-feed lock for the rest of transaction `tx`. Every
 * transaction that gives records of a connection a new `change_seq` takes it before its first
 * `nextval`, so writers of one connection commit in sequence order: a reader that sees a value
 * sees every smaller one of that connection (a sequence value taken in one transaction could
 * otherwise commit after a larger one taken in another). Other connections are not slowed; two
 * whose ids hash alike merely take turns.
 */
export async function lockChangeFeed(tx: PoolClient, connectionId: string): Promise<void> {
  await tx.query('select pg_advisory_xact_lock($1, hashtext($2))', [FEED_LOCK_CLASS, connectionId]);
}

/**
 * lockChangeFeed without waiting: whether connection `connectionId`'s change-feed lock was taken
 * (false: another transaction holds it, a page being stored or a config change; nothing taken).
 */
export async function tryLockChangeFeed(tx: PoolClient, connectionId: string): Promise<boolean> {
  const { rows } = await tx.query<{ got: boolean }>('select pg_try_advisory_xact_lock($1, hashtext($2)) as got', [FEED_LOCK_CLASS, connectionId]);
  return rows[0]?.got === true;
}

/**
 * The database's clock now (`clock_timestamp()`), read just before a provider request: the fetch
 * time of the page (or re-check) it answers. Tombstones are written in this clock, so a page is
 * ordered against them whatever the clock of the worker that fetched it; read before the request,
 * it is never later than the fetch, so a tombstone committed after it is never undone by that page.
 */
export async function fetchTime(db: Queryable): Promise<Date> {
  const { rows } = await db.query<{ at: Date }>('select clock_timestamp() as at');
  return rows[0]!.at;
}

/** What one page's upsert did: records inserted (or back from a tombstone), changed, and left as they were. */
export interface UpsertCounts {
  added: number;
  updated: number;
  unchanged: number;
}

/**
 * An upsert's counts, how many of the page's ids were new to the full pass's seen-set, and, for a
 * job task's page, whether the run still held the task (false: nothing was written).
 */
export interface UpsertResult extends UpsertCounts {
  seen: number;
  held: boolean;
  /** With `configEpoch`: false when the connection's config changed since (nothing was written). */
  current?: boolean;
  /**
   * With `behindKnown`: the page's records, not among those, that stand behind a tombstone written
   * at or after the page's fetch (nothing was written when there are any).
   */
  behind?: string[];
}

/**
 * A job task's stored page, counted in the page's own statement: where the next page starts, how
 * many records the page served (`records`, duplicates included), and the marks per partition.
 */
export interface PageProgress {
  taskId: string;
  /** The claim token of the run storing the page: the page is written only while it holds the task. */
  claim: string;
  nextPageToken: string | null;
  records: number;
  partitions: PartitionProgress;
}

/** Whether a page fetched at $8 serving stored row `r` unchanged moves its fetch time (the `confirmed` CTE). */
const MOVES_FETCHED_AT = `((r.fetched_at is null or r.fetched_at < $8::timestamptz)
          and (r.source_updated_at is null or r.fetched_at is null or r.fetched_at < r.source_updated_at + interval '2 days'))`;

/** Whether a page serving stored row `r` unchanged notes it confirmed for a full pass running beside it (the `confirmed` CTE). */
const NOTES_CONFIRMED = `exists (select 1 from beside b where r.confirmed_at is null or r.confirmed_at < b.started_at)`;

/**
 * Whether tombstone `row` (of the upsert's statement) may have been written after the page's fetch
 * began, so the page must not undo it. A deselection's tombstone (`deselected_epoch` set) is
 * judged by counts of config changes when the page names the count its pass read its config at
 * ($4): a pass that read it at the tombstone's `deselected_epoch` or later read the config after
 * the tombstone committed, and fetched after that; one that read an earlier count may have fetched
 * before. Counts, not times: a tombstone's `deleted_at` is its transaction's start, and the count
 * says the config was read after the commit itself. Any other tombstone (a full pass's) by the
 * fetch time ($8, the database's clock read before the request: `fetchTime`), at or after which it
 * was written; a caller passing its own clock instead would let a page fetched before a tombstone
 * undo it whenever that clock runs ahead.
 */
const TOMBSTONE_AFTER_FETCH = (row: string) => `(case when ${row}.deselected_epoch is not null and $4::bigint is not null
                then $4::bigint < ${row}.deselected_epoch else ${row}.deleted_at >= $8::timestamptz end)`;

/**
 * Upserts one page of records in one statement, which takes the connection's change-feed lock
 * before it writes (the rows to write are read through the lock's CTE, so it is held before any
 * `nextval`; a job task's page locks its task row just before, see below).
 * Run on a pool (no open transaction) the statement is its own transaction: the lock is held until
 * it commits. A record whose data and updated_at are unchanged is not rewritten (data compared as
 * jsonb, by value, and, when equal by value, also as text: the database keeps a number's scale,
 * so `1.10` served for a stored `1.1` is a change, as is `1` served for a stored `1.0`), nor is one the
 * provider says is older than the stored version by more than CURSOR_CLOCK_SKEW_MS (when the stored
 * change time is believable: not later than the stored version's fetch plus that skew) unless it was
 * fetched more than that skew after the stored version was (the provider went back to it: restored
 * from a backup, say; an overlapping job's page is never that much older news), nor, when the
 * provider's change times are equal, missing or earlier by at most the skew (or the stored one is
 * past its fetch), one fetched before the stored version was (`fetched_at`: a page of an overlapping job fetched earlier and written later is
 * older news; a page serving the stored version unchanged moves its `fetched_at` up, without a feed
 * change, while the fetch time can decide: see `confirmed`); every other write takes the next `change_seq`
 * and a new `synced_at`, which never moves back (a row an earlier release dated by its worker's
 * clock, running ahead, keeps that later time). A write's `synced_at` is the
 * database's clock read once per statement just after the feed lock is taken (`clock_timestamp()`,
 * the `stamp` CTE), never the worker's: a full pass judges the records written before its start
 * (`started_at`, the database's clock), and a worker clock running ahead would date its writes past
 * the start of any pass begun within its lead, which would then keep such a record alive though the
 * provider deleted it. Read after the feed lock, not at the transaction's or the statement's start
 * (`now()`, `statement_timestamp()`, both before the wait for the lock): the connection's writers
 * hold that lock to their commit, so a write's time is later than that of every change committed
 * before it, and `synced_at` grows with `change_seq` (a feed reader filtering by `modified_after` a
 * time read from one change misses no change written after it). It is also no earlier than the
 * page's fetch (`fetchedAt`, read before the request) and no later than the commit: a record
 * written before a pass began was fetched before it, so that pass's listing is later news.
 * A tombstoned record seen again comes back as an insert, but only by a
 * page fetched after it was tombstoned (`fetchedAt` after its `deleted_at`), whatever its change
 * time (a record re-created or restored at the provider may carry an older one than the version
 * deleted): a page fetched before a full pass's deletion step and written after it is older news
 * than the tombstone. A deselection's tombstone (`deselected_epoch`, see `tombstoneDeselectedBatch`)
 * is judged by counts of config changes instead, when the page says the count its pass read its
 * config at (`readEpoch`, else `configEpoch`): it comes back only from a page of a pass that read
 * the config at that count or later, whose fetch began after the tombstone committed, whatever the
 * clocks of the API or the worker that wrote it and of the worker that fetched the page.
 * Duplicate ids within a page are written once (Postgres cannot upsert one row twice in a
 * statement) and count once: the newest by change time, of equals (or without one) the last.
 *
 * A record the page writes, or serves unchanged, while a full pass of its resource type is running
 * (one other than the page's own: `seenBy`, `progress`) is noted confirmed (`confirmed_at`, the
 * database's now(); one served unchanged once per such pass, whatever its change time), so that
 * pass's deletion step leaves it alone: its listing may have missed the record (gone for a moment,
 * created behind its position, or a listing that shifts), and a fetch after the pass began found it
 * alive. The pass's start is the database's clock too, as are a page's fetch and write times.
 *
 * With `seenBy` (a full pass's task), the same statement adds to that task's seen-set the page's
 * ids that its deletion step could otherwise judge: every id except those this statement wrote at
 * or after the task's `started_at` (a written row's `synced_at` is then at or after it, and
 * never moves back, so no deletion step of that task can take it as a candidate). The task's
 * `started_at` is its claim's `now()`, and the pass's pages are written after that claim committed,
 * by the same clock: a first full sync therefore writes no seen-set at all; a re-sync writes one
 * row per unchanged record.
 *
 * With `configEpoch` (the connection's count of config changes when the records' pass read its
 * config), the statement reads the connection's count under a share lock taken after the feed lock
 * (the locking read sees a change that committed while the statement waited for the lock, and
 * holds off one that comes later until the page commits), and writes nothing at all, not even the
 * progress, when the config changed since (`current` false): the caller stores the page again
 * under the config as it is now (it may no longer select some of these records).
 *
 * With `behindKnown` (a page of a pass that moves a cursor past what it reads), the statement also
 * reads, after the feed lock, the page's stored rows as they are now (a locking read: a tombstone
 * committed while it waited for the lock is seen, though the statement's snapshot is older), and
 * writes nothing at all, not even the progress, when a record the page serves (in whatever version,
 * the tombstone's own too) is a tombstone written at or after `fetchedAt` (a full pass's deletion
 * step that came after the page's fetch: the page cannot undo it, see above) and is not one of
 * `behindKnown`: `behind` names those ids, and the caller, whose cursor must not pass their change
 * times (the next pass reads them again, fetched after the tombstone, and brings back those still
 * alive), stores the page again naming them. Without it, no such check (and no `behind`).
 *
 * With `progress` (a job task's page), the same statement first locks the task row, and writes
 * anything at all only when the task is still `processing` under the run's claim token (`held`
 * false otherwise: a later claim took it over, or it ended); it then also counts the page into the
 * task (page token, pages, entities, added / updated / unchanged, seen-set size, marks, heartbeat)
 * and into job `jobId`'s `processed_entities`. The lock waits for a claim in progress and the row is
 * re-checked after it, so a page and a takeover never both count.
 */
export async function upsertRecords(
  db: Queryable,
  target: {
    connectionId: string;
    resourceType: string;
    jobId: string | null;
    seenBy?: string;
    /** When the provider request that served these records began: the database's clock (`fetchTime`). */
    fetchedAt: Date;
    /** Written only while the connection's count of config changes is still this one (see above). */
    configEpoch?: string;
    /** Written only while no record of the page but these stands behind a later tombstone (see above). */
    behindKnown?: readonly string[];
    /**
     * The connection's count of config changes when the records' pass read its config (`configEpoch`
     * when not given): what decides whether the page was fetched after a deselection's tombstone.
     */
    readEpoch?: string;
  },
  records: ConnectorRecord[],
  progress?: PageProgress,
): Promise<UpsertResult> {
  if (records.length === 0 && !progress) {
    return { added: 0, updated: 0, unchanged: 0, seen: 0, held: true, ...(target.configEpoch !== undefined && { current: true }), ...(target.behindKnown && { behind: [] }) };
  }
  // One id served twice in a page: its newer version is written (as across pages, an older one
  // never replaces it; the pass's cursor moves past the newer one's change time), else the later.
  const byId = new Map<string, ConnectorRecord>();
  for (const r of records) {
    const kept = byId.get(r.externalId);
    if (!kept || !(r.updatedAt !== null && kept.updatedAt !== null && Date.parse(r.updatedAt) < Date.parse(kept.updatedAt))) byId.set(r.externalId, r);
  }
  const rows = [...byId.values()].map((r) => ({ external_id: r.externalId, data: r.data, updated_at: r.updatedAt }));
  const page = exactJson(rows);
  const { rows: counts } = await db.query<{ added: number; updated: number; seen: number; held: boolean; current: boolean; behind: string[] }>(
    `with held as (select t.id from sync_tasks t where t.id = $9::uuid and t.claim = $13::uuid and t.status = ${TASK.processing} for no key update),
          -- The task row first, then the feed lock (the deletion step's order): a page the run no
          -- longer holds takes neither and reads no rows.
          feed_lock as (select pg_advisory_xact_lock($6, hashtext($1::uuid::text)) where $9::uuid is null or exists (select 1 from held)),
          -- The write time (synced_at): the database's clock once the feed lock is held, read once
          -- (a CTE calling a volatile function is computed once), so every row and the seen-set agree.
          stamp as (select clock_timestamp() as at from feed_lock),
          -- The config's count read after the feed lock (the row lock waits for it), locked FOR
          -- SHARE to the commit: the latest committed count, and no change commits before the page.
          config as (select c.config_epoch = $15::bigint as same from feed_lock, connections c where $15::bigint is not null and c.id = $1 for share of c),
          served as (select r.* from jsonb_to_recordset($5::jsonb) as r(external_id text, data jsonb, updated_at timestamptz)),
          -- The page's stored rows as they are once the feed lock is held: the row lock (taken
          -- above the join, so after the lock) reads a row's latest committed version, a tombstone
          -- written while the statement waited included (a share lock conflicts with that update;
          -- a key-share lock would not, and would read the older version). Only with $16 (a pass
          -- moving a cursor).
          stored_now as (select s.external_id, s.data, s.source_updated_at, s.deleted_at, s.deselected_epoch
                           from feed_lock, records s
                          where $16::text[] is not null and s.connection_id = $1 and s.resource_type = $2
                            and s.external_id in (select external_id from served)
                            for share of s),
          -- Served, in whatever version, as a tombstone written at or after the page's fetch says
          -- the record is gone (the upsert below never undoes it): the caller's cursor must not
          -- pass them. The version the tombstone kept too: the listing of the full pass that wrote
          -- it may have missed the record alive (past the re-checks of its deletion step).
          -- A deselection's tombstone is judged by the counts of config changes (TOMBSTONE_AFTER_FETCH).
          behind as (select s.external_id from stored_now s join served p using (external_id)
                      where s.deleted_at is not null and ${TOMBSTONE_AFTER_FETCH('s')} and s.external_id <> all($16::text[])),
          fresh as (select from feed_lock
                     where ($15::bigint is null or coalesce((select same from config), false)) and not exists (select 1 from behind)),
          page as (select r.* from fresh, served r),
          -- The full passes of the type running beside this page (not the page's own: $7, $9), by
          -- the statement's snapshot. A record this page writes, or serves unchanged, is noted
          -- confirmed (confirmed_at, the database's now(), as their start): their listings may have
          -- missed it, and their deletion steps judge no record confirmed at or after their start
          -- (see CANDIDATES), whatever the clock of the worker that fetched the page. Their jobs
          -- are unfinished (finished_at null: the index on connection, type and finish finds them).
          beside as (select t.started_at from sync_tasks t join sync_jobs j on j.id = t.job_id
                      where j.connection_id = $1 and j.job_type = ${MODE.full} and j.finished_at is null
                        and t.resource_type = $2 and t.status = ${TASK.processing}
                        and t.id is distinct from $7::uuid and t.id is distinct from $9::uuid),
          written as (
       insert into records (connection_id, resource_type, external_id, data, source_updated_at, last_seen_job_id, synced_at, fetched_at, confirmed_at)
       select $1, $2, r.external_id, r.data, r.updated_at, $3, w.at, $8, case when exists (select 1 from beside) then now() end
         from page r, stamp w
       on conflict (connection_id, resource_type, external_id) do update
          set data = excluded.data, source_updated_at = excluded.source_updated_at, fetched_at = excluded.fetched_at,
              confirmed_at = coalesce(excluded.confirmed_at, records.confirmed_at),
              last_seen_job_id = excluded.last_seen_job_id, synced_at = greatest(records.synced_at, excluded.synced_at),
              change_seq = nextval('records_change_seq'),
              change = case when records.deleted_at is null then ${CHANGE.update} else ${CHANGE.insert} end,
              deleted_at = null, deselected_epoch = null
        where (records.deleted_at is not null
               or records.data is distinct from excluded.data
               or records.source_updated_at is distinct from excluded.source_updated_at
               -- jsonb compares numbers by value (1.1 equals 1.10, 1.0 equals 1) but keeps each as
               -- written: a number spelled otherwise (the provider's 1.10 for a stored 1.1, or 1
               -- for a stored 1.0) is a change of the data served. Either side may hold the point,
               -- so every row equal by value is compared as text too (a few microseconds a row).
               or records.data::text is distinct from excluded.data::text)
          -- Never replace a newer version with an older one (two jobs of a connection can overlap):
          -- by the provider's change times when they differ and the stored one is believable (not
          -- after the stored version was fetched, less the clock skew: a provider clock gone wrong
          -- once must not freeze the record), else by when each was fetched. A change time earlier
          -- than the stored one by no more than the clock skew orders nothing either: a provider's
          -- servers' clocks differ by that much, so the next edit may carry a second or two less
          -- than the last; the fetch times decide (else that version would be dropped by every
          -- pass, full ones too, until the record changed again).
          -- A tombstone orders nothing: a page fetched after it (checked below) found the record
          -- alive again, so the provider has it as served, whatever its change time (a record
          -- re-created or restored carries its own, possibly older than the version deleted).
          -- A page fetched more than the skew after the stored version was fetched is the
          -- provider's word now, whatever its change time: it went back to that version (restored
          -- from a backup, say), and no overlapping job's page can be that much older news.
          and (records.deleted_at is not null or case when records.source_updated_at <> excluded.source_updated_at
                     and records.source_updated_at <= coalesce(records.fetched_at, records.synced_at) + $14 * interval '1 millisecond'
                    then excluded.source_updated_at > records.source_updated_at
                         or (excluded.source_updated_at >= records.source_updated_at - $14 * interval '1 millisecond'
                             and (records.fetched_at is null or $8::timestamptz >= records.fetched_at))
                         or $8::timestamptz > coalesce(records.fetched_at, records.synced_at) + $14 * interval '1 millisecond'
                    else records.fetched_at is null or $8::timestamptz >= records.fetched_at end)
          -- Never undo a tombstone with a page fetched before it was written (or, a deselection's,
          -- read under a config counted before it: see TOMBSTONE_AFTER_FETCH).
          and (records.deleted_at is null or not ${TOMBSTONE_AFTER_FETCH('records')})
       returning records.external_id, records.change),
          -- A record served unchanged by a page fetched after its stored fetch time was confirmed at
          -- that fetch: its fetched_at moves up (no feed position, not counted as written), so a
          -- page of an overlapping job fetched between the two (a version the provider has since
          -- gone back from) is older news, not newer. Only where the fetch time can decide: when
          -- the record has no provider change time, or was fetched less than two days after it (a
          -- version carrying the same change time is served only within the provider's resolution,
          -- at most a day, and the clock skew after it), so a re-sync of records changed earlier
          -- still costs no write. Nothing reads this CTE, so it runs after the main query, which
          -- has read written whole: a row is never updated here before the upsert meets it.
          --
          -- A record served unchanged while a full pass of the type runs beside (see beside) is
          -- also noted confirmed, once per such pass whatever its change time.
          confirmed as (
       update records r
          set fetched_at = case when ${MOVES_FETCHED_AT} then $8::timestamptz else r.fetched_at end,
              confirmed_at = case when ${NOTES_CONFIRMED} then now() else r.confirmed_at end
         -- Only the page's ids the upsert did not write: a new or changed record needs no
         -- confirmation, and leaving it out spares a lookup per record of a page of new ones.
         from (select p.* from page p where not exists (select 1 from written w where w.external_id = p.external_id)) p
        where r.connection_id = $1 and r.resource_type = $2 and r.external_id = p.external_id
          and r.deleted_at is null and r.data is not distinct from p.data and r.source_updated_at is not distinct from p.updated_at
          and (${MOVES_FETCHED_AT} or ${NOTES_CONFIRMED})),
          -- A row written here at or after the pass's start is no deletion candidate of that pass
          -- (its synced_at never moves back): only the other ids need the seen-set.
          seen as (insert into sync_seen (task_id, external_id)
                   select $7, p.external_id from page p
                    where $7::uuid is not null
                      and not (coalesce((select at from stamp) >= (select t.started_at from sync_tasks t where t.id = $7), false)
                               and exists (select 1 from written w where w.external_id = p.external_id))
                   on conflict do nothing returning 1),
          counted as (
       select (select count(*) from written where change = ${CHANGE.insert})::int as added,
              (select count(*) from written where change = ${CHANGE.update})::int as updated,
              (select count(*) from page)::int as distinct_ids,
              (select count(*) from seen)::int as seen),
          task as (
       update sync_tasks t set page_token = $10, pages_done = t.pages_done + 1, entity_count = t.entity_count + $11,
              written_count = t.written_count + c.added + c.updated, added_count = t.added_count + c.added, updated_count = t.updated_count + c.updated,
              unchanged_count = t.unchanged_count + (c.distinct_ids - c.added - c.updated), partition_progress = $12::jsonb,
              seen_count = t.seen_count + c.seen, heartbeat_at = now()
         from counted c, held h, fresh
        where t.id = h.id),
          job as (update sync_jobs set processed_entities = processed_entities + $11 where id = $3 and exists (select 1 from held) and exists (select 1 from fresh))
     select added, updated, seen, ($9::uuid is null or exists (select 1 from held)) as held,
            ($15::bigint is null or coalesce((select same from config), false)) as current,
            array(select external_id from behind order by external_id) as behind from counted`,
    [
      target.connectionId, target.resourceType, target.jobId, target.readEpoch ?? target.configEpoch ?? null, page, FEED_LOCK_CLASS, target.seenBy ?? null, target.fetchedAt,
      progress?.taskId ?? null, progress?.nextPageToken ?? null, progress?.records ?? 0, progress ? JSON.stringify(progress.partitions) : null,
      progress?.claim ?? null, CURSOR_CLOCK_SKEW_MS, target.configEpoch ?? null, target.behindKnown ? [...target.behindKnown] : null,
    ],
  );
  const { added, updated, seen, held, current, behind } = counts[0]!;
  const wrote = held && current && behind.length === 0;
  return {
    added, updated, unchanged: wrote ? rows.length - added - updated : 0, seen, held,
    ...(target.configEpoch !== undefined && { current }), ...(target.behindKnown && { behind }),
  };
}

/** Which unseen records a full pass's deletion step may judge (see `listDeletionCandidates`). */
const CANDIDATES = `r.connection_id = $1 and r.resource_type = $2 and r.deleted_at is null
        and not exists (select 1 from sync_seen s where s.task_id = $3 and s.external_id = r.external_id)
        and r.synced_at < (select started_at from sync_tasks where id = $3)
        and (r.confirmed_at is null or r.confirmed_at < (select started_at from sync_tasks where id = $3))
        and (r.source_updated_at is null or r.source_updated_at < $4)`;

/**
 * Up to `limit` of the records a full pass (task `taskId`) may delete, by id: live records of
 * `resourceType` it did not see, written before the pass began (`synced_at` before its task's
 * `started_at`, both the database's clock: a record written by a job running beside it is not the
 * pass's to judge), nor served unchanged by a page of another job stored since the pass began
 * (`confirmed_at`, the database's clock too, see `upsertRecords`: that fetch is later news than
 * the listing that missed the record, or else the pass leaves it to the next full pass to judge)
 * and changed at the provider before `changedBefore` (the
 * pass start less the clock skew: a record changed during the pass was alive then, whatever the
 * listing served). The least recently fetched come first (never fetched since `fetched_at` was
 * added, first of all; then by id): a re-check that finds a record alive notes its fetch
 * (`confirmFetched`), so records a listing leaves out but that are always alive cannot take every
 * pass's re-checks, and each candidate is reached in turn.
 */
export async function listDeletionCandidates(
  db: Queryable,
  connectionId: string,
  resourceType: string,
  taskId: string,
  changedBefore: Date,
  limit: number,
): Promise<string[]> {
  const { rows } = await db.query<{ external_id: string }>(
    `select r.external_id from records r where ${CANDIDATES} order by r.fetched_at nulls first, r.external_id limit $5`,
    [connectionId, resourceType, taskId, changedBefore, limit],
  );
  return rows.map((r) => r.external_id);
}

/**
 * Notes that the provider served `records` at `fetchedAt` exactly as they are stored (live, the
 * same data and change time): their `fetched_at` moves to it (never back). No `change_seq`: nothing
 * changed. A record stored otherwise (an overlapping job wrote another version) is left alone.
 * Returns how many it noted.
 */
export async function confirmFetched(
  db: Queryable,
  target: { connectionId: string; resourceType: string; fetchedAt: Date },
  records: readonly ConnectorRecord[],
): Promise<number> {
  if (records.length === 0) return 0;
  const rows = records.map((r) => ({ external_id: r.externalId, data: r.data, updated_at: r.updatedAt }));
  const { rowCount } = await db.query(
    `update records r set fetched_at = $3
       from jsonb_to_recordset($4::jsonb) as p(external_id text, data jsonb, updated_at timestamptz)
      where r.connection_id = $1 and r.resource_type = $2 and r.external_id = p.external_id and r.deleted_at is null
        and r.data = p.data and r.source_updated_at is not distinct from p.updated_at
        and (r.fetched_at is null or r.fetched_at < $3)`,
    [target.connectionId, target.resourceType, target.fetchedAt, exactJson(rows)],
  );
  return rowCount ?? 0;
}

/**
 * The deletion step of a full pass: turns deletion candidates (as `listDeletionCandidates`
 * defines them) into tombstones (`deleted_at`, a new `change_seq`, data kept), under the
 * change-feed lock: every candidate but the `except` ids, or with `only`, just those of them.
 * `deleted_at` is the database's clock (the transaction's start, `now()`), never the caller's: a
 * page's fetch time is the database's clock too (`fetchTime`), and a page fetched before the
 * tombstone must read as older than it (see `upsertRecords`); a worker clock behind the database's
 * would date the tombstone before such a page, which would then undo it. The transaction starts
 * after the pass's re-checks were fetched, so a page fetched after it began is later news.
 * A tombstone's `synced_at` is the database's clock read in the statement, after the change-feed
 * lock is held (`clock_timestamp()`, as a page's write time, see `upsertRecords`), or the record's
 * own if later: as for every write, it never moves back (a row an earlier release dated by its
 * worker's clock, running ahead, keeps that time), so a reader filtering by `modified_after` past
 * the record's last write still sees the deletion.
 * Returns how many it tombstoned.
 */
export async function tombstoneUnseenRecords(
  tx: PoolClient,
  target: { connectionId: string; resourceType: string; taskId: string; changedBefore: Date },
  which: { except: readonly string[] } | { only: readonly string[] },
): Promise<number> {
  await lockChangeFeed(tx, target.connectionId);
  const only = 'only' in which ? [...which.only] : null;
  const except = 'except' in which ? [...which.except] : [];
  if (only !== null && only.length === 0) return 0;
  const { rowCount } = await tx.query(
    `update records r set deleted_at = now(), synced_at = greatest(r.synced_at, clock_timestamp()), change = ${CHANGE.delete}, change_seq = nextval('records_change_seq')
      where ${CANDIDATES}
        and ($5::text[] is null or r.external_id = any($5::text[]))
        and r.external_id <> all($6::text[])`,
    [target.connectionId, target.resourceType, target.taskId, target.changedBefore, only, except],
  );
  return rowCount ?? 0;
}

/**
 * Records of a connection's resource type one deselection batch visits (and so tombstones) at
 * most: a config change's request runs one, the reconcile tick several, each its own transaction.
 */
export const DESELECTION_BATCH = 1000;

/**
 * One batch of a deselection (see `pending_deselections`): visits up to `limit` records of
 * connection `connectionId`'s `resourceType` in id order after `afterId` (empty: from the start)
 * and tombstones those of them that are live, have an id starting with `idPrefix`
 * (empty: all of the type) and with none of `keep` (the prefixes of the partitions the config
 * names again). Each gets `deleted_at`, a new `change_seq` and the `delete` change (data kept),
 * once: a tombstone is not live. Its `synced_at` never moves back (see `tombstoneUnseenRecords`).
 * Both are the database's clock (`deleted_at` the transaction's start, `now()`; `synced_at` read
 * after the feed lock is held, `clock_timestamp()`, as every write's, see `upsertRecords`), never
 * the caller's: the caller is the API process or
 * the tick's worker, and a record a config selects again keeps the later of its tombstone's
 * `synced_at` and the page's that brings it back, which a full pass compares with its start (the
 * database's clock): a caller's clock running ahead would keep the record out of every full pass's
 * deletion step, deleted at the provider since, until the database's clock caught up.
 * Each also gets `deselected_epoch`: the least count of config changes a pass must have read its
 * config at for its fetches to have begun after the tombstone commits (the only test of that a
 * page applies to it, see `upsertRecords`; never the clocks): the connection's count as this
 * transaction reads it when `countedChange` (the config change counted in it commits with the
 * tombstone), else the next count (the reconcile tick, which changes no config: a pass that read
 * the count as it stands may have read the config before this commits; the tick holds the config's
 * share lock to the commit, so a later count commits after it).
 * The work is bounded by `limit` however many records the type
 * holds (a repository's records among many others' are reached batch by batch). Run under the
 * connection's change-feed lock, taken here (a page stored after it by a pass of an older config
 * re-reads the config under it). Returns how many it tombstoned, how many it visited (fewer than
 * `limit`: none is left past them) and the last id it visited (where the next batch starts).
 */
export async function tombstoneDeselectedBatch(
  tx: PoolClient,
  target: { connectionId: string; countedChange: boolean },
  unit: { resourceType: string; idPrefix: string; keep: readonly string[]; afterId: string; limit: number },
): Promise<{ tombstoned: number; visited: number; last: string | null }> {
  await lockChangeFeed(tx, target.connectionId);
  const { rows } = await tx.query<{ tombstoned: number; visited: number; last: string | null }>(
    `with visited as (
       select r.external_id,
              r.deleted_at is null and starts_with(r.external_id, $3)
                and not exists (select 1 from unnest($4::text[]) as k(prefix) where starts_with(r.external_id, k.prefix)) as goes
         from records r
        where r.connection_id = $1 and r.resource_type = $2 and r.external_id >= $5 and (r.external_id <> $5 or $5 = '')
        order by r.external_id limit $6),
          done as (
       update records r set deleted_at = now(), synced_at = greatest(r.synced_at, clock_timestamp()), change = ${CHANGE.delete}, change_seq = nextval('records_change_seq'),
              deselected_epoch = (select c.config_epoch + case when $7::boolean then 0 else 1 end from connections c where c.id = $1)
         from visited v
        where v.goes and r.connection_id = $1 and r.resource_type = $2 and r.external_id = v.external_id and r.deleted_at is null
       returning 1)
     select (select count(*) from done)::int as tombstoned, (select count(*) from visited)::int as visited,
            (select v.external_id from visited v order by v.external_id desc limit 1) as last`,
    [target.connectionId, unit.resourceType, unit.idPrefix, [...unit.keep], unit.afterId, unit.limit, target.countedChange],
  );
  return rows[0] ?? { tombstoned: 0, visited: 0, last: null };
}

/** One change of the feed: a record as it is after its latest write. */
export interface RecordChange {
  /** The feed position (a bigint, as a string). */
  change_seq: string;
  external_id: string;
  resource_type: string;
  /** As stored: numbers a double does not hold are `JsonNumber`s (write it with `exactJson`). */
  data: unknown;
  /**
   * When the provider last changed the record, as stored (to the microsecond: a provider may give
   * more than a Date holds), in ISO 8601 UTC: to the millisecond (`…00.500Z`), or to the
   * microsecond (`…00.123456Z`) when its microseconds are not a whole millisecond.
   */
  source_updated_at: string | null;
  synced_at: Date;
  deleted_at: Date | null;
  change: RecordChangeKind;
}

/**
 * The most changes of its scope (the connection's, or its resource type's) after its position one
 * read filtering by `modifiedAfter` examines. The filter leaves out every change written before
 * it, and a connection's history before a recent `modifiedAfter` may be millions of changes: walked
 * whole, one read is seconds of the database every tenant shares, past the API's statement timeout
 * it fails every time, and an empty page whose cursor did not move walks it all again on the next
 * poll. Ten thousand, walked one by one, are some tens of milliseconds (about 50 ms on a
 * development machine); a reader passes a million left-out changes in a hundred reads.
 */
export const FEED_SCAN_BUDGET = 10_000;

/** Which changes to read: of connection `connectionId` after position `afterSeq`, at most `limit`. */
export interface ChangesRead {
  connectionId: string;
  afterSeq: string;
  limit: number;
  resourceType?: string;
  modifiedAfter?: Date;
  /**
   * The page's byte budget: changes are added while their data and ids, as the database prints
   * them, stay within it; the first change always comes, however large. Unset: no budget.
   */
  maxBytes?: number;
}

/**
 * One page of changes; whether the byte budget cut it short of a change that followed; whether a
 * read filtering by `modifiedAfter` ran out of its scan budget before the page was full; and the
 * position of the last change it examined (held, or left out by the filter; null when none).
 */
export interface ChangesReadPage {
  changes: RecordChange[];
  cut: boolean;
  spent: boolean;
  examined: string | null;
}

/**
 * Timestamp `column` as ISO 8601 UTC text to the microsecond stored, written as `toISOString` writes
 * a Date (three fraction digits) unless the microseconds are not a whole millisecond (six). The
 * driver would read it as a Date, to the millisecond: a provider's change time of `.123456` would
 * be served as `.123`.
 */
const microsecondIso = (column: string) =>
  `to_char(${column} at time zone 'UTC', case when extract(microseconds from ${column})::bigint % 1000 = 0
                                              then 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"' else 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"' end)`;

/**
 * A connection's changes after position `afterSeq`, in feed order, at most `limit` and within
 * `maxBytes`: each record once, in its latest state (a record changed twice since `afterSeq`
 * appears once, at its latest position). Optionally only one resource type, or only changes
 * written after `modifiedAfter`. The budget is applied in the statement, so the rows past it are
 * never sent (a page of `limit` records of the largest size a provider may send would otherwise be
 * built whole in the reading process): a row's size is its id and its data as the database prints
 * it (the text the page reads anyway, never less than the JSON the API writes of it), and the rows
 * are taken in order, each printed once, until the next one would pass the budget, so only the
 * rows served and the one after them are printed (read out of storage), whatever their stored
 * size (larger than printed for small uncompressed values, smaller for compressed ones).
 * A read filtering by `modifiedAfter` examines at most FEED_SCAN_BUDGET changes of its scope (the
 * changes the filter leaves out are walked, never printed): the page ends at the budget however
 * short (`spent`), and `examined` is where the next read goes on. Without the filter every change
 * examined is held, so `examined` is the page's last change and the budget never applies.
 */
export async function readChangesPage(db: Queryable, query: ChangesRead): Promise<ChangesReadPage> {
  // The next change after position w.change_seq (after $2 for the first), whether the filter holds
  // it (`hit`), and its data printed if so. A reader of one type reads it from
  // records_feed_type_idx, at its type's first change after the position:
  // from records_feed_idx it would walk every change of the connection's other types up to that
  // one, and again on every poll while its type is quiet (its cursor does not move). The type is
  // selected by a range and ordered on, an order records_feed_idx does not give: for an equality the
  // planner chose between the two by how common the type is, and took records_feed_idx for the type
  // of most of a connection's changes even where another type's run stood behind the cursor.
  // modified_after is no condition of the search but a mark on what it finds: as a condition, the
  // search for a change written after it walked every change of the scope written before it (a
  // connection's whole history, for a first read of the changes since a recent time).
  const ofType = query.resourceType === undefined
    ? { where: '$3::text is null', order: 'r.change_seq' }
    : { where: 'r.resource_type between $3::text and $3::text', order: 'r.resource_type, r.change_seq' };
  const hit = '($4::timestamptz is null or r.synced_at > $4)';
  const next = (after: string) => `(select r.change_seq, r.external_id, r.resource_type, ${hit} as hit, case when ${hit} then r.data::text end as text,
              r.source_updated_at, r.synced_at, r.deleted_at, r.change
         from records r
        where r.connection_id = $1 and ${ofType.where} and r.change_seq > ${after}
        order by ${ofType.order} limit 1)`;
  const bytes = (x: string) => `case when ${x}.hit then octet_length(${x}.text) + octet_length(${x}.external_id) else 0 end`;
  const { rows } = await db.query<Omit<RecordChange, 'data' | 'change_seq'> & { change_seq: string | null; data: string; examined: string | null; spent: boolean; cut: boolean }>(
    `with recursive walk as (
       -- The scope's changes in feed order, one by one: \`n\`, how many the filter holds through
       -- this one; \`over\`, one it holds that the bytes through it would pass the budget with (the
       -- page ends before it; the first one held always comes). The walk ends with a full page, at
       -- such a change, at the scope's end, or, filtering, after FEED_SCAN_BUDGET changes.
       select 1 as examined, x.hit::int as n, x.*, ${bytes('x')} as through, false as over
         from ${next('$2::bigint')} x
       union all
       select w.examined + 1, w.n + x.hit::int, x.*, w.through + ${bytes('x')},
              x.hit and w.n > 0 and $6::bigint is not null and w.through + ${bytes('x')} > $6::bigint
         from walk w cross join lateral ${next('w.change_seq')} x
        where not w.over and w.n < $5 and ($4::timestamptz is null or w.examined < $7)),
          summary as (
       select max(w.change_seq) filter (where not w.over)::text as examined,
              $4::timestamptz is not null and coalesce(max(w.examined), 0) >= $7 as spent,
              coalesce(bool_or(w.over), false) as cut
         from walk w)
     select p.change_seq::text as change_seq, p.external_id, p.resource_type, p.text as data,
            ${microsecondIso('p.source_updated_at')} as source_updated_at, p.synced_at, p.deleted_at, p.change,
            s.examined, s.spent, s.cut
       from summary s left join walk p on p.hit and not p.over
      order by p.examined`,
    [query.connectionId, query.afterSeq, query.resourceType ?? null, query.modifiedAfter ?? null, query.limit, query.maxBytes ?? null, FEED_SCAN_BUDGET],
  );
  // One row at least: the summary's (with no change when the page is empty).
  const summary = rows[0];
  // The data as its text, read here with its numbers as stored (jsonb keeps every digit; the
  // driver's own reader would make each a double).
  const changes = rows
    .filter((row) => row.change_seq !== null)
    .map(({ examined: _e, spent: _s, cut: _c, data, change_seq, ...change }): RecordChange => ({ ...change, change_seq: change_seq!, data: parseExactJson(data) }));
  const cut = summary?.cut === true;
  return { changes, cut, spent: summary?.spent === true && !cut && changes.length < query.limit, examined: summary?.examined ?? null };
}

/** Two-key advisory locks in this class: (class, 0) is held by every tombstone purge while it writes. */
const PURGE_LOCK_CLASS = 0x5eee;

/** Whether a feed cursor may still be read on, and the purge epoch a cursor issued now carries. */
export interface FeedExpiry {
  /**
   * False when the cursor names a position or a purge epoch past any the feed has issued (the
   * sequences' last values): such a cursor was not made by this feed, and read on it would pass
   * over the changes (or the purges) that later take the positions (or the epochs) up to it.
   */
  issued: boolean;
  /**
   * The highest position of a tombstone in the reader's scope that a purge after the cursor's
   * epoch removed past the cursor's position; null when none did (the cursor is good).
   */
  purged_through: string | null;
  /** The newest purge this snapshot sees: cursors issued from it carry it. */
  epoch: string;
  /** The connection's open purge (one not completed) in this snapshot, or null. */
  purge_id: string | null;
}

/**
 * Judges a feed cursor of connection `connectionId` at position `afterSeq`, issued at purge epoch
 * `epoch`, for a reader of `resourceType` (or of every type): it has expired only when a purge the
 * cursor's issuer had not seen removed a tombstone of that scope past its position (a deletion
 * the reader would otherwise never learn of). Also answers the current epoch, and whether the
 * cursor's position and epoch are ones the feed could have issued, and the connection's open
 * purge (a deletion under way). Null when the connection does not exist.
 */
export async function findFeedExpiry(
  db: Queryable,
  cursor: { connectionId: string; afterSeq: string; epoch: string; resourceType?: string },
): Promise<FeedExpiry | null> {
  const { rows } = await db.query<FeedExpiry>(
    `select (select max(p.purged_seq)::text from feed_purges p
              where p.connection_id = c.id and ($2::text is null or p.resource_type = $2)
                and p.id > $3::bigint and p.purged_seq > $4::bigint) as purged_through,
            (select coalesce(max(id), 0)::text from feed_purges) as epoch,
            -- A sequence's last value is never rolled back: every position and epoch a cursor was
            -- issued with is at most its sequence's last value taken (none taken: last_value less one).
            ($4::bigint <= (select last_value - (not is_called)::int from records_change_seq)
             and $3::bigint <= (select last_value - (not is_called)::int from feed_purges_id_seq)) as issued,
            (select p.id from connection_purges p where p.connection_id = c.id and p.status <> ${PURGE.completed} limit 1) as purge_id
       from connections c where c.id = $1`,
    [cursor.connectionId, cursor.resourceType ?? null, cursor.epoch, cursor.afterSeq],
  );
  return rows[0] ?? null;
}

/** Where a feed cursor of a connection issued now would stand: its latest change and the purge epoch. */
export interface FeedHead {
  seq: string;
  epoch: string;
}

/** The feed head of connection `connectionId` (position '0' when it has no records). */
export async function findFeedHead(db: Queryable, connectionId: string): Promise<FeedHead> {
  const { rows } = await db.query<FeedHead>(
    `select (select coalesce(max(change_seq), 0)::text from records where connection_id = $1) as seq,
            (select coalesce(max(id), 0)::text from feed_purges) as epoch`,
    [connectionId],
  );
  return rows[0]!;
}

/**
 * Hard-deletes up to `limit` tombstones older than `before`, in one statement, and logs per
 * connection and resource type the highest position removed (`feed_purges`), deleting the log
 * rows that the new one covers. Purges hold one lock while they write, so they commit in the
 * order of their log ids (a reader's snapshot sees every purge up to an id, none after it). A
 * record seen again since (no longer a tombstone) is left alone, and so is one another
 * transaction holds (a connection's deletion deleting it, a page writing it): the purge never
 * waits for a record while holding others, so it and a deletion taking the same tombstones in
 * another order never deadlock; a tombstone passed by is purged by a later run (or deleted by its
 * holder). Returns how many it deleted.
 */
export async function purgeTombstonesBatch(db: Queryable, before: Date, limit: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `with purge_lock as (select pg_advisory_xact_lock($3, 0)),
          -- Locked here, passing by any another transaction holds: the purge never waits for a
          -- record while holding others (a connection's deletion takes them in its own order).
          doomed as (select r.ctid from purge_lock, records r where r.deleted_at < $1 limit $2 for update of r skip locked),
          purged as (delete from records r using doomed d where r.ctid = d.ctid and r.deleted_at < $1
                     returning r.connection_id, r.resource_type, r.change_seq),
          logged as (insert into feed_purges (connection_id, resource_type, purged_seq)
                     select connection_id, resource_type, max(change_seq) from purged group by connection_id, resource_type
                     returning connection_id, resource_type, purged_seq),
          covered as (delete from feed_purges o using logged l
                       where o.connection_id = l.connection_id and o.resource_type = l.resource_type and o.purged_seq <= l.purged_seq)
     select count(*)::int as n from purged`,
    [before, limit, PURGE_LOCK_CLASS],
  );
  return rows[0]!.n;
}
