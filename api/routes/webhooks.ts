import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { invalid } from '../../commands/errors';
import { createWebhook, deleteWebhook, getWebhook, listDeliveries, listWebhooks, redeliver } from '../../commands/webhooks';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { tenantFilter } from '../middleware/auth';
import { presentDelivery, presentWebhook } from '../present';
import { conflict, decodeCursor, encodeCursor, errorResponses, IdParams, jsonAnswer, jsonBody, notFound } from '../schemas/common';
import {
  CreatedWebhookSchema,
  CreateWebhookBody,
  DeliveryPageSchema,
  DeliveryParams,
  ListDeliveriesQuery,
  ListWebhooksQuery,
  WebhookPageSchema,
  WebhookSchema,
} from '../schemas/webhooks';

const tags = ['webhooks'];
const UUID = /^[0-9a-f-]{36}$/i;

const create = createRoute({
  method: 'post', path: '/webhooks', tags, summary: "Subscribe an endpoint to a tenant's events (the signing secret is shown once)",
  request: { body: jsonBody(CreateWebhookBody) },
  responses: { 201: jsonAnswer(CreatedWebhookSchema, 'Created, with its secret'), ...errorResponses, 409: conflict('The tenant has its limit of webhooks (`tenant_limit`, with `limit` and `value`)') },
});
const list = createRoute({
  method: 'get', path: '/webhooks', tags, summary: 'List webhooks (cursor pagination, by id; never their secrets)',
  request: { query: ListWebhooksQuery },
  responses: { 200: jsonAnswer(WebhookPageSchema, 'One page'), ...errorResponses },
});
const get = createRoute({
  method: 'get', path: '/webhooks/{id}', tags, summary: 'One webhook',
  request: { params: IdParams },
  responses: { 200: jsonAnswer(WebhookSchema, 'The webhook'), ...errorResponses, 404: notFound },
});
const remove = createRoute({
  method: 'delete', path: '/webhooks/{id}', tags, summary: 'Delete a webhook and its deliveries (retries in progress stop)',
  request: { params: IdParams },
  responses: { 204: { description: 'Deleted' }, ...errorResponses, 404: notFound },
});
const deliveries = createRoute({
  method: 'get', path: '/webhooks/{id}/deliveries', tags, summary: "A webhook's deliveries, newest first, with every attempt's status code",
  request: { params: IdParams, query: ListDeliveriesQuery },
  responses: { 200: jsonAnswer(DeliveryPageSchema, 'One page'), ...errorResponses, 404: notFound },
});
const redeliverRoute = createRoute({
  method: 'post', path: '/webhooks/{id}/deliveries/{delivery_id}/redeliver', tags, summary: 'Deliver a finished delivery again (same event id)',
  request: { params: DeliveryParams },
  responses: {
    202: jsonAnswer(z.object({ delivery_id: z.string(), status: z.literal('pending') }), 'Queued for delivery'),
    ...errorResponses,
    404: notFound,
    409: conflict('The delivery is still being attempted (`delivery_pending`)'),
    429: conflict('This API key exceeded its request rate, or the tenant its redeliveries per hour (`tenant_limit`, with `limit`, `value` and `retry_after_seconds`); retry after `Retry-After` seconds'),
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
    const position = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
    if (position === null || (position && !UUID.test(position.id ?? ''))) throw invalid('cursor: not a cursor this API made');
    const page = await listWebhooks(deps, { tenantId: tenantFilter(c, q.tenant_id), afterId: position?.id, limit: q.limit });
    const last = page.rows.at(-1);
    return c.json({ items: page.rows.map(presentWebhook), next_cursor: page.more && last ? encodeCursor({ id: last.id }) : null }, 200);
  });

  app.openapi(get, async (c) => c.json(presentWebhook(await getWebhook(deps, c.req.valid('param').id)), 200));

  app.openapi(remove, async (c) => {
    await deleteWebhook(deps, c.req.valid('param').id);
    return c.body(null, 204);
  });

  app.openapi(deliveries, async (c) => {
    const { id } = c.req.valid('param');
    const q = c.req.valid('query');
    const position = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
    if (position === null || (position && (!UUID.test(position.id ?? '') || Number.isNaN(Date.parse(position.at ?? ''))))) {
      throw invalid('cursor: not a cursor this API made');
    }
    const before = position ? { createdAt: new Date(position.at!), id: position.id! } : undefined;
    const page = await listDeliveries(deps, id, { before, limit: q.limit });
    const last = page.rows.at(-1);
    const next = page.more && last ? encodeCursor({ at: last.created_at.toISOString(), id: last.id }) : null;
    return c.json({ items: page.rows.map(presentDelivery), next_cursor: next }, 200);
  });

  app.openapi(redeliverRoute, async (c) => {
    const { id, delivery_id } = c.req.valid('param');
    await redeliver(deps, id, delivery_id);
    return c.json({ delivery_id, status: 'pending' as const }, 202);
  });

  return app;
}
