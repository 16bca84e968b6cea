// Webhook deliveries from the worker's side: starting the delivery workflows of events just
// committed, and the delivery attempt itself (signed, bounded, recorded).
import { Context } from '@temporalio/activity';
import { openWebhookSecret } from '../lib/credentials';
import { feedCursors, withSealedCursor } from '../lib/feed-cursors';
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import { type DeliveryTarget, disableWebhook, failDelivery, failUnsentDelivery, findDeliveryTarget, recordDeliveryAttempt } from '../db/models/webhooks';
import { deferredDeliverySeconds, DELIVERY_GIVE_UP_HOURS, deliveryGivenUp, deliveryRetrySeconds, nextDeliverySeconds } from '../policy/delivery-shares';
import { withTransaction } from '../db/transaction';
import { CertificateRefused, MalformedAnswer, postBounded } from '../lib/outbound';
import { SIGNATURE_HEADER, signWebhook, standardWebhookHeaders } from '../lib/webhook-signature';
import type { Activities } from '../temporal/activities';
import { startWebhookDeliveries } from '../temporal/client';
import type { ActivityDeps } from './deps';

/** A receiver gets this long to answer one attempt. */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** The failure type of an attempt deferred for want of a place (policy/delivery-shares.ts). */
export const DELIVERY_DEFERRED = 'WebhookDeliveryDeferred';
/** The failure type of an attempt that failed on this side, before or after calling the receiver. */
const DELIVERY_ATTEMPT_ERROR = 'WebhookAttemptError';
/** The failure type of an attempt answered 410 Gone: the delivery ends failed, not retried. */
const WEBHOOK_RECEIVER_GONE = 'WebhookReceiverGone';
/** At most this much of a receiver's answer is read (and dropped). */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * Starts the delivery workflows of deliveries whose rows just committed, without waiting: the
 * caller's work (a job's end) never waits for Temporal on their behalf, and a start that fails is
 * made by the reconcile tick, which starts every pending delivery whose workflow is not running.
 */
export function startDeliveriesSoon(deps: Pick<ActivityDeps, 'temporal' | 'taskQueue' | 'logger'>, deliveryIds: string[]): void {
  if (deliveryIds.length === 0) return;
  void startWebhookDeliveries(deps.temporal, deps.taskQueue, deliveryIds).then(
    (started) => {
      if (started.length < deliveryIds.length) deps.logger.warn({ deliveries: deliveryIds.length - started.length }, 'webhook delivery start deferred to the reconcile tick');
    },
    (err: unknown) => deps.logger.warn({ err: (err as Error).message, deliveries: deliveryIds.length }, 'webhook delivery start deferred to the reconcile tick'),
  );
}

/**
 * One attempt to deliver an event to its endpoint: POSTs the event body (the same bytes on every
 * attempt) signed with the webhook's secret (and with the secret a rotation replaced, while its
 * overlap lasts) and carrying the event id as idempotency key, records
 * the attempt with its status code, and returns on a 2xx answer. A 410 Gone ends the delivery
 * failed at once (a non-retryable failure: the receiver takes no more webhooks there) and
 * disables the webhook; a pending delivery of a disabled webhook ends failed at its next attempt
 * without a request (its last error says why), so no run of it is left to restart. Any other
 * answer, or none, is a retryable failure, retried after the delivery schedule's delay for the attempts made in this
 * round, or after the wait a 429 or 503 asked for with Retry-After when longer (at most an hour). A delivery whose webhook was deleted is dropped, also when the deletion came while the attempt was in flight (whatever the receiver answered); one no longer pending (delivered, or
 * given up) is not sent again: a run started for it late (the reconcile tick restarting what it
 * saw pending a moment earlier) ends at once. An attempt that finds no place among the process's
 * delivery attempts (all taken, or its tenant runs its share) calls no one: it is deferred.
 */
