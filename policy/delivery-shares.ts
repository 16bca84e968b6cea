// How a worker process shares its webhook delivery attempts between tenants. A delivery attempt
// holds one of the worker's activity slots for as long as the receiver takes to answer (up to the
// delivery timeout), and the same slots run sync jobs: so attempts running at once are capped at
// WEBHOOK_DELIVERY_SLOTS, below the activity slots, and each tenant with deliveries to make gets
// an equal share of that cap. A tenant whose receivers hang (or who has many webhooks) thus delays
// neither other tenants' syncs nor, beyond one attempt's timeout, their deliveries. An attempt over
// the cap or its tenant's share is not made: it is deferred (retried later without calling the
// receiver or counting as an attempt of the delivery), and its tenant counts as waiting for a
// while, which lowers the shares of the tenants running attempts.
//
// The retry schedule of real attempts lives here too, so that deferred turns do not stretch it:
// the delivery workflow's retry policy and an attempt's own next-retry delay follow one rule, and
// the 25 hours before a delivery is given up count from its first real attempt.

/** Delay before the second attempt of a delivery; it doubles per attempt. */
export const DELIVERY_RETRY_INITIAL_SECONDS = 10;
/** No delivery waits longer than this between two attempts. */
export const DELIVERY_RETRY_MAX_SECONDS = 3600;
/** A delivery is given up once its next attempt would come this long after its round's first real attempt. */
export const DELIVERY_GIVE_UP_HOURS = 25;
/**
 * A delivery's run gives up this long after it was first scheduled, attempted or not: the bound
 * of a round deferred for a day on an overloaded worker, or failing before it reaches the
 * receiver (its secret cannot be opened, the database is away).
 */
export const DELIVERY_WORKFLOW_LIMIT_HOURS = 48;

/** Whether a delivery whose round's first real attempt was at `firstAttemptAt` is given up rather than retried after `nextDelaySeconds` (epoch ms). */
export function deliveryGivenUp(firstAttemptAt: number, now: number, nextDelaySeconds: number): boolean {
  return now + nextDelaySeconds * 1000 - firstAttemptAt >= DELIVERY_GIVE_UP_HOURS * 3_600_000;
}

/**
 * Delay before the next attempt of a delivery that has made `attempts` attempts (1: the first
 * failed): 10 s doubling per attempt, at most 1 hour (10 s, 20 s, … ~1.4 h to reach the cap).
 */
export function deliveryRetrySeconds(attempts: number): number {
  const n = Number.isFinite(attempts) ? Math.max(1, Math.floor(attempts)) : 1;
  return Math.min(DELIVERY_RETRY_INITIAL_SECONDS * 2 ** (n - 1), DELIVERY_RETRY_MAX_SECONDS);
}

/** The answers whose `Retry-After` a delivery honours: Too Many Requests and Service Unavailable. */
export const RETRY_AFTER_STATUSES: readonly number[] = [429, 503];
/**
 * The longest wait a receiver's `Retry-After` sets: the schedule's largest delay (1 hour), so a
 * receiver asking for days still gets its attempts within the hours a delivery is tried.
 */
export const RETRY_AFTER_MAX_SECONDS = DELIVERY_RETRY_MAX_SECONDS;

/**
 * Delay before the next attempt of a delivery that has made `attempts` attempts, the last
 * answered with `status` and a `Retry-After` of `retryAfterSeconds` (undefined: none, or none
 * readable): the schedule's delay (deliveryRetrySeconds), or longer when a 429 or 503 asked to
 * wait longer, at most RETRY_AFTER_MAX_SECONDS. A Retry-After on any other answer, or shorter
 * than the schedule's delay, changes nothing.
 */
export function nextDeliverySeconds(attempts: number, status: number | null, retryAfterSeconds: number | undefined): number {
  const scheduled = deliveryRetrySeconds(attempts);
  if (status === null || !RETRY_AFTER_STATUSES.includes(status) || retryAfterSeconds === undefined || !Number.isFinite(retryAfterSeconds)) return scheduled;
  return Math.max(scheduled, Math.min(retryAfterSeconds, RETRY_AFTER_MAX_SECONDS));
}

/** Default of WEBHOOK_DELIVERY_SLOTS: a fifth of the SDK's 100 activity slots. */
export const DEFAULT_DELIVERY_SLOTS = 20;

/** First delay of a deferred attempt; it grows by half per turn of the same delivery. */
export const DEFERRED_FIRST_SECONDS = 2;
/** A deferred attempt waits at most this long (before jitter) for its next turn. */
export const DEFERRED_MAX_SECONDS = 60;
/**
 * A tenant counts as waiting this long after its last deferred attempt: longer than the longest
 * deferral with its jitter, so a tenant keeps its place between its attempts' turns.
 */
export const DEFERRED_WAITING_MS = 2 * 1.5 * DEFERRED_MAX_SECONDS * 1000;

/**
 * A tenant's share of `slots` while `tenantsWithWork` tenants run or wait for attempts: equal
 * parts rounded up (so that no place stays idle while tenants wait; the slots still cap the
 * total), one at least.
 */
export function deliveryShare(slots: number, tenantsWithWork: number): number {
  return Math.max(1, Math.ceil(slots / Math.max(1, tenantsWithWork)));
}

/** Whether one more attempt of a tenant may start: a slot is free and the tenant runs fewer than its share. */
export function mayAttemptDelivery(s: { running: number; slots: number; tenantRunning: number; share: number }): boolean {
  return s.running < s.slots && s.tenantRunning < s.share;
}

/**
 * Delay of a deferred attempt on its `turn` (the activity's attempt number, 1 first): 2 s growing
 * by half per turn up to 60 s, times 1 to 1.5 by `random` (uniform in [0, 1)), so that deferred
 * attempts neither come back together nor spin while a slow tenant holds its share.
 */
export function deferredDeliverySeconds(turn: number, random: number): number {
  const n = Number.isFinite(turn) ? Math.max(1, Math.floor(turn)) : 1;
  const base = Math.min(DEFERRED_FIRST_SECONDS * 1.5 ** (n - 1), DEFERRED_MAX_SECONDS);
  const u = Number.isFinite(random) ? Math.min(Math.max(random, 0), 1) : 0;
  return Math.round(base * (1 + 0.5 * u) * 1000) / 1000;
}
