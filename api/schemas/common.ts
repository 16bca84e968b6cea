import { z } from '@hono/zod-openapi';
import { API_ERROR_CODES, SYNC_MODES, type ApiErrorCode } from '../../policy/vocabulary';
import { DATABASE_BUSY_MESSAGE } from '../errors';

/** `{error: {code, message}}`, the body of every error answer. */
export const ErrorSchema = z
  .object({
    error: z
      .object({
        code: z.enum(API_ERROR_CODES).openapi({ description: 'Stable: branch on it (the message is for people and may change)', example: 'not_found' }),
        message: z.string().openapi({ example: 'no job with that id' }),
      })
      .catchall(z.unknown()),
  })
  .openapi('Error');

/** A message an answer with each code may carry, for the document's examples. */
const ERROR_MESSAGES: Record<ApiErrorCode, string> = {
  invalid_request: 'limit: must be an integer between 1 and 200',
  unauthorized: 'a valid API key is required: Authorization: Bearer <key>',
  forbidden: 'this route needs the admin key',
  not_found: 'no such resource',
  conflict: 'tenant acme already has a connection with app_key acme-github',
  connection_paused: 'the connection is paused; resume it first',
  connection_disabled: 'the connection is disabled',
  circuit_breaker_open: 'the connection is paused by its circuit breaker after repeated failures',
  purge_in_progress: 'the connection is being deleted (purge 6f1c…); no change is accepted',
  tenant_limit: 'tenant acme has its limit of connections (max_connections 1000)',
  connection_needs_reauth: 'the connection needs new credentials (its OAuth grant was refused); reconnect it or PATCH its credentials',
  oauth_app_in_use: 'connections use this OAuth app; give them other credentials first',
  grant_source_not_oauth2: 'the connection named by credentials.grant_from_connection holds no oauth2 grant to share',
  authorization_refused: 'the provider refused the authorization: access_denied',
  token_exchange_failed: 'the token endpoint refused the code: invalid_grant',
  invalid_connection_config: "the connection's config is invalid: repositories: must name at least one repository",
  idempotency_key_reused: 'this Idempotency-Key was already used for a different request',
  backfill_in_progress: 'a backfill of this connection is still active; retry when it has finished',
  immediate_sync_running: 'an immediate sync of this connection is already running; wait for its answer',
  job_finished: 'the job has already finished (completed)',
  delivery_pending: 'the delivery is still being attempted',
  webhook_disabled: 'the webhook is disabled; enable it first (PATCH /webhooks/{id} with enabled: true)',
  cursor_expired: 'tombstones after this cursor have been purged; read the feed again from the start (no cursor)',
  payload_too_large: 'the request body exceeds 1048576 bytes (1 MiB)',
  unsupported_media_type: 'the request body must be JSON, sent with content-type: application/json',
  rate_limited: 'too many requests for this API key; retry in 1 s',
  sync_failed: 'the sync failed: the provider answered 502',
  timeout: 'the immediate sync did not finish within 60 s (IMMEDIATE_SYNC_TIMEOUT_SECONDS) and was cancelled; what it fetched is stored',
  busy: DATABASE_BUSY_MESSAGE,
  unavailable: 'Postgres is unreachable; try again shortly',
  internal: 'internal error',
  error: 'bad request',
};

/** An error answer: `codes` are the codes it may carry, each shown as an example. */
export const errorAnswer = (description: string, ...codes: [ApiErrorCode, ...ApiErrorCode[]]) => ({
  description,
  content: {
    'application/json': {
      schema: ErrorSchema,
      examples: Object.fromEntries(codes.map((code) => [code, { value: { error: { code, message: ERROR_MESSAGES[code] } } }])),
    },
  },
});

/** The `Retry-After` header of an answer that asks to try again later. */
export const retryAfter = (description: string) => ({ 'Retry-After': { description, schema: { type: 'integer' as const, minimum: 1 } } });

