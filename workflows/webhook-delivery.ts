// One webhook delivery: attempts with exponential backoff (10 s doubling to at most 1 h) until a
// 2xx, given up 25 hours after the round's first real attempt; then marks the delivery failed.
// Each attempt is recorded by the activity; the workflow is visible as `webhook-delivery:<delivery_id>`.
import { ActivityFailure, patched, proxyActivities } from '@temporalio/workflow';
import {
  DEFERRED_MAX_SECONDS,
  DELIVERY_GIVE_UP_HOURS,
  DELIVERY_RETRY_INITIAL_SECONDS,
  DELIVERY_RETRY_MAX_SECONDS,
  DELIVERY_WORKFLOW_LIMIT_HOURS,
} from '../policy/delivery-shares';
import type { Activities } from '../temporal/activities';
import type { WebhookDeliveryInput, WebhookDeliveryOutcome, WebhookDeliveryWorkflow } from '../temporal/webhook-delivery';

/**
 * The delivery's give-up counts from its first real attempt (the activity decides it), not from
 * when it was scheduled: turns deferred for want of a place do not eat its 25 hours. Runs started
 * before this patch keep the 25 hours from scheduling.
 */
const GIVE_UP_AFTER_REAL_ATTEMPTS_PATCH = 'delivery-give-up-after-real-attempts';

/**
 * Marks the workflow versions in which an attempt that never reported back (its worker died, or it
 * outlived its 30 s) is tried again after the delay of the retry policy for lost attempts (10 s
 * doubling to at most DEFERRED_MAX_SECONDS), not after 10 s doubling to an hour by the activity's
 * attempt number, which counts every deferred turn (a dozen deferred turns made it an hour).
 * Every other attempt sets its own delay, so the policy's delay applies only to a lost one. Runs
 * started before it keep the policy up to an hour.
 */
const LOST_ATTEMPT_RETRY_PATCH = 'delivery-lost-attempt-retried-soon';

/** 10 s, 20 s, … 1 h between attempts; each attempt sets its own next delay by the same rule (deliveryRetrySeconds), counting only real attempts. */
const retry = { initialInterval: `${DELIVERY_RETRY_INITIAL_SECONDS} seconds`, backoffCoefficient: 2, maximumInterval: `${DELIVERY_RETRY_MAX_SECONDS} seconds` };

const { deliverWebhook } = proxyActivities<Activities>({
  // One attempt: the HTTP call is bounded at 10 s; the rest is a few short queries.
  startToCloseTimeout: '30 seconds',
  // A bound only: the activity gives up 25 hours after the round's first real attempt.
  scheduleToCloseTimeout: `${DELIVERY_WORKFLOW_LIMIT_HOURS} hours`,
  retry,
});
/**
 * The same, with the policy's own delay (which only an attempt that never reported back gets: all
 * others set theirs) at most DEFERRED_MAX_SECONDS, since the attempt number it doubles by counts
 * deferred turns too; nextRetryDelay is not bounded by maximumInterval, so real attempts keep
 * their 10 s-to-an-hour schedule.
 */
const { deliverWebhook: deliverWebhookLostSoon } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: `${DELIVERY_WORKFLOW_LIMIT_HOURS} hours`,
  retry: { ...retry, maximumInterval: `${DEFERRED_MAX_SECONDS} seconds` },
});
const { deliverWebhook: deliverWebhookWithin25Hours } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: `${DELIVERY_GIVE_UP_HOURS} hours`,
  retry,
});
const { failWebhookDelivery } = proxyActivities<Activities>({ startToCloseTimeout: '30 seconds' });

/** Delivers one event to one endpoint, retrying until it is accepted or given up. */
export async function webhookDeliveryWorkflow({ deliveryId }: WebhookDeliveryInput): Promise<WebhookDeliveryOutcome> {
  const deliver = !patched(GIVE_UP_AFTER_REAL_ATTEMPTS_PATCH)
    ? deliverWebhookWithin25Hours
    : patched(LOST_ATTEMPT_RETRY_PATCH)
      ? deliverWebhookLostSoon
      : deliverWebhook;
  try {
    return await deliver({ deliveryId });
  } catch (err) {
    if (!(err instanceof ActivityFailure)) throw err;
    await failWebhookDelivery({ deliveryId, at: Date.now() });
    return 'failed';
  }
}

webhookDeliveryWorkflow satisfies WebhookDeliveryWorkflow;
