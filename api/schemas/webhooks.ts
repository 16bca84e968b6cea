import { z } from '@hono/zod-openapi';
import { SECRET_OVERLAP_DEFAULT_SECONDS, SECRET_OVERLAP_MAX_SECONDS } from '../../commands/webhooks';
import { DELIVERY_STATUSES, WEBHOOK_EVENT_TYPES } from '../../policy/vocabulary';
import { CursorQuery, LimitQuery, NullableTime, TenantIdQuery, TenantIdSchema, uuid } from './common';

/** `POST /webhooks` body, strict: unknown keys are rejected. */
export const CreateWebhookBody = z
  .strictObject({
    tenant_id: TenantIdSchema,
    url: z
      .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
      .max(2000, 'must be at most 2000 characters')
      .openapi({ description: 'http(s); loopback, private and link-local addresses are refused unless WEBHOOK_ALLOW_PRIVATE', example: 'https://example.com/hooks/synctide' }),
    event_types: z
      .array(z.enum(WEBHOOK_EVENT_TYPES))
      .min(1, 'must name at least one event type')
      // Each type once is all a webhook can ask for; a longer list is refused before its names are
      // checked one by one (a hundred thousand of them, one issue each, overflowed the stack).
      .max(WEBHOOK_EVENT_TYPES.length, `must name at most ${WEBHOOK_EVENT_TYPES.length} event types`)
      .openapi({
        description:
          'Events to send: `sync.completed`, `sync.failed`, `sync.cancelled` (one per job that ends, by the status it ended with, whoever ended it; ' +
          'data: the job, its counts, its error and a records-feed cursor), `connection.breaker_opened`, `connection.breaker_closed`, `connection.disabled`, ' +
          '`connection.credentials_invalid` (the provider refused the OAuth grant: the connection needs new credentials)',
      }),
  })
  .openapi('CreateWebhook');

/** A webhook as listed (never its secret). */
export const WebhookSchema = z
  .object({
    id: z.string(),
    tenant_id: z.string(),
    url: z.string(),
    event_types: z.array(z.enum(WEBHOOK_EVENT_TYPES)),
    created_at: z.string(),
    disabled_at: NullableTime.openapi({
      description:
        'When the webhook was disabled, or null while it is enabled: by a receiver answering 410 Gone (it takes no more webhooks at that URL), or by `PATCH /webhooks/{id}` with `enabled: false`. ' +
        'A disabled webhook gets no delivery of a new event, and each of its pending deliveries ends `failed` at its next attempt without a request; `PATCH` with `enabled: true` enables it again',
    }),
    disabled_reason: z.string().nullable().openapi({
      description: 'Why the webhook is disabled (a 410 Gone names the time it was answered), or null while it is enabled',
      example: 'the receiver answered 410 Gone at 2025-01-01T12:00:00.000Z',
    }),
  })
  .openapi('Webhook');

/** `PATCH /webhooks/:id` body, strict: unknown keys are rejected. */
export const UpdateWebhookBody = z
  .strictObject({
    enabled: z.boolean('must be true or false').openapi({
      description:
        'true enables a disabled webhook (clears `disabled_at` and `disabled_reason`; its failed deliveries may then be redelivered); false disables it. An enabled webhook stays as it is for true, a disabled one (its first time and reason kept) for false',
      example: true,
    }),
  })
  .openapi('UpdateWebhook');

/** A new webhook with its signing secret, shown this once. */
export const CreatedWebhookSchema = WebhookSchema.extend({
  secret: z.string().openapi({
    description: 'The Standard Webhooks signing secret (`whsec_` and the base64 of 32 random bytes): shown only in this answer; store it now',
    example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/3JYfWWhE+k=',
  }),
}).openapi('CreatedWebhook');

/** A webhook as enabled or disabled; without its url and event types for a key lacking the `read` scope. */
export const UpdatedWebhookSchema = WebhookSchema.partial({ url: true, event_types: true }).openapi('UpdatedWebhook');

