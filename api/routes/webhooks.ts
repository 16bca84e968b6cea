import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { createWebhook, deleteWebhook, getWebhook, listDeliveries, listWebhooks, redeliver, rotateWebhookSecret, setWebhookEnabled } from '../../commands/webhooks';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { tenantFilter, writeAnswer } from '../middleware/auth';
import { pageAnswer, pageRequest } from '../pagination';
import { presentDelivery, presentWebhook } from '../present';
import { deliveryCursor, uuidCursor } from '../../policy/cursors';
import { conflict, errorAnswer, bodyErrorResponses, errorResponses, IdParams, jsonAnswer, jsonBody, notFound, retryAfter } from '../schemas/common';
import {
  CreatedWebhookSchema,
  CreateWebhookBody,
  DeliveryPageSchema,
  DeliveryParams,
  ListDeliveriesQuery,
  ListWebhooksQuery,
  RedeliveryAnswerSchema,
  RotatedWebhookSecretSchema,
  RotateWebhookSecretBody,
  UpdateWebhookBody,
  WebhookPageSchema,
  UpdatedWebhookSchema,
  WebhookSchema,
} from '../schemas/webhooks';

const tags = ['webhooks'];

const create = createRoute({
  method: 'post', path: '/webhooks', tags, summary: "Subscribe an endpoint to a tenant's events (the signing secret is shown once)", operationId: 'createWebhook',
  description: 'Subscribes an http(s) endpoint to event types of a tenant. Deliveries are signed per Standard Webhooks with the `whsec_` secret in this answer (the only time it is shown); the payload of each event type is under `webhooks`.',
  request: { body: jsonBody(CreateWebhookBody) },
  responses: { 201: jsonAnswer(CreatedWebhookSchema, 'Created, with its secret'), ...bodyErrorResponses, 409: conflict('The tenant has its limit of webhooks (`tenant_limit`, with `limit` and `value`)', 'tenant_limit') },
});
const list = createRoute({
  method: 'get', path: '/webhooks', tags, summary: 'List webhooks (cursor pagination, by id; never their secrets)', operationId: 'listWebhooks',
  description: "Webhooks ordered by id, optionally of one tenant; a tenant key lists its own tenant's only.",
  request: { query: ListWebhooksQuery },
  responses: { 200: jsonAnswer(WebhookPageSchema, 'One page'), ...errorResponses },
});
const get = createRoute({
  method: 'get', path: '/webhooks/{id}', tags, summary: 'One webhook', operationId: 'getWebhook',
  description: 'The webhook: its endpoint, its event types and whether it is disabled (`disabled_at`, `disabled_reason`; never its secret).',
  request: { params: IdParams },
  responses: { 200: jsonAnswer(WebhookSchema, 'The webhook'), ...errorResponses, 404: notFound },
});
const update = createRoute({
  method: 'patch', path: '/webhooks/{id}', tags, summary: 'Enable a disabled webhook again (or disable one)', operationId: 'updateWebhook',
  description:
    'A webhook is disabled when its receiver answers 410 Gone (it takes no more webhooks at that URL), or by `enabled: false` here: it then gets no delivery of a new event, and each of its pending deliveries ends `failed` at its next attempt without a request. ' +
    '`enabled: true` clears `disabled_at` and `disabled_reason`: new events are delivered to it again, and its failed deliveries may be redelivered. Events that came while it was disabled are not delivered to it.',
  request: { params: IdParams, body: jsonBody(UpdateWebhookBody) },
  responses: { 200: jsonAnswer(UpdatedWebhookSchema, 'The webhook as it is now (without `url` and `event_types` for a key lacking the `read` scope)'), ...bodyErrorResponses, 404: notFound },
});
const remove = createRoute({
  method: 'delete', path: '/webhooks/{id}', tags, summary: 'Delete a webhook and its deliveries (retries in progress stop)', operationId: 'deleteWebhook',
  description: 'Deletes the subscription and its deliveries; a delivery being retried stops at its next attempt.',
  request: { params: IdParams },
  responses: { 204: { description: 'Deleted' }, ...errorResponses, 404: notFound },
});
const rotateSecret = createRoute({
  method: 'post', path: '/webhooks/{id}/rotate-secret', tags, summary: 'Rotate the signing secret (the new one is shown once; the old one keeps signing for an overlap)', operationId: 'rotateWebhookSecret',
  description:
    'Gives the webhook a new `whsec_` signing secret, answered this once. The secret it replaces keeps signing for `expire_previous_after_seconds` (default 24 hours, at most 7 days; 0: not at all): ' +
    'meanwhile every delivery attempt carries both signatures in `webhook-signature` (`v1,<new> v1,<previous>`) and in the deprecated `Synctide-Signature` (`t=<t>,v1=<previous>,v1=<new>`), so a receiver verifies with either while it switches. ' +
    'Rotating again during an overlap keeps only the secret just replaced. Pending deliveries and their history stay.',
  request: { params: IdParams, body: { ...jsonBody(RotateWebhookSecretBody), required: false } },
  responses: { 200: jsonAnswer(RotatedWebhookSecretSchema, 'Rotated, with the new secret (without `url` and `event_types` for a key lacking the `read` scope)'), ...bodyErrorResponses, 404: notFound },
});
const deliveries = createRoute({
  method: 'get', path: '/webhooks/{id}/deliveries', tags, summary: "A webhook's deliveries, newest first, with every attempt's status code", operationId: 'listWebhookDeliveries',
  description: 'Deliveries of events to this webhook, newest first: pending, delivered or failed (retries ran out after 25 hours, the receiver answered 410 Gone, which is not retried and disables the webhook, or the webhook was disabled before it was sent: no attempt, `last_error` says why), each with its attempts.',
  request: { params: IdParams, query: ListDeliveriesQuery },
  responses: { 200: jsonAnswer(DeliveryPageSchema, 'One page'), ...errorResponses, 404: notFound },
});
const redeliverRoute = createRoute({
  method: 'post', path: '/webhooks/{id}/deliveries/{delivery_id}/redeliver', tags, summary: 'Deliver a finished delivery again (same event id)', operationId: 'redeliverWebhookDelivery',
  description: 'Sends a delivered or failed delivery again, with the same event id (`webhook-id`) and body, retried as a new delivery would be.',
  request: { params: DeliveryParams },
  responses: {
    202: jsonAnswer(RedeliveryAnswerSchema, 'Queued for delivery'),
    ...errorResponses,
    404: notFound,
    409: conflict('The delivery is still being attempted (`delivery_pending`), or the webhook is disabled (`webhook_disabled`): enable it first', 'delivery_pending', 'webhook_disabled'),
    429: { ...errorAnswer('This API key exceeded its request rate, or the tenant its redeliveries per hour (`tenant_limit`, with `limit`, `value` and `retry_after_seconds`); retry after `Retry-After` seconds', 'rate_limited', 'tenant_limit'), headers: retryAfter('Seconds until a request may succeed') },
  },
});