export function deliverWebhook({ pool, webhooks, credentials, metrics }: ActivityDeps): Activities['deliverWebhook'] {
  return async ({ deliveryId }) => {
    try {
      const target = await findDeliveryTarget(pool, deliveryId);
      if (!target) return 'dropped';
      if (target.status !== 'pending') return target.status;
      if (target.disabled_reason !== null) {
        await failUnsentDelivery(pool, deliveryId, new Date(), target.disabled_reason);
        return 'failed';
      }
      const release = webhooks.shares.take(target.tenant_id);
      if (release === null) {
        metrics.webhookDeliveriesDeferred.inc();
        throw ApplicationFailure.create({
          message: 'deferred: the worker runs its share of delivery attempts for this tenant (WEBHOOK_DELIVERY_SLOTS)',
          type: DELIVERY_DEFERRED,
          nextRetryDelay: `${deferredDeliverySeconds(Context.current().info.attempt, Math.random())} seconds`,
          // Expected under load: not an error in the SDK's logs and metrics.
          category: ApplicationFailureCategory.BENIGN,
        });
      }
      try {
        return await attempt(pool, webhooks, credentials, target);
      } finally {
        release();
      }
    } catch (err) {
      if (err instanceof ApplicationFailure) throw err;
      // Failed on this side (the database, the secret): back again like a deferred turn, so the
      // retry policy's own delay (which counts deferred turns as attempts) never applies.
      throw ApplicationFailure.create({
        message: (err as Error).message,
        type: DELIVERY_ATTEMPT_ERROR,
        nextRetryDelay: `${deferredDeliverySeconds(Context.current().info.attempt, Math.random())} seconds`,
        cause: err as Error,
      });
    }
  };
}

/**
 * Sends one attempt of `target` and records it; throws the retryable failure of an attempt not
 * accepted, unless its delivery was deleted meanwhile (its webhook deleted): then 'dropped'.
 */