const OVERLAP_RULE = `must be a whole number of seconds from 0 to ${SECRET_OVERLAP_MAX_SECONDS} (7 days)`;

/** `POST /webhooks/:id/rotate-secret` body (optional), strict: unknown keys are rejected. */
export const RotateWebhookSecretBody = z
  .strictObject({
    expire_previous_after_seconds: z
      .number(OVERLAP_RULE)
      .int(OVERLAP_RULE)
      .min(0, OVERLAP_RULE)
      .max(SECRET_OVERLAP_MAX_SECONDS, OVERLAP_RULE)
      .optional()
      .openapi({
        description: `How long the secret being replaced still signs deliveries beside the new one (default ${SECRET_OVERLAP_DEFAULT_SECONDS}, 24 hours; at most 7 days); 0 stops it at once (a leaked secret)`,
        example: SECRET_OVERLAP_DEFAULT_SECONDS,
      }),
  })
  .openapi('RotateWebhookSecret');

/**
 * A webhook with its new signing secret, shown this once, and when the secret it replaced stops
 * signing; without its url and event types for a key lacking the `read` scope.
 */
export const RotatedWebhookSecretSchema = WebhookSchema.partial({ url: true, event_types: true }).extend({
  secret: z.string().openapi({
    description: 'The new Standard Webhooks signing secret (`whsec_` and the base64 of 32 random bytes): shown only in this answer; store it now',
    example: 'whsec_3q2+7wTmPXz1G8yQ0vJkUu5bN4cH6aRfLdS9eKxYtEo=',
  }),
  previous_secret_expires_at: NullableTime.openapi({
    description: 'Until then every delivery is signed with the new secret and the one it replaced (two `v1,` entries in `webhook-signature`); null when the replaced secret stopped at once',
  }),
}).openapi('RotatedWebhookSecret');

/** `GET /webhooks` query. */
export const ListWebhooksQuery = z.object({
  tenant_id: TenantIdQuery(),
  limit: LimitQuery,
  cursor: CursorQuery,
});

/** A page of webhooks. */
export const WebhookPageSchema = z.object({ items: z.array(WebhookSchema), next_cursor: z.string().nullable() }).openapi('WebhookPage');

/** Path of one delivery of one webhook. */
export const DeliveryParams = z.object({
  id: uuid().openapi({ param: { name: 'id', in: 'path' } }),
  delivery_id: uuid().openapi({ param: { name: 'delivery_id', in: 'path' } }),
});

/** One delivery of an event to a webhook, with every attempt. */
export const DeliverySchema = z
  .object({
    id: z.string(),
    event_id: z.string().openapi({ description: 'The idempotency id the receiver sees in `webhook-id` (and the deprecated `Synctide-Event-Id`)' }),
    event_type: z.enum(WEBHOOK_EVENT_TYPES),
    status: z.enum(DELIVERY_STATUSES),
    attempts: z.number(),
    last_status_code: z.number().nullable(),
    last_error: z.string().nullable(),
    created_at: z.string(),
    finished_at: NullableTime,
    attempt_log: z.array(
      z.object({ attempt: z.number(), status_code: z.number().nullable(), error: z.string().nullable(), duration_ms: z.number(), at: z.string() }),
    ),
  })
  .openapi('WebhookDelivery');

/** `GET /webhooks/:id/deliveries` query. */
export const ListDeliveriesQuery = z.object({ limit: LimitQuery, cursor: CursorQuery });

/** A page of deliveries, newest first. */
export const DeliveryPageSchema = z.object({ items: z.array(DeliverySchema), next_cursor: z.string().nullable() }).openapi('WebhookDeliveryPage');

/** What `POST /webhooks/:id/deliveries/:delivery_id/redeliver` did. */
export const RedeliveryAnswerSchema = z.object({ delivery_id: z.string(), status: z.literal('pending') }).openapi('RedeliveryAnswer');
