// SQL of `webhooks`, `webhook_events`, `webhook_deliveries` and `webhook_delivery_attempts`.
// An event and its deliveries are inserted by the transaction that makes the event true.
import type { TimePosition } from '../../policy/cursors';
import { DELIVERY_GIVE_UP_HOURS, DELIVERY_WORKFLOW_LIMIT_HOURS } from '../../policy/delivery-shares';
import type { DeliveryStatus, WebhookEventType } from '../../policy/vocabulary';
import type { JobEventFacts, WebhookEvent } from '../../policy/webhook-events';
import { exactTime } from '../keyset';
import type { Queryable } from '../queryable';
import { sealedTextColumn } from '../sealed-text';
import { DELIVERY } from '../sql';

/** A webhook as listed: never its secret. */
export interface WebhookRow {
  id: string;
  tenant_id: string;
  url: string;
  event_types: WebhookEventType[];
  created_at: Date;
  /** When the webhook was disabled (its receiver answered 410 Gone, or through the API); null while it is enabled. */
  disabled_at: Date | null;
  /** Why it was disabled (naming the 410, or the API, and when); null while it is enabled. */
  disabled_reason: string | null;
}

const WEBHOOK_COLUMNS = 'id, tenant_id, url, event_types, created_at, disabled_at, disabled_reason';

/** Inserts a webhook with id `id` and its sealed secret, and returns it (without the secret). */
export async function insertWebhook(db: Queryable, hook: { id: string; tenantId: string; url: string; eventTypes: string[]; sealedSecret: string }): Promise<WebhookRow> {
  const { rows } = await db.query<WebhookRow>(
    `insert into webhooks (id, tenant_id, url, event_types, secret) values ($5, $1, $2, $3, $4) returning ${WEBHOOK_COLUMNS}`,
    [hook.tenantId, hook.url, hook.eventTypes, hook.sealedSecret, hook.id],
  );
  return rows[0]!;
}

/** One webhook, or null. */
export async function findWebhook(db: Queryable, id: string): Promise<WebhookRow | null> {
  const { rows } = await db.query<WebhookRow>(`select ${WEBHOOK_COLUMNS} from webhooks where id = $1`, [id]);
  return rows[0] ?? null;
}

/** A page of webhooks ordered by id, optionally of one tenant: `limit` rows and whether more follow. */
export async function listWebhooks(db: Queryable, query: { tenantId?: string; afterId?: string; limit: number }): Promise<{ rows: WebhookRow[]; more: boolean }> {
  const { rows } = await db.query<WebhookRow>(
    `select ${WEBHOOK_COLUMNS} from webhooks
      where ($1::text is null or tenant_id = $1) and ($2::uuid is null or id > $2)
      order by id limit $3`,
    [query.tenantId ?? null, query.afterId ?? null, query.limit + 1],
  );
  return { rows: rows.slice(0, query.limit), more: rows.length > query.limit };
}

/** A webhook whose secret was just rotated: when the secret it replaced stops signing (null: it already has). */
export interface RotatedWebhookRow extends WebhookRow {
  previous_secret_expires_at: Date | null;
}

/**
 * Replaces webhook `id`'s secret with `sealedSecret` in one statement: the secret it replaces
 * moves, sealed as it is, to `previous_secret` until `overlapSeconds` from now (the database's
 * clock), or is dropped at once when `overlapSeconds` is 0; a previous secret kept from an
 * earlier rotation is dropped either way. Returns the webhook, or null when there is none.
 */
export async function rotateSecret(db: Queryable, id: string, sealedSecret: string, overlapSeconds: number): Promise<RotatedWebhookRow | null> {
  const { rows } = await db.query<RotatedWebhookRow>(
    `update webhooks
        set previous_secret = case when $3::integer > 0 then secret end,
            previous_secret_expires_at = case when $3::integer > 0 then now() + make_interval(secs => $3::integer) end,
            secret = $2
      where id = $1
      returning ${WEBHOOK_COLUMNS}, previous_secret_expires_at`,
    [id, sealedSecret, overlapSeconds],
  );
  return rows[0] ?? null;
}

