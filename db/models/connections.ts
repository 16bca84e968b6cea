// SQL of the `connections` table: one statement per function, typed rows. Credentials are read
// only by the functions that hand them to a connector (`findSyncSource`, the task claim in
// tasks.ts); every other read shows only whether a connection has any.
import type { PoolClient } from 'pg';
import {
  MIN_INTERVAL_SECONDS,
  parseSchedule,
  resolveSchedule,
  scheduleFields,
  type PlannedRun,
  type ResolvedSchedule,
  type Schedule,
  type ScheduleSettings,
} from '../../policy/schedule';
import { CONNECTION_STATUS, CONNECTION_STATUSES, type ConnectionStatus, type CredentialKind, type SettableConnectionStatus } from '../../policy/vocabulary';
import type { Queryable } from '../queryable';
import { ACTIVE_JOBS, CONNECTION, CREDENTIAL, JOB, PURGE, TRIGGER } from '../sql';
import { pausedUntilAt } from './breaker';
import { runningBeside } from './jobs';

/** A connection as the API shows it: never its credentials, only whether it has any. */
export interface ConnectionRow {
  id: string;
  tenant_id: string;
  provider_slug: string;
  app_key: string;
  status: ConnectionStatus;
  /**
   * While `needs_reauth`: the status new credentials give back (active or paused). On a disabled
   * connection: set when it was disabled while it needed reauthorization (the refusal stands; a
   * resume makes it `needs_reauth` again). Null otherwise.
   */
  status_before_reauth: SettableConnectionStatus | null;
  config: Record<string, unknown>;
  has_credentials: boolean;
  credential_kind: CredentialKind;
  /** The OAuth app of an `oauth2` credential, else null. */
  oauth_app_id: string | null;
  /** The OAuth 2 grant of an `oauth2` credential (shared by the connections naming it), else null. */
  oauth_grant_id: string | null;
  /** The stored schedule; null when none is stored (or none valid): the default interval applies. */
  schedule: Schedule | null;
  /** The planner's bookkeeping in `metadata.sync`: the next run and the jitter it drew. */
  next_run_at: string | null;
  last_jitter_seconds: number | null;
  created_at: Date;
  updated_at: Date;
}

/** A connection row as selected, before `connectionOf` reads its `metadata.sync`. */
type StoredConnection = Omit<ConnectionRow, 'schedule' | 'next_run_at' | 'last_jitter_seconds'> & { sync: unknown };

/** The select list that produces a StoredConnection from `connections c`. */
const CONNECTION_COLUMNS = `c.id, c.tenant_id, c.provider_slug, c.app_key, c.status, c.status_before_reauth, c.config,
  (c.credentials is not null or c.oauth_grant_id is not null) as has_credentials, c.credential_kind, c.oauth_app_id, c.oauth_grant_id, c.metadata -> 'sync' as sync, c.created_at, c.updated_at`;

/** Reads a stored schedule as stored: bounded by what a schedule may be, not by this deployment's maximum. */
const AS_STORED = { maxOverriddenIntervalSeconds: Number.POSITIVE_INFINITY };

/**
 * The row mapper of `metadata.sync`: the schedule through the one parser (`parseSchedule`), the
 * planner's bookkeeping by type. Every function answering a ConnectionRow answers through it.
 */
function connectionOf({ sync, ...row }: StoredConnection): ConnectionRow {
  const stored = (sync ?? {}) as Record<string, unknown>;
  return {
    ...row,
    schedule: parseSchedule(sync, AS_STORED).schedule,
    next_run_at: typeof stored.next_run_at === 'string' ? stored.next_run_at : null,
    last_jitter_seconds: typeof stored.last_jitter_seconds === 'number' ? stored.last_jitter_seconds : null,
  };
}

/**
 * The `metadata.sync` object a schedule is stored as (with `scheduleFields`' spelling), merged over
 * the stored one after removing every schedule key, so the stored schedule is exactly `schedule`.
 */
const STORE_SCHEDULE = (sync: string, json: string) =>
  `(coalesce(${sync}, '{}'::jsonb) - 'interval_seconds' - 'cron' - 'timezone' - 'full_sync_every') || ${json}`;

/** The connection with id `id`, or null. */
export async function findConnection(db: Queryable, id: string): Promise<ConnectionRow | null> {
  const { rows } = await db.query<StoredConnection>(`select ${CONNECTION_COLUMNS} from connections c where c.id = $1`, [id]);
  return rows[0] ? connectionOf(rows[0]) : null;
}

/**
 * The connection with id `id`, locked `FOR NO KEY UPDATE` until the transaction ends (waiting for
 * a writer of the row, such as a disable or a purge, to commit first), or null. A command that
 * decides from the row what to write reads it here, so no other write lands between its reading
 * and its writing. Never FOR UPDATE (see `lockConnectionSkipLocked`).
 */
export async function lockConnection(tx: PoolClient, id: string): Promise<ConnectionRow | null> {
  const { rows } = await tx.query<StoredConnection>(`select ${CONNECTION_COLUMNS} from connections c where c.id = $1 for no key update`, [id]);
  return rows[0] ? connectionOf(rows[0]) : null;
}

/**
 * Connection `id`'s status, its row locked against updates until the transaction ends (FOR SHARE):
 * no status change commits meanwhile, and the scheduler's enqueue (FOR NO KEY UPDATE SKIP LOCKED)
 * finds it locked. Null when it is gone. FOR SHARE, never stronger, for a holder that then writes
 * the connection's jobs or tasks: a page's store holds those rows and then reads the config FOR
 * SHARE, which a stronger lock would make wait on its holder, while the holder waits on the page.
 */
export async function lockStatusForShare(tx: PoolClient, id: string): Promise<ConnectionStatus | null> {
  const { rows } = await tx.query<{ status: ConnectionStatus }>('select status from connections where id = $1 for share', [id]);
  return rows[0]?.status ?? null;
}

/**
 * Connection `id`'s config, its row locked against updates until the transaction ends (FOR SHARE):
 * a config change that commits first is read, one that comes later waits. Null when it is gone.
 */
export async function lockConfigForShare(tx: PoolClient, id: string): Promise<Record<string, unknown> | null> {
  const { rows } = await tx.query<{ config: Record<string, unknown> | null }>('select config from connections where id = $1 for share', [id]);
  return rows[0] ? (rows[0].config ?? {}) : null;
}