/** Error answers shared by authenticated routes. */
export const errorResponses = {
  400: errorAnswer('The request does not match the schema', 'invalid_request'),
  401: errorAnswer('Missing, wrong or revoked API key', 'unauthorized'),
  403: errorAnswer('A tenant key on an admin-only route, or without the scope (read, write) the method needs', 'forbidden'),
  404: errorAnswer("No such resource; with a tenant key also any id or tenant_id of another tenant", 'not_found'),
  413: errorAnswer('Body larger than 1 MiB', 'payload_too_large'),
  429: { ...errorAnswer('This API key exceeded its request rate; retry after `Retry-After` seconds', 'rate_limited'), headers: retryAfter('Seconds until this key has a request again') },
  500: errorAnswer('An unexpected error (never with a stack, statement or internal detail; the API logs it)', 'internal'),
  503: {
    ...errorAnswer(
      'Every database connection of the API process stayed in use for its whole connection timeout (`busy`), or Postgres or Temporal is unreachable (`unavailable`); retry after `Retry-After` seconds',
      'busy',
      'unavailable',
    ),
    headers: retryAfter('Seconds to wait before trying again'),
  },
} as const;

/** Error answers of authenticated routes that take a JSON body. */
export const bodyErrorResponses = {
  ...errorResponses,
  415: errorAnswer('The body was sent without content-type: application/json', 'unsupported_media_type'),
} as const;

/** A 404 answer. */
export const notFound = errorAnswer('No such resource', 'not_found');
/** A 409 (or 410) answer carrying one of `codes`. */
export const conflict = (description: string, ...codes: [ApiErrorCode, ...ApiErrorCode[]]) => errorAnswer(description, ...codes);

/** A JSON body part of a route, with named examples when given. */
export const jsonBody = <T extends z.ZodType>(schema: T, description?: string, examples?: Record<string, { summary: string; value: unknown }>) => ({
  required: true,
  description,
  content: { 'application/json': { schema, ...(examples && { examples }) } },
});

/** A JSON answer of a route. */
export const jsonAnswer = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});

/**
 * A UUID as the API takes it, in a path, a query or a body: any letter case in, lower case out (as
 * Postgres prints a uuid), so an id a client spells in capitals (Swift's `uuidString`, .NET's
 * `ToString("D").ToUpper()`) names what the stored id names: the same workflow, lock, sealed
 * envelope and row. The one parser of an id the API is given.
 */
export const uuid = (error = 'must be a UUID') => z.uuid({ error }).overwrite((v) => v.toLowerCase());

/** A uuid path parameter named `id`. */
export const IdParams = z.object({
  id: uuid().openapi({ param: { name: 'id', in: 'path' }, example: '0b5e2c7e-4a56-4f7e-9d0b-5d7c3c1f2a10' }),
});

/**
 * The longest tenant id: 128 characters. One limit for every route that takes a tenant id (path,
 * query or body), so no tenant can have a webhook, an OAuth app or a key it could never have a
 * connection for; the columns are text, this is the rule.
 */
export const MAX_TENANT_ID_CHARS = 128;

/** A tenant id, wherever a request names one: 1–128 characters. */
export const TenantIdSchema = z
  .string({ error: 'must be a string' })
  .min(1, 'must not be empty')
  .max(MAX_TENANT_ID_CHARS, `must be at most ${MAX_TENANT_ID_CHARS} characters`)
  .openapi({ example: 'acme' });

/** The optional `tenant_id` query parameter of a listing. */
export const TenantIdQuery = (description?: string) => TenantIdSchema.optional().openapi({ param: { name: 'tenant_id', in: 'query' }, ...(description && { description }) });

/** A page size as a query gives it: decimal digits, nothing else. */
const DECIMAL_DIGITS = /^[0-9]+$/;

