// Contract of webhook deliveries: one `webhook-delivery:<delivery_id>` workflow delivers one event
// to one endpoint, retrying with exponential backoff for at least 24 hours.
/** Workflow type name of a webhook delivery. */
export const WEBHOOK_DELIVERY_WORKFLOW = 'webhookDeliveryWorkflow';

/** Which delivery to make. */
export interface WebhookDeliveryInput {
  deliveryId: string;
}

/** How a delivery ended: delivered (a 2xx answer), failed (retries ran out), dropped (its webhook was deleted). */
export type WebhookDeliveryOutcome = 'delivered' | 'failed' | 'dropped';

/** The webhook-delivery workflow's signature, which clients start it by. */
export type WebhookDeliveryWorkflow = (input: WebhookDeliveryInput) => Promise<WebhookDeliveryOutcome>;
