// One webhook delivery: attempts with exponential backoff (10 s doubling to at most 1 h) for at
// least 24 hours, then marks the delivery failed. Each attempt is recorded by the activity; the
// workflow is visible as `webhook-delivery:<delivery_id>`.
import { ActivityFailure, proxyActivities } from '@temporalio/workflow';
import { DELIVERY_GIVE_UP_HOURS, DELIVERY_RETRY_INITIAL_SECONDS, DELIVERY_RETRY_MAX_SECONDS } from '../policy/delivery-shares';
import type { Activities } from '../temporal/activities';
import type { WebhookDeliveryInput, WebhookDeliveryOutcome, WebhookDeliveryWorkflow } from '../temporal/webhook-delivery';

const { deliverWebhook } = proxyActivities<Activities>({
  // One attempt: the HTTP call is bounded at 10 s; the rest is three short queries.
  startToCloseTimeout: '30 seconds',
  // 10 s, 20 s, … 1 h between attempts: ~1.4 h to reach the cap, then hourly, for 25 hours. An
  // attempt sets its own next delay by the same rule (deliveryRetrySeconds), counting only real
  // attempts, and a deferred one (no place free: policy/delivery-shares.ts) a short one.
  scheduleToCloseTimeout: `${DELIVERY_GIVE_UP_HOURS} hours`,
  retry: { initialInterval: `${DELIVERY_RETRY_INITIAL_SECONDS} seconds`, backoffCoefficient: 2, maximumInterval: `${DELIVERY_RETRY_MAX_SECONDS} seconds` },
});
const { failWebhookDelivery } = proxyActivities<Activities>({ startToCloseTimeout: '30 seconds' });

/** Delivers one event to one endpoint, retrying until it is accepted or 25 hours have passed. */
export async function webhookDeliveryWorkflow({ deliveryId }: WebhookDeliveryInput): Promise<WebhookDeliveryOutcome> {
  try {
    return await deliverWebhook({ deliveryId });
  } catch (err) {
    if (!(err instanceof ActivityFailure)) throw err;
    await failWebhookDelivery({ deliveryId, at: Date.now() });
    return 'failed';
  }
}

webhookDeliveryWorkflow satisfies WebhookDeliveryWorkflow;