/** Tenant `tenantId`'s connection with app key `appKey` (unique per tenant), or null. */
export async function findConnectionByAppKey(db: Queryable, appKey: string, tenantId: string): Promise<ConnectionRow | null> {
  const { rows } = await db.query<StoredConnection>(`select ${CONNECTION_COLUMNS} from connections c where c.app_key = $1 and c.tenant_id = $2`, [appKey, tenantId]);
  return rows[0] ? connectionOf(rows[0]) : null;
}

/**
 * The id of the connection holding (`tenantId`, `appKey`), or null, its row key-share locked until
 * the end of the caller's transaction: a deletion of the row under way (a purge's last
 * transaction) is waited for, and then answers null; none can begin until the transaction ends.
 */
export async function lockConnectionByAppKey(tx: Queryable, appKey: string, tenantId: string): Promise<{ id: string } | null> {
  const { rows } = await tx.query<{ id: string }>('select id from connections where app_key = $1 and tenant_id = $2 for key share', [appKey, tenantId]);
  return rows[0] ?? null;
}

/** What may refuse a sync of a connection, read in one statement. */
export interface SyncBlockers {
  /** The connection's status now; null when the connection no longer exists. */
  status: ConnectionStatus | null;
  /** The id of its open (not completed) purge, or null. */
  purge_id: string | null;
  /** Its circuit breaker's pause in force at the time asked about, or null. */
  paused_until: Date | null;
}

/** The select list of SyncBlockers' purge and pause, of connection `connectionColumn` at time `atParam`. */
const blockerColumns = (connectionColumn: string, atParam: string) =>
  `(select p.id from connection_purges p where p.connection_id = ${connectionColumn} and p.status <> ${PURGE.completed} limit 1) as purge_id,
   ${pausedUntilAt(connectionColumn, atParam)} as paused_until`;

/** Connection `connectionId`'s status, open purge and breaker pause in force at `at`, as of one statement. */
export async function findSyncBlockers(db: Queryable, connectionId: string, at: Date): Promise<SyncBlockers> {
  const { rows } = await db.query<SyncBlockers>(
    `select (select c.status from connections c where c.id = $1) as status, ${blockerColumns('$1', '$2')}`,
    [connectionId, at],
  );
  return rows[0]!; // a select without FROM always returns one row
}

/**
 * Tenant `tenantId`'s connection with app key `appKey`, with what may refuse a sync of it at `at`
 * (as findSyncBlockers), read in one statement; null when there is no such connection.
 */
export async function findSyncTargetByAppKey(
  db: Queryable,
  appKey: string,
  tenantId: string,
  at: Date,
): Promise<{ connection: ConnectionRow; blockers: SyncBlockers } | null> {
  const { rows } = await db.query<StoredConnection & Omit<SyncBlockers, 'status'>>(
    `select ${CONNECTION_COLUMNS}, ${blockerColumns('c.id', '$3')} from connections c where c.app_key = $1 and c.tenant_id = $2`,
    [appKey, tenantId, at],
  );
  if (!rows[0]) return null;
  const { purge_id, paused_until, ...stored } = rows[0];
  const connection = connectionOf(stored);
  return { connection, blockers: { status: connection.status, purge_id, paused_until } };
}

/** Whether the database holds any connection at all. */
export async function anyConnectionExists(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ exists: boolean }>('select exists (select 1 from connections) as exists');
  return rows[0]!.exists;
}

/** A new connection. */
export interface NewConnection {
  /** Chosen by the caller: the sealed credentials are bound to it. */
  id: string;
  tenantId: string;
  providerSlug: string;
  appKey: string;
  config: Record<string, unknown>;
  /** Sealed credentials (an envelope), or null. */
  sealedCredentials: string | null;
  /** Stored in `metadata.sync`; null: the default interval. */
  schedule: Schedule | null;
  /** The status it is born with: a connection created paused is never active, not even briefly. */
  status: SettableConnectionStatus;
}

/**
 * Inserts a connection with its status; null when (tenant_id, app_key) is taken.
 * `metadata.sync.first_activated_at` is stamped now, the reference of its first scheduled run.
 */
export async function insertConnection(db: Queryable, input: NewConnection): Promise<ConnectionRow | null> {
  const { rows } = await db.query<StoredConnection>(
    `insert into connections as c (id, tenant_id, provider_slug, app_key, config, credentials, status, metadata)
     values ($8, $1, $2, $3, $4, to_jsonb($5::text), $7, jsonb_build_object('sync', $6::jsonb || jsonb_build_object('first_activated_at', now())))
     on conflict (tenant_id, app_key) do nothing
     returning ${CONNECTION_COLUMNS}`,
    [input.tenantId, input.providerSlug, input.appKey, input.config, input.sealedCredentials, input.schedule ? scheduleFields(input.schedule) : {}, input.status, input.id],
  );
  return rows[0] ? connectionOf(rows[0]) : null;
}

/**
 * The status a connection marked `needs_reauth` gets back when that ends (new credentials, or the
 * refusal undone): the one the refusal found it in (`status_before_reauth`: active or paused), so
 * a connection its owner paused stays paused until resumed; active when none was kept.
 */
const REAUTH_ENDED = (alias: string) => `coalesce(${alias}.status_before_reauth, ${CONNECTION.active})`;

/**
 * Whether the provider's refusal still stands for the connection row `alias` names: it is
 * `needs_reauth`, or it was disabled while it was (a disabled connection keeps the refusal as its
 * `status_before_reauth`: set only then, see disableConnectionRow). A resume of either must not
 * make it active: it would sync again with the credentials the provider refused.
 */
const REFUSAL_STANDS = (alias: string) =>
  `(${alias}.status = ${CONNECTION.needs_reauth} or (${alias}.status = ${CONNECTION.disabled} and ${alias}.status_before_reauth is not null))`;

/** Fields of a connection the API may change; undefined leaves a field as it is. */
export interface ConnectionChange {
  config?: Record<string, unknown>;
  /**
   * Sealed credentials (an envelope) of kind `token`; null removes the credentials. Either way the
   * connection leaves its OAuth 2 grant, if any (`attachGrant` gives it one). New credentials (not
   * null) end `needs_reauth`: the connection gets back the status the refusal found (REAUTH_ENDED).
   */
  sealedCredentials?: string | null;
  status?: ConnectionStatus;
  /** Replaces the whole stored schedule (interval or cron, time zone, full_sync_every). */
  schedule?: Schedule;
}

/**
 * Locks the OAuth grant connection `id` holds, if any, until the transaction ends. Whoever deletes
 * a connection or takes it out of its grant takes this lock first: the grant is deleted once no
 * connection names it (a trigger), judged by what has committed, so two connections leaving one
 * grant at once would each see the other and leave the grant, with its tokens, behind. Under the
 * lock the second waits for the first to commit, then sees it gone. The grant is read without the
 * row's lock: alone, for a row that cannot move to another grant meanwhile (a purge's, whose
 * connection no writer of a grant changes once its purge is open); else lockConnectionLeavingGrant.
 */