/** Drops the previous secrets whose overlap has ended (they no longer sign); returns how many. */
export async function clearExpiredPreviousSecrets(db: Queryable): Promise<number> {
  const { rowCount } = await db.query(
    'update webhooks set previous_secret = null, previous_secret_expires_at = null where previous_secret_expires_at <= now()',
  );
  return rowCount ?? 0;
}

/**
 * Enables webhook `id` again (clears when and why it was disabled; one enabled already stays as
 * it is) and returns it, or null when there is none. Its deliveries that failed while it was
 * disabled stay failed: each may be redelivered.
 */
export async function enableWebhook(db: Queryable, id: string): Promise<WebhookRow | null> {
  const { rows } = await db.query<WebhookRow>(
    `update webhooks set disabled_at = null, disabled_reason = null where id = $1 returning ${WEBHOOK_COLUMNS}`,
    [id],
  );
  return rows[0] ?? null;
}

/**
 * Disables webhook `id` at `at` for `reason`, in the caller's transaction, and returns it (null when
 * there is none); a webhook disabled already keeps its first time and reason.
 */
export async function disableWebhook(db: Queryable, id: string, at: Date, reason: string): Promise<WebhookRow | null> {
  const { rows } = await db.query<WebhookRow>(
    `update webhooks
        set disabled_at = coalesce(disabled_at, $2),
            disabled_reason = case when disabled_at is null then $3 else disabled_reason end
      where id = $1
  returning ${WEBHOOK_COLUMNS}`,
    [id, at, reason],
  );
  return rows[0] ?? null;
}

/** Deletes a webhook with its deliveries and their attempts; false when there was none. */
export async function deleteWebhook(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query('delete from webhooks where id = $1', [id]);
  return (rowCount ?? 0) > 0;
}

/**
 * Inserts event `type` of connection `connectionId` with `data`, and one pending delivery for each
 * of the connection's tenant's enabled webhooks subscribed to that type, in the caller's
 * transaction (a disabled webhook gets none). Nothing is written when nobody listens. Returns the new deliveries' ids.
 *
 * The webhooks are read under a key-share lock held to the commit: one whose deletion commits
 * while the statement runs is passed by (no delivery to it) rather than failing the caller's
 * transaction (a disable, a job's end) on its foreign key; a deletion that comes later waits for
 * the commit and takes the new deliveries with it.
 */
export async function insertConnectionEvent(
  tx: Queryable,
  event: WebhookEvent & { connectionId: string },
  at: Date,
): Promise<string[]> {
  const { rows } = await tx.query<{ id: string }>(
    `with hooks as (select w.id, w.tenant_id from webhooks w join connections c on c.tenant_id = w.tenant_id
                     where c.id = $1 and $2 = any (w.event_types) and w.disabled_at is null for key share of w),
          event as (insert into webhook_events (tenant_id, connection_id, event_type, payload, created_at)
                    select (select tenant_id from hooks limit 1), $1, $2, $3, $4 where exists (select 1 from hooks)
                    returning id)
     insert into webhook_deliveries (webhook_id, event_id, created_at)
     select hooks.id, event.id, $4 from hooks cross join event
     returning id`,
    [event.connectionId, event.type, event.data, at],
  );
  return rows.map((r) => r.id);
}

/**
 * What the event `type` of job `jobId` says (its row, its record counts summed over its tasks and
 * the connection's feed head: latest change, purge epoch and the connection), read in the caller's transaction;
 * null when no enabled webhook of the job's tenant listens for `type` (then it costs one index lookup). The
 * sums are read as float8 (exact JS numbers up to 2^53): a sum over tasks passes 32 bits where each
 * task's count does not, and an overflow would fail the transaction that ends the job.
 */
