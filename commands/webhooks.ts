// Commands on webhooks: a tenant's endpoints, their deliveries, and redelivery.
import { randomUUID } from 'node:crypto';
import * as webhooks from '../db/models/webhooks';
import { seal } from '../lib/credentials';
import type { DeliveryRow, RotatedWebhookRow, WebhookRow } from '../db/models/webhooks';
import { outboundUrlProblem } from '../lib/outbound';
import { newWebhookSecret } from '../lib/webhook-signature';
import type { TimePosition } from '../policy/cursors';
import type { WebhookEventType } from '../policy/vocabulary';
import { startWebhookDeliveries } from '../temporal/client';
import { countWebhooks, insertRedelivery, redeliveriesInWindow } from '../db/models/tenant-limits';
import { withTransaction } from '../db/transaction';
import { fitsUnder, redeliveryRetryAfterSeconds } from '../policy/tenant-limits';
import type { CommandDeps } from './deps';
import { lockedLimits, overLimit } from './tenant-limits';
import { CommandRefused, invalid, notFound } from './errors';

export type { DeliveryRow, RotatedWebhookRow, WebhookRow };

/** A new webhook: where to send which events, for which tenant. */
export interface NewWebhook {
  tenantId: string;
  url: string;
  eventTypes: WebhookEventType[];
}

/**
 * Creates a webhook with a new signing secret and returns both: the only time the secret is
 * shown. The URL must be http(s) without credentials, and, unless WEBHOOK_ALLOW_PRIVATE, must not
 * name a loopback, private or link-local address (names are checked again when resolved). One
 * more webhook than the tenant's limit is refused (`tenant_limit`, 409).
 */
export async function createWebhook(deps: CommandDeps, hook: NewWebhook): Promise<{ webhook: WebhookRow; secret: string }> {
  const problem = outboundUrlProblem(hook.url, deps.webhookAllowPrivate ?? false);
  if (problem) throw invalid(`url: ${problem}`);
  const secret = newWebhookSecret();
  const id = randomUUID();
  // Sealed like provider credentials: HMAC needs the secret itself, so it cannot be a hash.
  const sealedSecret = seal(deps.credentials, { table: 'webhooks', id }, secret);
  const webhook = await withTransaction(deps.pool, async (tx) => {
    const max = (await lockedLimits(deps, tx, hook.tenantId)).webhooks;
    if (!fitsUnder(max, await countWebhooks(tx, hook.tenantId))) throw overLimit('webhooks', max, 'webhooks');
    return webhooks.insertWebhook(tx, { ...hook, id, eventTypes: [...new Set(hook.eventTypes)], sealedSecret });
  });
  return { webhook, secret };
}

/** How long the secret a rotation replaces still signs deliveries, unless the request says: 24 hours. */
export const SECRET_OVERLAP_DEFAULT_SECONDS = 86_400;
/** The longest overlap a rotation may ask for: 7 days. */
export const SECRET_OVERLAP_MAX_SECONDS = 7 * 86_400;

/**
 * Gives webhook `id` a new signing secret and returns it with the webhook: the only time it is
 * shown. The secret it replaces stays, sealed, for `overlapSeconds` (default
 * SECRET_OVERLAP_DEFAULT_SECONDS; 0 drops it at once), and every delivery attempt made meanwhile
 * is signed with both, so a receiver can switch secrets without refusing a delivery; a secret
 * kept from an earlier rotation is dropped. Pending deliveries and their history stay.
 */
export async function rotateWebhookSecret(
  deps: CommandDeps,
  id: string,
  overlapSeconds: number = SECRET_OVERLAP_DEFAULT_SECONDS,
): Promise<{ webhook: RotatedWebhookRow; secret: string }> {
  const secret = newWebhookSecret();
  const webhook = await webhooks.rotateSecret(deps.pool, id, seal(deps.credentials, { table: 'webhooks', id }, secret), overlapSeconds);
  if (!webhook) throw notFound('no webhook with that id');
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

/**
 * Enables webhook `id` (clears when and why it was disabled) or disables it now, saying it was
 * through the API; returns it. A disabled webhook gets no delivery of a new event, and each of its
 * pending deliveries ends failed at its next attempt without a request; enabled again, its failed
 * deliveries may be redelivered.
 */
export async function setWebhookEnabled(deps: CommandDeps, id: string, enabled: boolean): Promise<WebhookRow> {
  const at = new Date();
  const row = enabled
    ? await webhooks.enableWebhook(deps.pool, id)
    : await webhooks.disableWebhook(deps.pool, id, at, `disabled through the API at ${at.toISOString()}`);
  if (!row) throw notFound('no webhook with that id');
  return row;
}

/** Deletes a webhook and its deliveries; deliveries still retrying stop at their next attempt. */
export async function deleteWebhook(deps: CommandDeps, id: string): Promise<void> {
  if (!(await webhooks.deleteWebhook(deps.pool, id))) throw notFound('no webhook with that id');
}

/** A page of a webhook's deliveries, newest first, each with its attempts. */
export async function listDeliveries(deps: CommandDeps, webhookId: string, query: { before?: TimePosition; limit: number }) {
  await getWebhook(deps, webhookId);
  return webhooks.listDeliveries(deps.pool, { webhookId, ...query });
}

/**
 * Sends a delivery again: a finished one (delivered or failed) goes back to pending and gets a
 * new delivery workflow run, with the same event id, so a receiver can still deduplicate. A
 * delivery still pending is already being retried: refused with `delivery_pending`; one of a
 * disabled webhook is refused with `webhook_disabled` (it would end failed unsent). A tenant
 * may ask for TENANT_MAX_REDELIVERIES_PER_HOUR in any sliding hour; more are refused
 * (`tenant_limit`, 429 with the seconds until the oldest leaves the hour).
 */
export async function redeliver(deps: CommandDeps, webhookId: string, deliveryId: string): Promise<void> {
  const hook = await webhooks.findWebhook(deps.pool, webhookId);
  if (!hook) throw notFound('no delivery with that id for this webhook');
  await withTransaction(deps.pool, async (tx) => {
    // Locked first: a second redelivery of it at the same time waits here and finds it pending.
    const delivery = await webhooks.findDeliveryForUpdate(tx, webhookId, deliveryId);
    if (!delivery) throw notFound('no delivery with that id for this webhook');
    if (delivery.status === 'pending') throw new CommandRefused('conflict', 'delivery_pending', 'the delivery is still being attempted');
    // Sent now, it would end failed at once without a request.
    if (hook.disabled_at !== null) throw new CommandRefused('conflict', 'webhook_disabled', 'the webhook is disabled; enable it first (PATCH /webhooks/{id} with enabled: true)');
    // Counted and recorded under the tenant's lock, over a sliding hour.
    const max = (await lockedLimits(deps, tx, hook.tenant_id)).redeliveriesPerHour;
    const recent = await redeliveriesInWindow(tx, hook.tenant_id);
    if (!fitsUnder(max, recent.n)) {
      throw overLimit('redeliveriesPerHour', max, 'redeliveries an hour', redeliveryRetryAfterSeconds(recent.oldest ?? recent.now, recent.now));
    }
    await insertRedelivery(tx, { tenantId: hook.tenant_id, deliveryId });
    await webhooks.reopenDelivery(tx, deliveryId, new Date());
  });
  // A start that fails, or finds the previous run still closing, is made by the reconcile tick.
  await startWebhookDeliveries(deps.temporal, deps.taskQueue, [deliveryId]);
}