export async function lockOAuthGrantOf(db: Queryable, id: string): Promise<void> {
  await db.query('select 1 from oauth_grants where id = (select oauth_grant_id from connections where id = $1) for update', [id]);
}

/** How many times `lockConnectionLeavingGrant` locks the grant a connection names when it keeps changing. */
const LEAVE_GRANT_TRIES = 3;

/**
 * Locks the OAuth grant connection `id` names, if any, then the connection's row (FOR NO KEY
 * UPDATE), until the transaction ends; answers the row as locked, or null when there is none. What
 * a writer that may take the connection out of its grant (new credentials, a config its grant no
 * longer fits, another grant) takes before it writes the row: the grant it leaves is the one
 * locked (see lockOAuthGrantOf), grants before connection rows. The row is locked only while it
 * still names the grant locked: one moved to another grant meanwhile (a connect flow's callback
 * committed) is read and locked again, the row let go. Locking the grant read without that check
 * left, once the row was held, a grant never locked, which the trigger deleting it then took after
 * the row: a callback holding that grant (replacing its tokens) and waiting for the row deadlocked
 * with it. Changed too often to keep up with, the row is locked whatever it names, then its grant
 * (the order before the rule).
 */
export async function lockConnectionLeavingGrant(db: Queryable, id: string): Promise<ConnectionRow | null> {
  for (let tries = 1; ; tries++) {
    const read = await db.query<{ oauth_grant_id: string | null }>('select oauth_grant_id from connections where id = $1', [id]);
    if (!read.rows[0]) return null;
    const held = read.rows[0].oauth_grant_id;
    if (held !== null) await lockGrant(db, held);
    const last = tries >= LEAVE_GRANT_TRIES;
    const { rows } = await db.query<StoredConnection>(
      `select ${CONNECTION_COLUMNS} from connections c where c.id = $1 and ($3 or c.oauth_grant_id is not distinct from $2::uuid) for no key update`,
      [id, held, last],
    );
    const row = rows[0];
    if (row && row.oauth_grant_id !== held && row.oauth_grant_id !== null) await lockGrant(db, row.oauth_grant_id);
    if (row || last) return row ? connectionOf(row) : null;
  }
}

/** Locks grant `id` (FOR UPDATE) until the transaction ends, if it exists. */
async function lockGrant(db: Queryable, id: string): Promise<void> {
  await db.query('select 1 from oauth_grants where id = $1 for update', [id]);
}

/**
 * Applies `change` to connection `id` in one statement and returns the row as stored, or null when
 * there is none. The one writer of a connection's schedule. New credentials take the connection
 * out of its grant: given a transaction, the grant and then the row stay locked until it ends
 * (lockConnectionLeavingGrant).
 */
export async function updateConnection(db: Queryable, id: string, change: ConnectionChange): Promise<ConnectionRow | null> {
  if (change.sealedCredentials !== undefined) await lockConnectionLeavingGrant(db, id);
  const { rows } = await db.query<StoredConnection>(
    `update connections c
        set config = coalesce($2, c.config),
            -- Every config change counts: a pass compares the count its config was read at.
            config_epoch = c.config_epoch + case when $2::jsonb is null then 0 else 1 end,
            credentials = case when $3 then to_jsonb($4::text) else c.credentials end,
            credential_kind = case when $3 then ${CREDENTIAL.token} else c.credential_kind end,
            oauth_app_id = case when $3 then null else c.oauth_app_id end,
            oauth_grant_id = case when $3 then null else c.oauth_grant_id end,
            status = coalesce($5, case when $3 and $4::text is not null and c.status = ${CONNECTION.needs_reauth} then ${REAUTH_ENDED('c')} else c.status end),
            -- Kept only while the connection stays needs_reauth (or disabled, keeping the refusal): new credentials use it up.
            status_before_reauth = case when coalesce($5, c.status) in (${CONNECTION.needs_reauth}, ${CONNECTION.disabled}) and not ($3 and $4::text is not null) then c.status_before_reauth end,
            metadata = case when $6::jsonb is null then c.metadata
                            else jsonb_set(coalesce(c.metadata, '{}'::jsonb), '{sync}', ${STORE_SCHEDULE(`c.metadata -> 'sync'`, '$6::jsonb')}) end,
            schedule_changed_at = case when $6::jsonb is null then c.schedule_changed_at else now() end
      where c.id = $1
      returning ${CONNECTION_COLUMNS}`,
    [
      id,
      change.config ?? null,
      change.sealedCredentials !== undefined,
      change.sealedCredentials ?? null,
      change.status ?? null,
      change.schedule ? scheduleFields(change.schedule) : null,
    ],
  );
  return rows[0] ? connectionOf(rows[0]) : null;
}

/**
 * Writes connection `id` disabled, and answers the status it had just before, read under the row's
 * lock (so of two disables at once, the second sees the first's `disabled`); null when there is no
 * such connection. A connection that needs reauthorization keeps the refusal through the disable:
 * its `status_before_reauth` stays set (active when none was kept), so a resume makes it
 * `needs_reauth` again (REFUSAL_STANDS), never active with the refused credentials; any other
 * keeps none. The lock is FOR NO KEY UPDATE, never FOR UPDATE: that conflicts with the KEY
 * SHARE lock a page's records take on the connection row, and a delete holding the row's lock (its
 * purge's transaction) then waited for a page that itself waits to read the config FOR SHARE.
 */
export async function disableConnectionRow(db: Queryable, id: string): Promise<ConnectionStatus | null> {
  const { rows } = await db.query<{ previous: ConnectionStatus }>(
    `update connections c set status = ${CONNECTION.disabled},
            status_before_reauth = case when before.status = ${CONNECTION.needs_reauth} then coalesce(c.status_before_reauth, ${CONNECTION.active})
                                        when before.status = ${CONNECTION.disabled} then c.status_before_reauth end
       from (select id, status from connections where id = $1 for no key update) before
      where c.id = before.id
      returning before.status as previous`,
    [id],
  );
  return rows[0]?.previous ?? null;
}

/** Filters and keyset position of a connections listing. */
export interface ListConnectionsInput {
  tenantId?: string;
  providerSlug?: string;
  status?: ConnectionStatus;
  /** Return connections with an id greater than this (the previous page's last id). */
  afterId?: string;
  limit: number;
}