async function attempt(
  pool: ActivityDeps['pool'],
  webhooks: ActivityDeps['webhooks'],
  credentials: ActivityDeps['credentials'],
  target: DeliveryTarget,
): Promise<'delivered' | 'dropped'> {
  const deliveryId = target.id;
  const body = JSON.stringify({
    id: target.event_id,
    type: target.event_type,
    created_at: target.event_created_at.toISOString(),
    tenant_id: target.tenant_id,
    // A `sync.*` event's feed cursor was sealed when the event was written; one stored plain (an
    // event written before that) is sealed here, as the feed's own cursors are, scoped to the event's connection.
    data: withSealedCursor(target.payload, feedCursors(credentials), target.event_connection_id),
  });
  // Signed both ways with one timestamp: Standard Webhooks (webhook-id is the event id, the same
  // on every retry and redelivery) and, for a deprecation period, the older Synctide-* headers.
  // While a rotation's overlap lasts, both headers carry the previous secret's signature after the
  // current one's.
  const secret = openWebhookSecret(credentials, target.webhook_id, target.secret);
  const secrets: [string, ...string[]] = [secret];
  if (target.previous_secret !== null) secrets.push(openWebhookSecret(credentials, target.webhook_id, target.previous_secret));
  const timestamp = Math.floor(Date.now() / 1000);
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'Synctide-Webhooks/1',
    ...standardWebhookHeaders(secrets, target.event_id, timestamp, body),
    'synctide-event-id': target.event_id,
    'synctide-event-type': target.event_type,
    'synctide-delivery-id': target.id,
    [SIGNATURE_HEADER]: signWebhook(secrets, timestamp, body),
  };
  const startedAt = Date.now();
  let statusCode: number | null = null;
  let retryAfter: number | undefined;
  let error: string | null = null;
  // An answer Node's HTTP parser refused (oversized or malformed headers) is an answer, not none:
  // said so, naming the receiver's host (nothing else of its URL, which may carry a secret). A
  // certificate refused is said as it is (its message names the host and why).
  let unreadable = false;
  let certificate = false;
  try {
    const timeoutMs = webhooks.timeoutMs ?? DELIVERY_TIMEOUT_MS;
    const answer = await postBounded(target.url, body, headers, { timeoutMs, maxResponseBytes: MAX_ANSWER_BYTES, allowPrivate: webhooks.allowPrivate });
    statusCode = answer.status;
    retryAfter = answer.retryAfterSeconds;
  } catch (err) {
    unreadable = err instanceof MalformedAnswer;
    certificate = err instanceof CertificateRefused;
    error = unreadable ? `the receiver at '${new URL(target.url).hostname}' answered, but ${(err as Error).message}` : (err as Error).message;
  }
  const delivered = statusCode !== null && statusCode >= 200 && statusCode < 300;
  // The delivery's schedule runs on the server's clock: when this attempt was scheduled, by it.
  const scheduledAt = Context.current().info.currentAttemptScheduledTimestampMs;
  const at = new Date();
  const round = await withTransaction(pool, async (tx) => {
    const recorded = await recordDeliveryAttempt(tx, { deliveryId, statusCode, error, durationMs: Date.now() - startedAt, at, delivered, scheduledAt: new Date(scheduledAt) });
    // 410 Gone disables the webhook with the attempt that heard it (unless it was deleted meanwhile).
    if (recorded !== null && statusCode === 410) {
      await disableWebhook(tx, target.webhook_id, at, `the receiver answered 410 Gone at ${at.toISOString()}`);
    }
    return recorded;
  });
  if (delivered) return 'delivered';
  // The delivery is gone (its webhook was deleted while the attempt was in flight): nothing is
  // left to retry, so the run ends as it would at its next attempt.
  if (round === null) return 'dropped';
  // 410 Gone: the receiver takes no more webhooks from this sender, and a sender stops sending to
  // it (Standard Webhooks). The delivery fails now, its attempt recorded with the 410 (the workflow
  // marks it failed when the activity fails for good), and the webhook is disabled: each other
  // pending delivery to it ends failed at its next attempt without a request, and new events
  // make no delivery to it until it is enabled again.
  if (statusCode === 410) {
    throw ApplicationFailure.nonRetryable(
      'the receiver answered 410 Gone: it takes no more webhooks at this URL, so the delivery is not retried',
      WEBHOOK_RECEIVER_GONE,
    );
  }
  // Any other answer but a 2xx, or none, is retried on the schedule: a receiver's owner may repair it
  // (a malformed answer, a certificate refused too) within the hours a delivery is tried.
  // The attempts of this round (a redelivery starts a new one) set the delay and the give-up,
  // whatever turns were deferred in between; a 429 or 503 asking to wait longer with Retry-After
  // gets its wait, at most an hour (nextDeliverySeconds), and the give-up still counts it.
  const made = round.made;
  const delay = nextDeliverySeconds(made, statusCode, retryAfter);
  const asked = delay > deliveryRetrySeconds(made) ? ` (Retry-After: next attempt in ${delay} s)` : '';
  const message = statusCode !== null ? `the receiver answered ${statusCode}${asked}` : unreadable || certificate ? error! : `no answer: ${error}`;
  if (deliveryGivenUp(round.roundStartedAt.getTime(), scheduledAt, delay)) {
    throw ApplicationFailure.nonRetryable(`given up after ${DELIVERY_GIVE_UP_HOURS} hours of attempts: ${message}`, 'WebhookDeliveryGivenUp');
  }
  throw ApplicationFailure.create({ message, type: 'WebhookNotDelivered', nextRetryDelay: `${delay} seconds` });
}

/** Marks a delivery failed for good once its retries ran out (a delivered one stays delivered). */
export function failWebhookDelivery({ pool }: ActivityDeps): Activities['failWebhookDelivery'] {
  return async ({ deliveryId, at }) => {
    await failDelivery(pool, deliveryId, new Date(at));
  };
}