export async function findJobEventFacts(tx: Queryable, jobId: string, type: WebhookEventType): Promise<JobEventFacts | null> {
  const { rows } = await tx.query<Omit<JobEventFacts, 'feed'> & { feed_seq: string; feed_epoch: string }>(
    `select j.id, j.connection_id, j.job_type, j.trigger, j.status, j.started_at, j.finished_at, j.last_error,
            c.added, c.updated, c.deleted, c.unchanged,
            (select coalesce(max(r.change_seq), 0)::text from records r where r.connection_id = j.connection_id) as feed_seq,
            (select coalesce(max(p.id), 0)::text from feed_purges p) as feed_epoch
       from sync_jobs j,
            lateral (select coalesce(sum(t.added_count), 0)::float8 as added, coalesce(sum(t.updated_count), 0)::float8 as updated,
                            coalesce(sum(t.deleted_count), 0)::float8 as deleted, coalesce(sum(t.unchanged_count), 0)::float8 as unchanged
                       from sync_tasks t where t.job_id = j.id) c
      where j.id = $1 and exists (select 1 from webhooks w where w.tenant_id = j.tenant_id and $2 = any (w.event_types) and w.disabled_at is null)`,
    [jobId, type],
  );
  const row = rows[0];
  if (!row) return null;
  const { feed_seq, feed_epoch, ...facts } = row;
  return { ...facts, feed: { seq: feed_seq, epoch: feed_epoch, connection: facts.connection_id } };
}

/** What the delivery activity needs: the endpoint, its secrets (as stored: sealed), the event. */
export interface DeliveryTarget {
  id: string;
  status: DeliveryStatus;
  webhook_id: string;
  url: string;
  secret: string;
  /** The secret a rotation replaced, while its overlap lasts (the database's clock); else null. */
  previous_secret: string | null;
  event_id: string;
  event_type: WebhookEventType;
  tenant_id: string;
  payload: Record<string, unknown>;
  /** The event's connection (null for an event of none). */
  event_connection_id: string | null;
  event_created_at: Date;
  /** Why the webhook is disabled (no request is made to it), or null while it is enabled. */
  disabled_reason: string | null;
}

/** A delivery with its webhook and event, or null (its webhook was deleted). */
export async function findDeliveryTarget(db: Queryable, deliveryId: string): Promise<DeliveryTarget | null> {
  const { rows } = await db.query<DeliveryTarget>(
    `select d.id, d.status, d.webhook_id, w.url, w.secret,
            case when w.previous_secret_expires_at > now() then w.previous_secret end as previous_secret, e.id as event_id, e.event_type, e.tenant_id, e.payload, e.connection_id as event_connection_id, e.created_at as event_created_at,
            w.disabled_reason
       from webhook_deliveries d join webhooks w on w.id = d.webhook_id join webhook_events e on e.id = d.event_id
      where d.id = $1`,
    [deliveryId],
  );
  return rows[0] ?? null;
}

/**
 * Records one attempt of a delivery (numbered after the ones before, across redeliveries) and its
 * outcome: `delivered` on a 2xx answer, else still pending with the last status code or error.
 * `scheduledAt` is when Temporal scheduled the attempt (the server's clock, which its retry delays
 * run on); the round's first attempt keeps its own as the round's start. Returns the attempts made
 * in the delivery's current round (a redelivery starts a new one), this one included, and when the
 * round started; null when the delivery is gone.
 */
