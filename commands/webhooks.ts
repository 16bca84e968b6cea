// Commands on webhooks: a tenant's endpoints, their deliveries, and redelivery.
import { randomUUID } from 'node:crypto';
import * as webhooks from '../db/models/webhooks';
import { seal } from '../lib/credentials';
import type { DeliveryRow, WebhookRow } from '../db/models/webhooks';
import { outboundUrlProblem } from '../lib/outbound';
import { newWebhookSecret } from '../lib/webhook-signature';
import type { WebhookEventType } from '../policy/vocabulary';
import { startWebhookDeliveries } from '../temporal/client';
import type { CommandDeps } from './deps';
import { CommandRefused, invalid, notFound } from './errors';

export type { DeliveryRow, WebhookRow };

/** A new webhook: where to send which events, for which tenant. */
export interface NewWebhook {
  tenantId: string;
  url: string;
  eventTypes: WebhookEventType[];
}

/**
 * Creates a webhook with a new signing secret and returns both: the only time the secret is
 * shown. The URL must be http(s) without credentials, and, unless WEBHOOK_ALLOW_PRIVATE, must not
 * name a loopback, private or link-local address (names are checked again when resolved).
 */
export async function createWebhook(deps: CommandDeps, hook: NewWebhook): Promise<{ webhook: WebhookRow; secret: string }> {
  const problem = outboundUrlProblem(hook.url, deps.webhookAllowPrivate ?? false);
  if (problem) throw invalid(`url: ${problem}`);
  const secret = newWebhookSecret();
  const id = randomUUID();
  // Sealed like provider credentials: HMAC needs the secret itself, so it cannot be a hash.
  const sealedSecret = seal(deps.credentials, { table: 'webhooks', id }, secret);
  const webhook = await webhooks.insertWebhook(deps.pool, { ...hook, id, eventTypes: [...new Set(hook.eventTypes)], sealedSecret });
  return { webhook, secret };
}

/** One webhook (without its secret), or a not_found refusal. */
export async function getWebhook(deps: CommandDeps, id: string): Promise<WebhookRow> {
  const row = await webhooks.findWebhook(deps.pool, id);
  if (!row) throw notFound('no webhook with that id');
  return row;
}

/** A page of webhooks by id, optionally one tenant's. */
export function listWebhooks(deps: CommandDeps, query: { tenantId?: string; afterId?: string; limit: number }) {
  return webhooks.listWebhooks(deps.pool, query);
}

/** Deletes a webhook and its deliveries; deliveries still retrying stop at their next attempt. */
export async function deleteWebhook(deps: CommandDeps, id: string): Promise<void> {
  if (!(await webhooks.deleteWebhook(deps.pool, id))) throw notFound('no webhook with that id');
}

/** A page of a webhook's deliveries, newest first, each with its attempts. */
export async function listDeliveries(deps: CommandDeps, webhookId: string, query: { before?: { createdAt: Date; id: string }; limit: number }) {
  await getWebhook(deps, webhookId);
  return webhooks.listDeliveries(deps.pool, { webhookId, ...query });
}

/**
 * Sends a delivery again: a finished one (delivered or failed) goes back to pending and gets a
 * new delivery workflow run, with the same event id, so a receiver can still deduplicate. A
 * delivery still pending is already being retried: refused with `delivery_pending`.
 */
export async function redeliver(deps: CommandDeps, webhookId: string, deliveryId: string): Promise<void> {
  const delivery = await webhooks.findDelivery(deps.pool, webhookId, deliveryId);
  if (!delivery) throw notFound('no delivery with that id for this webhook');
  if (delivery.status === 'pending') throw new CommandRefused('conflict', 'delivery_pending', 'the delivery is still being attempted');
  await webhooks.reopenDelivery(deps.pool, deliveryId);
  // A start that fails, or finds the previous run still closing, is made by the reconcile tick.
  await startWebhookDeliveries(deps.temporal, deps.taskQueue, [deliveryId]);
}