/** One page of connections ordered by id; `limit + 1` rows are read to know if more exist. */
export async function listConnections(db: Queryable, input: ListConnectionsInput): Promise<{ rows: ConnectionRow[]; more: boolean }> {
  const { rows } = await db.query<StoredConnection>(
    `select ${CONNECTION_COLUMNS} from connections c
      where ($1::text is null or c.tenant_id = $1)
        and ($2::text is null or c.provider_slug = $2)
        and ($3::text is null or c.status = $3)
        and ($4::uuid is null or c.id > $4)
      order by c.id limit $5`,
    [input.tenantId ?? null, input.providerSlug ?? null, input.status ?? null, input.afterId ?? null, input.limit + 1],
  );
  return { rows: rows.slice(0, input.limit).map(connectionOf), more: rows.length > input.limit };
}

/** The identity of a connection an enqueue holds locked. */
export interface LockedConnection {
  id: string;
  tenant_id: string;
  provider_slug: string;
  status: ConnectionStatus;
}

/**
 * Locks the connection row `FOR NO KEY UPDATE SKIP LOCKED`; null when it is missing or locked
 * elsewhere. Never FOR UPDATE: that conflicts with the KEY SHARE lock every insert of a row that
 * references the connection takes, so a job inserted by a request while this lock is held, which
 * the holder's own job insert then waits for in the one-active-job index, ends in a deadlock.
 */
export async function lockConnectionSkipLocked(tx: PoolClient, id: string): Promise<LockedConnection | null> {
  const { rows } = await tx.query<LockedConnection>(
    'select id, tenant_id, provider_slug, status from connections where id = $1 for no key update skip locked',
    [id],
  );
  return rows[0] ?? null;
}

/** Whether connection `id` exists. */
export async function connectionExists(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query('select 1 from connections where id = $1', [id]);
  return (rowCount ?? 0) > 0;
}

/** The provider slug of connection `id`, or null. */
export async function findProviderSlug(db: Queryable, id: string): Promise<string | null> {
  const { rows } = await db.query<{ provider_slug: string }>('select provider_slug from connections where id = $1', [id]);
  return rows[0]?.provider_slug ?? null;
}

/** What a connection workflow plans from: the row, the schedule's last run and its breaker pause. */
export interface SchedulingRow {
  id: string;
  tenant_id: string;
  provider_slug: string;
  status: ConnectionStatus;
  /** The stored schedule as the worker's bounds let the planner use it, and why any value was ignored. */
  schedule: ResolvedSchedule;
  /** `metadata.sync.first_activated_at` (the reference of a first run), when a valid time. */
  first_activated_at: Date | null;
  created_at: Date;
  /**
   * The schedule's last run (L of planning): the finish of the latest job its scheduler created
   * (schedule or manual), of either type and however it ended, cancelled included, leaving out
   * jobs failed as abandoned. API syncs and backfills run beside the schedule and are not its runs.
   */
  last_finished_at: Date | null;
  paused_until: Date | null;
  /** Only read when `metadata.sync.full_sync_every` is set (else null): the last completed full sync. */
  last_full_at: Date | null;
  /** Only read when `metadata.sync.full_sync_every` is set (else null): scheduled runs completed since it. */
  runs_since_full: number | null;
  /** `schedule_changed_at` as exact text (a Date would lose its microseconds); null: never changed. */
  schedule_version: string | null;
}

/**
 * The scheduling context of connection `id` at time `at`, in one statement; null when it is gone.
 * The schedule's history comes from `connection_schedule_runs`, which the statement that ends a job
 * updates in its transaction (a trigger on `sync_jobs`), so it outlives the job rows retention
 * deletes.
 */
export async function findSchedulingRow(db: Queryable, id: string, at: Date, settings: ScheduleSettings): Promise<SchedulingRow | null> {
  const { rows } = await db.query<Omit<SchedulingRow, 'schedule' | 'first_activated_at'> & { sync: unknown }>(
    `select c.id, c.tenant_id, c.provider_slug, c.status, c.metadata -> 'sync' as sync, c.created_at,
            r.last_run_at as last_finished_at,
            ${pausedUntilAt('c.id', '$2')} as paused_until,
            case when (c.metadata -> 'sync') ? 'full_sync_every' then r.last_full_at end as last_full_at,
            case when (c.metadata -> 'sync') ? 'full_sync_every' then coalesce(r.runs_since_full, 0) end as runs_since_full,
            c.schedule_changed_at::text as schedule_version
       from connections c left join connection_schedule_runs r on r.connection_id = c.id
      where c.id = $1`,
    [id, at],
  );
  if (!rows[0]) return null;
  const { sync, ...row } = rows[0];
  const first = (sync as { first_activated_at?: unknown } | null)?.first_activated_at;
  const activated = typeof first === 'string' ? new Date(first) : null;
  return {
    ...row,
    schedule: resolveSchedule(sync, settings),
    first_activated_at: activated && !Number.isNaN(activated.getTime()) ? activated : null,
  };
}

/** What a connector needs of a connection: provider, config and credentials as stored (sealed). */
export interface SyncSource {
  tenant_id: string;
  provider_slug: string;
  config: Record<string, unknown>;
  /** The connection's own, or (an `oauth2` credential) its grant's. */
  credentials: unknown;
  /** The OAuth 2 grant the credentials are of (sealed bound to its id), else null. */
  oauth_grant_id: string | null;
  /** How many config changes the connection had when `config` was read (a bigint, as a string). */
  config_epoch: string;
}