export async function recordDeliveryAttempt(
  tx: Queryable,
  attempt: { deliveryId: string; statusCode: number | null; error: string | null; durationMs: number; at: Date; delivered: boolean; scheduledAt: Date },
): Promise<{ made: number; roundStartedAt: Date } | null> {
  const { rows } = await tx.query<{ attempts: number; round_attempts_before: number; round_started_at: Date }>(
    `update webhook_deliveries
        set attempts = attempts + 1, last_status_code = $2, last_error = $3,
            status = case when $5 then ${DELIVERY.delivered} else status end,
            finished_at = case when $5 then $4 else finished_at end,
            round_started_at = coalesce(round_started_at, $6)
      where id = $1
      returning attempts, round_attempts_before, round_started_at`,
    [attempt.deliveryId, attempt.statusCode, attempt.error, attempt.at, attempt.delivered, attempt.scheduledAt],
  );
  if (!rows[0]) return null;
  await tx.query(
    'insert into webhook_delivery_attempts (delivery_id, attempt, status_code, error, duration_ms, at) values ($1, $2, $3, $4, $5, $6)',
    [attempt.deliveryId, rows[0].attempts, attempt.statusCode, attempt.error, attempt.durationMs, attempt.at],
  );
  return { made: rows[0].attempts - rows[0].round_attempts_before, roundStartedAt: rows[0].round_started_at };
}

/**
 * Ends a still-pending delivery of a disabled webhook failed at `at`, without an attempt: its
 * last error says it was not sent and why the webhook is disabled. Redelivered once the webhook
 * is enabled again, it is sent as any failed delivery is.
 */
export async function failUnsentDelivery(db: Queryable, deliveryId: string, at: Date, disabledReason: string): Promise<void> {
  await db.query(
    `update webhook_deliveries set status = ${DELIVERY.failed}, finished_at = $2, last_error = $3
      where id = $1 and status = ${DELIVERY.pending}`,
    [deliveryId, at, `not sent: the webhook is disabled (${disabledReason})`],
  );
}

/**
 * A round that never reached the receiver ends only at its run's bound, at least this long after
 * the run (and so the redelivery before it) began: DELIVERY_GIVE_UP_HOURS (runs of the older
 * shape) or DELIVERY_WORKFLOW_LIMIT_HOURS.
 */
const UNATTEMPTED_ROUND_MIN_MS = Math.min(DELIVERY_GIVE_UP_HOURS, DELIVERY_WORKFLOW_LIMIT_HOURS) * 3_600_000;

/**
 * Marks a still-pending delivery failed for good (its retries ran out at `at`, the workflow's
 * clock, which is the Temporal server's), unless that failure was the round's before a
 * redelivery (its failing step run again after its answer was lost): never decided by comparing
 * `at` with `reopened_at`, which is the API's clock. A delivery never redelivered fails. Else the
 * round must have begun by the server's clock before `at` (`round_started_at`, when the server
 * scheduled the round's first real attempt; a new round's run starts only once the run before
 * has closed, so the earlier round's step never sees it set); a round with no real attempt ends
 * only at its run's bound, a day or more after the redelivery, so it fails when `at` is more
 * than half of that after `reopened_at`, a margin no clock skew between processes reaches.
 */
export async function failDelivery(db: Queryable, deliveryId: string, at: Date): Promise<void> {
  await db.query(
    `update webhook_deliveries set status = ${DELIVERY.failed}, finished_at = $2
      where id = $1 and status = ${DELIVERY.pending}
        and (reopened_at is null
             or round_started_at <= $2
             or (round_started_at is null and reopened_at < $2::timestamptz - make_interval(secs => $3::double precision / 1000)))`,
    [deliveryId, at, UNATTEMPTED_ROUND_MIN_MS / 2],
  );
}

/**
 * Pending deliveries created before `before` and not among `running` (those whose workflow is
 * known to run): the ones whose workflow may have died or never started, at most `limit`, each
 * tenant's oldest in turn (every tenant's oldest, then every tenant's second oldest, …, oldest
 * first within a turn), so one tenant's backlog (a burst of events while Temporal was away) does
 * not hold another tenant's deliveries back for as many ticks as it takes to start it.
 */
export async function findPendingDeliveries(db: Queryable, before: Date, running: string[], limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `select waiting.id from (
       select d.id, d.created_at, row_number() over (partition by w.tenant_id order by d.created_at, d.id) as turn
         from webhook_deliveries d join webhooks w on w.id = d.webhook_id
        where d.status = ${DELIVERY.pending} and d.created_at < $1 and not (d.id = any ($2::uuid[]))) waiting
      order by waiting.turn, waiting.created_at, waiting.id limit $3`,
    [before, running, limit],
  );
  return rows.map((r) => r.id);
}