/**
 * The `limit` query parameter of a listing: decimal digits naming 1 to `max`, `fallback` when
 * absent. The one parser of a page size. Only digits are read as a number: JavaScript's Number()
 * also reads "0x10" as 16, "1e2" as 100, " 5" as 5 and "" as 0, so a page size the client did not
 * write would be served; anything else (a repeated parameter too) is refused with the rule.
 */
export const pageSizeQuery = (max: number, fallback: number) => {
  const rule = `must be an integer between 1 and ${max}`;
  return z
    .preprocess(
      (value) => (typeof value === 'string' && DECIMAL_DIGITS.test(value) ? Number(value) : value),
      z.number({ error: rule }).int(rule).min(1, rule).max(max, rule),
    )
    .default(fallback)
    .openapi({ param: { name: 'limit', in: 'query' }, example: fallback });
};

/** Page size of listings: 1–200, default 50. */
export const LimitQuery = pageSizeQuery(200, 50);

/** Fractional seconds with a non-zero digit past the third: a time finer than the millisecond. */
const FINER_THAN_MILLISECOND = /\.\d{3}\d*[1-9]/;

/**
 * A time that bounds what is stored or served (a backfill's window, the feed's `modified_after`):
 * ISO 8601 with its zone, to the millisecond at most (trailing zeros name the millisecond and are
 * taken). Such times are compared as JavaScript Dates, which keep the millisecond: a finer time
 * was cut to it, so a window stored records changed before its start and the feed served changes
 * written before `modified_after`. Refused so, no rule on the value (a window's order) is checked.
 */
export const MillisecondTime = z.iso
  .datetime({ offset: true, error: 'must be an ISO 8601 date-time' })
  .refine((time) => !FINER_THAN_MILLISECOND.test(time), {
    error: 'must have at most millisecond precision (no non-zero digit after the third of its fractional seconds)',
    abort: true,
  });

/** Opaque keyset cursor: `next_cursor` of the previous page. */
export const CursorQuery = z
  .string()
  .max(200)
  .optional()
  .openapi({ param: { name: 'cursor', in: 'query' }, description: 'next_cursor of the previous page' });

/** An ISO 8601 time, or null. */
export const NullableTime = z.string().nullable().openapi({ example: '2025-01-01T12:00:00.000Z' });

/** A connection's provider mode of a sync. */
export const SyncModeSchema = z.enum(SYNC_MODES).openapi({ description: 'incremental (default) or full (with deletion of records gone upstream)' });

/** Largest connection `config`, as JSON: 64 KiB. */
export const MAX_CONFIG_BYTES = 64 * 1024;
/** Largest connection `credentials`, as JSON: 16 KiB. */
export const MAX_CREDENTIALS_BYTES = 16 * 1024;
/** Largest job `payload`, as JSON: 64 KiB. */
export const MAX_PAYLOAD_BYTES = 64 * 1024;
/** Most resource types one request may name. */
export const MAX_RESOURCE_TYPES = 50;

/** The size of `value` as JSON, in bytes. */
export const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '');

/** The rule of a JSON object of at most `maxBytes`, in words (the message and the documentation). */
export const sizeRule = (maxBytes: number) => `at most ${maxBytes / 1024} KiB as JSON`;

/**
 * A JSON object of at most `maxBytes` as JSON (a body may be 1 MiB; one field of it may not fill
 * every row and log line it reaches).
 */
export const boundedJsonObject = (maxBytes: number) =>
  z.record(z.string(), z.unknown()).refine((value) => jsonBytes(value) <= maxBytes, `must be ${sizeRule(maxBytes)}`);

/** Some of a connection's resource types: 1–50 names of 1–100 characters. */
export const ResourceTypesSchema = z
  .array(z.string().min(1).max(100, 'must be at most 100 characters'))
  .min(1)
  .max(MAX_RESOURCE_TYPES, `must name at most ${MAX_RESOURCE_TYPES} resource types`)
  .openapi({ description: `Some of the connection's resource types (default: all; at most ${MAX_RESOURCE_TYPES})` });