/** The provider, config and credentials of connection `id`, or null. */
export async function findSyncSource(db: Queryable, id: string): Promise<SyncSource | null> {
  const { rows } = await db.query<SyncSource>(
    `select c.tenant_id, c.provider_slug, c.config, ${CREDENTIALS_OF('c', 'g')} as credentials, c.oauth_grant_id, c.config_epoch::text as config_epoch
       from connections c left join oauth_grants g on g.id = c.oauth_grant_id where c.id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

/**
 * The credentials column of connection alias `c` joined (left) with its grant alias `g`: an
 * `oauth2` connection's are its grant's.
 */
export const CREDENTIALS_OF = (c: string, g: string) => `case when ${c}.oauth_grant_id is null then ${c}.credentials else ${g}.credentials end`;

/**
 * The SET words of a pause or resume asking for status `asked` (an SQL expression) of the
 * connection row `alias` names (its columns as before the write): a connection whose refusal
 * stands (REFUSAL_STANDS: it needs reauthorization, or was disabled while it did) is, or becomes
 * again, `needs_reauth` (only new credentials end it: its refused credentials must not be used
 * again) and keeps `asked` as the status it gets back when they come (REAUTH_ENDED); any other
 * gets `asked`, and keeps no such status.
 */
const ASKED_STATUS = (alias: string, asked: string) =>
  `status = case when ${REFUSAL_STANDS(alias)} then ${CONNECTION.needs_reauth} else ${asked} end,
   status_before_reauth = case when ${REFUSAL_STANDS(alias)} then ${asked} end`;

/** What a pause or resume found and left: the status the connection had, and the one it has after the statement. */
export interface StatusWrite {
  previous: ConnectionStatus;
  status: ConnectionStatus;
}

/**
 * Pauses or resumes connection `id` (`status`) only when its status is one of `from`, in one
 * statement (ASKED_STATUS: one that needs reauthorization stays so, keeping `status` for when it
 * ends), and answers the status it had, read under the row's lock (so a disable or a deletion that
 * commits while this waits is seen, never written over), and the status it has after; null when
 * there is no such connection. It wrote exactly when `previous` is one of `from`.
 */
export async function setStatusFrom(db: Queryable, id: string, status: SettableConnectionStatus, from: readonly ConnectionStatus[]): Promise<StatusWrite | null> {
  const { rows } = await db.query<StatusWrite>(
    `with before as (select id, status from connections where id = $1 for no key update),
          written as (update connections c set ${ASKED_STATUS('c', '$2::text')}
                       from before where c.id = before.id and before.status = any($3::text[]) returning c.status)
     select before.status as previous, coalesce((select status from written), before.status) as status from before`,
    [id, status, from],
  );
  return rows[0] ?? null;
}

/** Every connection status but `disabled`. */
const NOT_DISABLED: readonly ConnectionStatus[] = CONNECTION_STATUSES.filter((s) => s !== CONNECTION_STATUS.disabled);

/**
 * Pauses or resumes a connection (as a workflow stores a signal's), leaving a disabled one
 * disabled, and one that needs reauthorization `needs_reauth` keeping `status` for when that ends
 * (setStatusFrom); its status after, or null.
 */
export async function setStatusUnlessDisabled(db: Queryable, id: string, status: SettableConnectionStatus): Promise<ConnectionStatus | null> {
  return (await setStatusFrom(db, id, status, NOT_DISABLED))?.status ?? null;
}

/**
 * Writes a plan's `next_run_at` and `last_jitter_seconds` into `metadata.sync`, keeping every
 * other key, and in `schedule_planned_at` the version of the schedule the plan was made from
 * (`scheduleVersion`, the `schedule_changed_at` its read found): a schedule stored after that read,
 * even before this write, stays newer than the plan, so the reconcile tick sends `replan` when the
 * API's was lost. A plan of an older worker's read (no version) counts as made now. Called inside
 * the transaction that inserts or moves the job.
 */
export async function writeNextRun(tx: Queryable, id: string, plan: PlannedRun, scheduleVersion?: string | null): Promise<void> {
  await tx.query(
    `update connections
        set metadata = jsonb_set(metadata, '{sync}',
              coalesce(metadata -> 'sync', '{}'::jsonb)
              || jsonb_build_object('next_run_at', $2::text, 'last_jitter_seconds', $3::int)),
            schedule_planned_at = case when $4 then $5::timestamptz else now() end
      where id = $1`,
    [id, new Date(plan.nextRunAt).toISOString(), plan.jitterSeconds, scheduleVersion !== undefined, scheduleVersion ?? null],
  );
}

/** A connection the reconcile tick looks at. */
export interface ReconcileRow {
  id: string;
  tenant_id: string;
  provider_slug: string;
  status: ConnectionStatus;
  /**
   * Active, with its scheduled job queued from a plan older than the schedule the API stored before
   * `changedBefore` (a `replan` it sent and the run never heard). False for a schedule never changed.
   */
  replan_unheard: boolean;
}

/**
 * The next batch of connections after `afterId` whose workflow the tick must ensure or stop:
 * all but disabled ones already noted as stopped (until the row changes again). Locked
 * `FOR NO KEY UPDATE SKIP LOCKED` (a row an enqueue holds is left for the next tick; rows that
 * reference a locked connection can still be inserted). Each says whether its schedule, stored
 * before `changedBefore`, is newer than the plan of its queued scheduled job (`replan_unheard`).
 */
export async function lockReconcileBatch(tx: PoolClient, afterId: string, limit: number, changedBefore: Date): Promise<ReconcileRow[]> {
  const { rows } = await tx.query<ReconcileRow>(
    `select c.id, c.tenant_id, c.provider_slug, c.status,
            coalesce(c.status = ${CONNECTION.active} and c.schedule_changed_at < $3
             and c.schedule_changed_at > coalesce(c.schedule_planned_at, '-infinity')
             and exists (select 1 from sync_jobs j where j.connection_id = c.id and j.status = ${JOB.queued} and j.trigger = ${TRIGGER.schedule}), false) as replan_unheard
       from connections c
      where c.id > $1 and (c.status <> ${CONNECTION.disabled} or c.workflow_stopped_at is null or c.workflow_stopped_at < c.updated_at)
      order by c.id limit $2 for no key update of c skip locked`,
    [afterId, limit, changedBefore],
  );
  return rows;
}

/** Notes that a disabled connection's workflow was found ended. */
export async function markWorkflowStopped(db: Queryable, id: string): Promise<void> {
  await db.query(`update connections set workflow_stopped_at = now() where id = $1 and status = ${CONNECTION.disabled}`, [id]);
}

/** A queued job counts as late this long after its scheduled time (it may be starting right now). */
const LATE_AFTER = "interval '30 seconds'";

/**
 * The backlog: active connections that are overdue, either with no active job although their
 * `next_run_at` has passed, or with a queued job more than 30 s past its `scheduled_at` (the lag
 * users feel; one waiting for its tenant's running-jobs limit included), unless that job is queued
 * behind a running job of its connection and type (it waits for that one by design, however long
 * it runs). A malformed `next_run_at` (metadata is user-editable) is ignored, never an error.
 */
export async function countOverdueConnections(db: Queryable, at: Date): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `select count(*)::int as n from connections c
      where c.status = ${CONNECTION.active}
        and (
          (case when c.metadata -> 'sync' ->> 'next_run_at' ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T'
                then (c.metadata -> 'sync' ->> 'next_run_at')::timestamptz end < $1
           and not exists (select 1 from sync_jobs j where j.connection_id = c.id and j.status in (${ACTIVE_JOBS})))
          or exists (select 1 from sync_jobs j where j.connection_id = c.id and j.status = ${JOB.queued}
                       and j.scheduled_at < $1::timestamptz - ${LATE_AFTER} and ${runningBeside('j')} is null)
        )`,
    [at],
  );
  return rows[0]!.n;
}

/**
 * The stored `metadata.sync.interval_seconds` of `connections c` as an int, read as the row mapper
 * reads a stored schedule (`parseSchedule` with no maximum): a JSON integer of at least
 * MIN_INTERVAL_SECONDS; anything else (a string, a fraction, a value beyond an int, below the
 * minimum, a hand-edited object) is null. The type is asked before any cast, so no stored value
 * makes the statement fail.
 */
const STORED_INTERVAL_SECONDS = (() => {
  const value = `(c.metadata -> 'sync' -> 'interval_seconds')`;
  return `case when jsonb_typeof(${value}) = 'number'
               then (case when ${value}::numeric between ${MIN_INTERVAL_SECONDS} and 2147483647 and ${value}::numeric = trunc(${value}::numeric)
                          then ${value}::numeric::int end) end`;
})();

/**
 * Active interval-scheduled connections whose last successful sync (or, never synced, their
 * creation) is older than twice their interval (`defaultIntervalSeconds` when none valid is
 * stored), counted by provider. Cron-scheduled connections are left out: their gaps vary by
 * design, and a late cron run shows in the backlog gauge.
 */
export async function countStaleConnections(db: Queryable, at: Date, defaultIntervalSeconds: number): Promise<{ provider: string; n: number }[]> {
  const { rows } = await db.query<{ provider: string; n: number }>(
    `select c.provider_slug as provider, count(*)::int as n from connections c
      where c.status = ${CONNECTION.active} and c.metadata -> 'sync' ->> 'cron' is null
        and coalesce((select r.last_success_at from connection_schedule_runs r where r.connection_id = c.id), c.created_at)
            < $1::timestamptz - make_interval(secs => 2 * coalesce(${STORED_INTERVAL_SECONDS}, $2))
      group by 1 order by 1`,
    [at, defaultIntervalSeconds],
  );
  return rows;
}

/** What a reconcile tick counted at `counted_at`: overdue connections, and stale ones by provider. */
export interface StoredScheduleCounts {
  counted_at: Date;
  overdue: number;
  stale: Map<string, number>;
}

/**
 * Stores what the tick of `at` counted, unless a tick of a later `at` already stored its counts
 * (an attempt that outlived its timeout must not overwrite its retry's).
 */
export async function storeScheduleCounts(db: Queryable, at: Date, overdue: number, stale: { provider: string; n: number }[]): Promise<void> {
  await db.query(
    `insert into schedule_counts (id, counted_at, overdue, stale) values (true, $1, $2, $3)
       on conflict (id) do update set counted_at = excluded.counted_at, overdue = excluded.overdue, stale = excluded.stale
       where schedule_counts.counted_at < excluded.counted_at`,
    [at, overdue, JSON.stringify(Object.fromEntries(stale.map(({ provider, n }) => [provider, n])))],
  );
}

/** The counts the latest tick stored (one primary-key read), or null before any tick. */
export async function findScheduleCounts(db: Queryable): Promise<StoredScheduleCounts | null> {
  const { rows } = await db.query<{ counted_at: Date; overdue: number; stale: Record<string, number> }>('select counted_at, overdue, stale from schedule_counts where id');
  const row = rows[0];
  return row ? { counted_at: row.counted_at, overdue: row.overdue, stale: new Map(Object.entries(row.stale)) } : null;
}

/** A stored secret to (re)seal: its row id and its value as stored. */
export interface StoredSecret {
  id: string;
  stored: unknown;
}

/**
 * The next `limit` connections after `afterId` whose credentials are not sealed under key
 * `activeId`: legacy plaintext (a JSON object) or an envelope of another key.
 */
export async function listCredentialsToReseal(db: Queryable, activeId: string | null, afterId: string, limit: number): Promise<StoredSecret[]> {
  const { rows } = await db.query<StoredSecret>(
    `select id, credentials as stored from connections
      where id > $2 and credentials is not null and credentials <> 'null'::jsonb
        and (jsonb_typeof(credentials) <> 'string' or ($1::text is not null and not starts_with(credentials #>> '{}', 'enc:v1:' || $1 || ':')))
      order by id limit $3`,
    [activeId, afterId, limit],
  );
  return rows;
}

/**
 * Replaces connection `id`'s credentials with `sealed` only if they still are `stored` (compare
 * and set): a concurrent change (a PATCH) wins, and the row is looked at again on the next pass.
 */
export async function replaceCredentials(db: Queryable, id: string, stored: unknown, sealed: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'update connections set credentials = to_jsonb($3::text) where id = $1 and credentials = $2::jsonb',
    [id, JSON.stringify(stored), sealed],
  );
  return (rowCount ?? 0) > 0;
}

/** How many connections have credentials not sealed under key `activeId` (rotation's progress). */
export async function countCredentialsToReseal(db: Queryable, activeId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `select count(*)::int as n from connections
      where credentials is not null and credentials <> 'null'::jsonb
        and (jsonb_typeof(credentials) <> 'string' or not starts_with(credentials #>> '{}', 'enc:v1:' || $1 || ':'))`,
    [activeId],
  );
  return rows[0]!.n;
}

/**
 * Takes the refresh lock of connection `id`'s credential until the transaction ends: one decision
 * to renew (claiming the renewal lease) at a time per credential, across every worker. Held only
 * for that short transaction, never while a provider answers. An advisory lock, so the connection
 * row itself stays free for enqueues (`FOR NO KEY UPDATE SKIP LOCKED`) and status changes.
 */
export async function lockCredentialRefresh(tx: PoolClient, id: string): Promise<void> {
  await tx.query(`select pg_advisory_xact_lock(hashtextextended('synctide:credentials:' || $1::text, 0))`, [id]);
}

/** What a refresh reads under its lock: the stored credential, the status, and the OAuth app's client. */
export interface CredentialForRefresh {
  status: ConnectionStatus;
  tenant_id: string;
  provider_slug: string;
  credentials: unknown;
  credential_kind: CredentialKind;
  /** The connection's config (a GitHub App's installation token is minted at its `base_url`). */
  config: Record<string, unknown> | null;
  oauth_app_id: string | null;
  token_url: string | null;
  client_id: string | null;
  /** Sealed (bound to the oauth_apps row). */
  client_secret: string | null;
  /** Whether another worker holds a live renewal lease on the credential. */
  lease_live: boolean;
  /** Whether a renewal lease is recorded, live or past its expiry (its worker died, or has not stored its answer yet). */
  lease_left: boolean;
}

/**
 * Where a renewed credential is stored, with its lease: a connection's own (`connections`), or an
 * OAuth 2 grant its connections share (`oauth_grants`). Both are sealed bound to `id` in the slot
 * of a connection's credentials.
 */
export interface CredentialHolder {
  table: 'connections' | 'oauth_grants';
  id: string;
}

/** The credential of `holder` (see `findCredentialForRefresh`, `findGrantForRefresh`). */
export const findHeldCredential = (db: Queryable, holder: CredentialHolder): Promise<CredentialForRefresh | null> =>
  holder.table === 'oauth_grants' ? findGrantForRefresh(db, holder.id) : findCredentialForRefresh(db, holder.id);

/**
 * Grant `id`'s credential and its OAuth app's client, or null. Its status is `needs_reauth` while
 * any of its connections waits for new credentials (a refusal marks them all), else `active`.
 */
export async function findGrantForRefresh(db: Queryable, id: string): Promise<CredentialForRefresh | null> {
  const { rows } = await db.query<CredentialForRefresh>(
    `select case when exists (select 1 from connections c where c.oauth_grant_id = g.id and c.status = ${CONNECTION.needs_reauth})
                 then ${CONNECTION.needs_reauth} else ${CONNECTION.active} end as status,
            g.tenant_id, (select min(c.provider_slug) from connections c where c.oauth_grant_id = g.id) as provider_slug,
            g.credentials, ${CREDENTIAL.oauth2} as credential_kind, null::jsonb as config, g.oauth_app_id, a.token_url, a.client_id, a.client_secret,
            coalesce(g.credential_lease_until > now(), false) as lease_live, g.credential_lease_token is not null as lease_left
       from oauth_grants g join oauth_apps a on a.id = g.oauth_app_id
      where g.id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

/**
 * Marks every connection of grant `grantId` that is active or paused `needs_reauth` (keeping which
 * it was, for a refusal undone), while the grant still holds the credential `stored` (new
 * credentials that arrived meanwhile are not refused). The connections changed.
 */
export async function markGrantNeedsReauth(db: Queryable, grantId: string, stored: unknown): Promise<{ id: string; provider_slug: string }[]> {
  const { rows } = await db.query<{ id: string; provider_slug: string }>(
    `update connections c set status = ${CONNECTION.needs_reauth}, status_before_reauth = c.status
      where c.oauth_grant_id = $1 and c.status in (${CONNECTION.active}, ${CONNECTION.paused})
        and exists (select 1 from oauth_grants g where g.id = $1 and g.credentials = $2::jsonb)
      returning c.id, c.provider_slug`,
    [grantId, JSON.stringify(stored)],
  );
  return rows;
}

/** Connection `id`'s grant and its OAuth app, with its tenant (nulls for no grant), or null when there is no such connection. */
export async function findConnectionGrant(db: Queryable, id: string): Promise<{ tenant_id: string; oauth_grant_id: string | null; oauth_app_id: string | null } | null> {
  const { rows } = await db.query<{ tenant_id: string; oauth_grant_id: string | null; oauth_app_id: string | null }>(
    'select tenant_id, oauth_grant_id, oauth_app_id from connections where id = $1',
    [id],
  );
  return rows[0] ?? null;
}

/**
 * Locks grant `id` against its deletion until the transaction ends (FOR KEY SHARE, what a
 * connection naming it takes anyway), waiting for a deletion under way to commit first. False when
 * there is no such grant (any more).
 */
export async function lockGrantForShare(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query('select 1 from oauth_grants where id = $1 for key share', [id]);
  return (rowCount ?? 0) > 0;
}

/** Inserts grant `id` of tenant `tenantId` through OAuth app `appId`, holding `sealed` (bound to `id`). */
export async function insertGrant(db: Queryable, id: string, tenantId: string, appId: string, sealed: string): Promise<void> {
  await db.query('insert into oauth_grants (id, tenant_id, oauth_app_id, credentials) values ($1, $2, $3, to_jsonb($4::text))', [id, tenantId, appId, sealed]);
}

/**
 * Replaces grant `id`'s credentials with new ones `sealed` (a new authorization), ending any lease;
 * the grant's row stays locked (against its deletion) until the transaction ends. False when there
 * is no such grant (any more: a deletion that committed, or that held the row and then committed).
 */
export async function replaceGrant(db: Queryable, id: string, sealed: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'update oauth_grants set credentials = to_jsonb($2::text), credential_lease_token = null, credential_lease_until = null where id = $1',
    [id, sealed],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Makes grant `grantId` (of app `appId`) connection `id`'s `oauth2` credential, and (`resume`, the
 * default: new credentials arrived) every connection of the grant that needs reauthorization
 * `active` again.
 * The connection's own credentials are removed; a grant it leaves that no connection names any
 * more is deleted (a trigger). The connections of the grant (for their alerts), or [] when there
 * is no connection `id`.
 */
export async function attachGrant(db: Queryable, id: string, grantId: string, appId: string, opts: { resume: boolean } = { resume: true }): Promise<string[]> {
  // The grant the connection leaves is locked before its row (lockConnectionLeavingGrant): taken
  // from the row instead, by the trigger deleting it once its row is held, it deadlocked against a
  // connect flow that held that grant (replacing its tokens) and waited for the row.
  if (!(await lockConnectionLeavingGrant(db, id))) return [];
  const { rowCount } = await db.query(
    `update connections set credentials = null, credential_kind = ${CREDENTIAL.oauth2}, oauth_app_id = $3, oauth_grant_id = $2 where id = $1`,
    [id, grantId, appId],
  );
  if (!rowCount || !opts.resume) return rowCount ? [id] : [];
  const { rows } = await db.query<{ id: string }>(
    `update connections c set status = case when c.status = ${CONNECTION.needs_reauth} then ${REAUTH_ENDED('c')} else c.status end, status_before_reauth = null
      where c.oauth_grant_id = $1 returning c.id`,
    [grantId],
  );
  return rows.map((row) => row.id);
}

/** The next `limit` grants after `afterId` whose credentials are not sealed under key `activeId`. */
export async function listGrantsToReseal(db: Queryable, activeId: string | null, afterId: string, limit: number): Promise<StoredSecret[]> {
  const { rows } = await db.query<StoredSecret>(
    `select id, credentials as stored from oauth_grants
      where id > $2 and (jsonb_typeof(credentials) <> 'string' or ($1::text is not null and not starts_with(credentials #>> '{}', 'enc:v1:' || $1 || ':')))
      order by id limit $3`,
    [activeId, afterId, limit],
  );
  return rows;
}

/** Replaces grant `id`'s credentials with `sealed` only if they still are `stored` (compare and set). */
export async function replaceGrantCredentials(db: Queryable, id: string, stored: unknown, sealed: string): Promise<boolean> {
  const { rowCount } = await db.query('update oauth_grants set credentials = to_jsonb($3::text) where id = $1 and credentials = $2::jsonb', [id, JSON.stringify(stored), sealed]);
  return (rowCount ?? 0) > 0;
}

/** How many grants have credentials not sealed under key `activeId`. */
export async function countGrantsToReseal(db: Queryable, activeId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `select count(*)::int as n from oauth_grants
      where jsonb_typeof(credentials) <> 'string' or not starts_with(credentials #>> '{}', 'enc:v1:' || $1 || ':')`,
    [activeId],
  );
  return rows[0]!.n;
}

/** Connection `id`'s credential and its OAuth app's client (null columns for a `token`), or null. */
export async function findCredentialForRefresh(db: Queryable, id: string): Promise<CredentialForRefresh | null> {
  const { rows } = await db.query<CredentialForRefresh>(
    `select c.status, c.tenant_id, c.provider_slug, c.credentials, c.credential_kind, c.config, c.oauth_app_id, a.token_url, a.client_id, a.client_secret,
            coalesce(c.credential_lease_until > now(), false) as lease_live, c.credential_lease_token is not null as lease_left
       from connections c left join oauth_apps a on a.id = c.oauth_app_id
      where c.id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

/**
 * Claims the renewal lease of connection `id`'s credential for `leaseMs` under the token `lease`,
 * when no live lease is held (none, or one past its expiry: its worker died). True when claimed.
 * Called under `lockCredentialRefresh`, in the transaction that decided to renew.
 */
export async function claimCredentialLease(db: Queryable, holder: CredentialHolder, lease: string, leaseMs: number): Promise<boolean> {
  const { rowCount } = await db.query(
    `update ${holder.table} set credential_lease_token = $2, credential_lease_until = now() + make_interval(secs => $3::double precision / 1000)
      where id = $1 and (credential_lease_until is null or credential_lease_until <= now())`,
    [holder.id, lease, leaseMs],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Stores the renewed credential `sealed` over `stored` (compare and set: only while connection
 * `id` still holds the credential that was renewed) and ends the lease `lease` when it is still
 * held. A lease lost meanwhile (expired and claimed by another worker) does not stop the store: the
 * provider has issued the answer (a rotated refresh token among it), and discarding it could lose
 * the grant; the other worker's store then finds the credential changed. True when stored.
 */
export async function storeRenewedCredentials(db: Queryable, holder: CredentialHolder, stored: unknown, sealed: string, lease: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `update ${holder.table} set credentials = to_jsonb($3::text),
            credential_lease_until = case when credential_lease_token = $4 then null else credential_lease_until end,
            credential_lease_token = case when credential_lease_token = $4 then null else credential_lease_token end
      where id = $1 and credentials = $2::jsonb`,
    [holder.id, JSON.stringify(stored), sealed, lease],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Gives every connection of `holder` (the grant's, or the connection itself) that needs
 * reauthorization back the status the refusal found it in (active or paused): the credential it
 * was refused for has just been renewed. A disabled one that kept the refusal stays disabled and
 * keeps it no more (a resume then makes it active). The connections whose status changed.
 */
export async function resumeRefusedConnections(db: Queryable, holder: CredentialHolder): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `with ended as (
       update connections c set status = case when c.status = ${CONNECTION.needs_reauth} then ${REAUTH_ENDED('c')} else c.status end, status_before_reauth = null
        where ${holder.table === 'oauth_grants' ? 'c.oauth_grant_id' : 'c.id'} = $1 and ${REFUSAL_STANDS('c')}
        returning c.id, c.status)
     select id from ended where status <> ${CONNECTION.disabled}`,
    [holder.id],
  );
  return rows.map((row) => row.id);
}

/**
 * Gives every connection refused for OAuth app `appId`'s own client (its open
 * `connection_credentials_invalid` alert names the app: see `refuseCredentials`) back the status
 * the refusal found it in, and resolves those alerts at `at`: the app has new client credentials,
 * and the grants were never refused. A disabled one that kept such a refusal stays disabled and
 * keeps it no more (a resume then makes it active). Connections refused for their grant stay
 * refused. The connections changed.
 */
export async function resumeClientRefusedConnections(db: Queryable, appId: string, at: Date): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `with refused as (
       update alerts a set resolved_at = $2
         from connections c
        where a.connection_id = c.id and a.category = 'connection_credentials_invalid' and a.resolved_at is null
          and a.context ->> 'oauth_app_id' = $1::text and c.oauth_app_id = $1::uuid and ${REFUSAL_STANDS('c')}
        returning c.id)
     update connections c set status = case when c.status = ${CONNECTION.needs_reauth} then ${REAUTH_ENDED('c')} else c.status end, status_before_reauth = null
       from refused r where c.id = r.id
     returning c.id`,
    [appId, at],
  );
  return rows.map((row) => row.id);
}

/** Ends the renewal lease `lease` of connection `id` when it is still held (a renewal that failed). */
export async function releaseCredentialLease(db: Queryable, holder: CredentialHolder, lease: string): Promise<void> {
  await db.query(
    `update ${holder.table} set credential_lease_token = null, credential_lease_until = null where id = $1 and credential_lease_token = $2`,
    [holder.id, lease],
  );
}

/**
 * Marks connection `id` `needs_reauth` when it is active or paused (keeping which it was, for a
 * refusal undone) and still holds the credential `stored` (new credentials that arrived meanwhile
 * are not refused). True when it changed.
 */
export async function markNeedsReauth(db: Queryable, id: string, stored: unknown): Promise<boolean> {
  const { rowCount } = await db.query(
    `update connections set status = ${CONNECTION.needs_reauth}, status_before_reauth = status
      where id = $1 and status in (${CONNECTION.active}, ${CONNECTION.paused}) and credentials = $2::jsonb`,
    [id, JSON.stringify(stored)],
  );
  return (rowCount ?? 0) > 0;
}

/** The status of connection `id`, or null when there is none. */
export async function findConnectionStatus(db: Queryable, id: string): Promise<ConnectionStatus | null> {
  const { rows } = await db.query<{ status: ConnectionStatus }>('select status from connections where id = $1', [id]);
  return rows[0]?.status ?? null;
}