/** A delivery as listed. */
export interface DeliveryRow {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: WebhookEventType;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  finished_at: Date | null;
  /** Every attempt so far, oldest first. */
  attempt_log: { attempt: number; status_code: number | null; error: string | null; duration_ms: number; at: string }[];
}

/** A listed delivery, with its created_at as exact text (`exactTime`): the time of its keyset position. */
export interface ListedDeliveryRow extends DeliveryRow {
  created_at_exact: string;
}

/**
 * A page of a webhook's deliveries, newest first, with their attempts; `before` is the previous
 * page's last (created_at, id), its time as exact text.
 */
export async function listDeliveries(
  db: Queryable,
  query: { webhookId: string; before?: TimePosition; limit: number },
): Promise<{ rows: ListedDeliveryRow[]; more: boolean }> {
  const { rows } = await db.query<ListedDeliveryRow>(
    `select d.id, d.webhook_id, d.event_id, e.event_type, d.status, d.attempts, d.last_status_code, d.last_error, d.created_at, d.finished_at,
            ${exactTime('d.created_at')} as created_at_exact,
            coalesce((select json_agg(json_build_object('attempt', a.attempt, 'status_code', a.status_code, 'error', a.error,
                                                        'duration_ms', a.duration_ms, 'at', a.at) order by a.attempt)
                        from webhook_delivery_attempts a where a.delivery_id = d.id), '[]'::json) as attempt_log
       from webhook_deliveries d join webhook_events e on e.id = d.event_id
      where d.webhook_id = $1 and ($2::timestamptz is null or (d.created_at, d.id) < ($2::timestamptz, $3::uuid))
      order by d.created_at desc, d.id desc limit $4`,
    [query.webhookId, query.before?.createdAt ?? null, query.before?.id ?? null, query.limit + 1],
  );
  return { rows: rows.slice(0, query.limit), more: rows.length > query.limit };
}

/**
 * One delivery of a webhook, or null, locked until the end of the caller's transaction: a
 * redelivery of it running beside this one waits, then reads the status that one left.
 */
export async function findDeliveryForUpdate(db: Queryable, webhookId: string, deliveryId: string): Promise<{ id: string; status: DeliveryStatus } | null> {
  const { rows } = await db.query<{ id: string; status: DeliveryStatus }>(
    'select id, status from webhook_deliveries where webhook_id = $1 and id = $2 for no key update',
    [webhookId, deliveryId],
  );
  return rows[0] ?? null;
}

/**
 * Puts a finished delivery back to pending at `at` for another round of attempts (its attempts are
 * kept; the round's are counted after them, its start is its first attempt's).
 */
export async function reopenDelivery(db: Queryable, deliveryId: string, at: Date): Promise<void> {
  await db.query(
    `update webhook_deliveries
        set status = ${DELIVERY.pending}, finished_at = null, round_attempts_before = attempts, round_started_at = null, reopened_at = $2
      where id = $1`,
    [deliveryId, at],
  );
}

/**
 * The answer of a batch delete written as CTEs `chosen` (the rows it picked, at most its limit)
 * and `deleted` (its data-modifying CTE): how many it chose and how many of them it deleted.
 */
export const BATCH_COUNTS = 'select (select count(*) from chosen)::int as chosen, (select count(*) from deleted)::int as deleted';

/** SQL of whether event `e` is finished: none of its deliveries is still pending. */
export const FINISHED_EVENT = `not exists (select 1 from webhook_deliveries d where d.event_id = e.id and d.status = ${DELIVERY.pending})`;