/** Routes of `/webhooks`: parse, call a command, present. */
export function webhookRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<ApiEnv>();

  app.openapi(create, async (c) => {
    const body = c.req.valid('json');
    const { webhook, secret } = await createWebhook(deps, { tenantId: body.tenant_id, url: body.url, eventTypes: body.event_types });
    c.get('log').info({ webhook_id: webhook.id, tenant_id: webhook.tenant_id }, 'webhook created');
    return c.json({ ...presentWebhook(webhook), secret }, 201);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    const { after, limit } = pageRequest(uuidCursor, q);
    const page = await listWebhooks(deps, { tenantId: tenantFilter(c, q.tenant_id), afterId: after?.id, limit });
    return c.json(pageAnswer(page, uuidCursor, (row) => ({ id: row.id }), presentWebhook), 200);
  });

  app.openapi(get, async (c) => c.json(presentWebhook(await getWebhook(deps, c.req.valid('param').id)), 200));

  app.openapi(update, async (c) => {
    const { id } = c.req.valid('param');
    const { enabled } = c.req.valid('json');
    const webhook = await setWebhookEnabled(deps, id, enabled);
    c.get('log').info({ webhook_id: webhook.id, tenant_id: webhook.tenant_id, enabled: webhook.disabled_at === null }, enabled ? 'webhook enabled' : 'webhook disabled');
    // A key without the read scope may enable or disable a webhook but not read it: its answer
    // is the webhook's state without its url and event types.
    return c.json(writeAnswer(c, presentWebhook(webhook), ['url', 'event_types']), 200);
  });

  app.openapi(remove, async (c) => {
    await deleteWebhook(deps, c.req.valid('param').id);
    return c.body(null, 204);
  });

  app.openapi(rotateSecret, async (c) => {
    const { id } = c.req.valid('param');
    // Without a body (none sent), the default overlap.
    const { webhook, secret } = await rotateWebhookSecret(deps, id, c.req.valid('json').expire_previous_after_seconds);
    c.get('log').info({ webhook_id: webhook.id, tenant_id: webhook.tenant_id, previous_secret_expires_at: webhook.previous_secret_expires_at }, 'webhook secret rotated');
    // A key without the read scope may rotate a webhook's secret but not read the webhook: its
    // answer is the new secret without the webhook's url and event types.
    const rotated = { ...presentWebhook(webhook), secret, previous_secret_expires_at: webhook.previous_secret_expires_at?.toISOString() ?? null };
    return c.json(writeAnswer(c, rotated, ['url', 'event_types']), 200);
  });

  app.openapi(deliveries, async (c) => {
    const { id } = c.req.valid('param');
    const q = c.req.valid('query');
    const { after, limit } = pageRequest(deliveryCursor, q);
    const page = await listDeliveries(deps, id, { before: after, limit });
    return c.json(pageAnswer(page, deliveryCursor, (row) => ({ createdAt: row.created_at_exact, id: row.id }), presentDelivery), 200);
  });

  app.openapi(redeliverRoute, async (c) => {
    const { id, delivery_id } = c.req.valid('param');
    await redeliver(deps, id, delivery_id);
    return c.json({ delivery_id, status: 'pending' as const }, 202);
  });

  return app;
}