/**
 * A statement deleting up to `$2` events matching `filter` (on `e`, with `$1`) none of whose
 * deliveries is pending, with their deliveries and attempts (by cascade); it answers one row: how
 * many events it chose (`chosen`) and how many of them it deleted (`deleted`). The chosen events are
 * locked first, in id order, then their deliveries, in id order: two such statements choosing
 * overlapping events (a connection's purge and the retention clean-up) take their locks in one
 * order, so one waits for the other instead of each holding an event the other deletes (events
 * whose webhook was deleted have no delivery to lock, so the deliveries alone do not order them).
 * Each chosen event's deliveries are read again as last committed before the event goes: a
 * redelivery that claimed one of them (it locks the delivery, then writes it pending) and commits
 * while this statement runs keeps its event, so a redelivery answered 202 is never deleted under it.
 */
export function deleteFinishedEventsSql(filter: string): string {
  return `with chosen as (
       select e.id from webhook_events e
        where ${filter} and ${FINISHED_EVENT}
        limit $2),
     events as (
       select id from webhook_events where id in (select id from chosen) order by id for update),
     deliveries as (
       select d.event_id, d.status from webhook_deliveries d where d.event_id in (select id from events) order by d.id for update),
     deleted as (
       delete from webhook_events where id in (select id from events)
          and not exists (select 1 from deliveries d where d.event_id = webhook_events.id and d.status = ${DELIVERY.pending})
       returning 1)
     ${BATCH_COUNTS}`;
}

/**
 * Whether an event older than `before` whose deliveries all finished is left: a batch of
 * `deleteOldEventsBatch` that deleted fewer than its limit may have lost events it chose (to a
 * connection's purge, or a redelivery) while others it did not choose remain.
 */
export async function oldFinishedEventsLeft(db: Queryable, before: Date): Promise<boolean> {
  const { rows } = await db.query<{ left: boolean }>(
    `select exists (select 1 from webhook_events e where e.created_at < $1
                       and ${FINISHED_EVENT}) as left`,
    [before],
  );
  return rows[0]!.left;
}

/** Deletes up to `limit` events older than `before` whose deliveries all finished; returns how many. */
export async function deleteOldEventsBatch(db: Queryable, before: Date, limit: number): Promise<number> {
  const { rows } = await db.query<{ deleted: number }>(deleteFinishedEventsSql('e.created_at < $1'), [before, limit]);
  return rows[0]!.deleted;
}

const sealedColumn = sealedTextColumn('webhooks', 'secret');

/** The next `limit` webhooks after `afterId` whose secret is not sealed under key `activeId` (legacy plaintext, or another key). */
export const listSecretsToReseal = sealedColumn.listToReseal;

/** Replaces webhook `id`'s secret with `sealed` only if it still is `stored` (compare and set). */
export const replaceSecret = sealedColumn.replace;

/** How many webhooks have a secret not sealed under key `activeId`. */
export const countSecretsToReseal = sealedColumn.countToReseal;

// The previous secret of a rotation (null when none is kept: never listed nor counted).
const sealedPreviousColumn = sealedTextColumn('webhooks', 'previous_secret');

/** The next `limit` webhooks after `afterId` whose previous secret is not sealed under key `activeId`. */
export const listPreviousSecretsToReseal = sealedPreviousColumn.listToReseal;

/** Replaces webhook `id`'s previous secret with `sealed` only if it still is `stored` (compare and set). */
export const replacePreviousSecret = sealedPreviousColumn.replace;

/** How many webhooks keep a previous secret not sealed under key `activeId`. */
export const countPreviousSecretsToReseal = sealedPreviousColumn.countToReseal;

/** How many deliveries are pending, and the age in seconds of the oldest (0 when none). */
export async function findWebhookBacklog(db: Queryable): Promise<{ pending: number; oldestSeconds: number }> {
  const { rows } = await db.query<{ pending: number; oldest_seconds: number }>(
    `select count(*)::int as pending,
            coalesce(extract(epoch from now() - min(created_at)), 0)::float8 as oldest_seconds
       from webhook_deliveries where status = ${DELIVERY.pending}`,
  );
  return { pending: rows[0]!.pending, oldestSeconds: rows[0]!.oldest_seconds };
}
