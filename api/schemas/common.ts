import { z } from '@hono/zod-openapi';
import { SYNC_MODES } from '../../policy/vocabulary';

/** `{error: {code, message}}`, the body of every error answer. */
export const ErrorSchema = z
  .object({
    error: z
      .object({
        code: z.string().openapi({ example: 'not_found' }),
        message: z.string().openapi({ example: 'no job with that id' }),
      })
      .catchall(z.unknown()),
  })
  .openapi('Error');

/** Error answers shared by authenticated routes. */
export const errorResponses = {
  400: { description: 'The request does not match the schema', content: { 'application/json': { schema: ErrorSchema } } },
  401: { description: 'Missing, wrong or revoked API key', content: { 'application/json': { schema: ErrorSchema } } },
  403: { description: 'A tenant key on an admin-only route, or without the scope (read, write) the method needs', content: { 'application/json': { schema: ErrorSchema } } },
  404: { description: "No such resource; with a tenant key also any id or tenant_id of another tenant", content: { 'application/json': { schema: ErrorSchema } } },
  413: { description: 'Body larger than 1 MiB', content: { 'application/json': { schema: ErrorSchema } } },
  429: { description: 'This API key exceeded its request rate; retry after `Retry-After` seconds', content: { 'application/json': { schema: ErrorSchema } } },
  503: { description: 'Postgres or Temporal is unreachable', content: { 'application/json': { schema: ErrorSchema } } },
} as const;

/** A 404 answer. */
export const notFound = { description: 'No such resource', content: { 'application/json': { schema: ErrorSchema } } } as const;
/** A 409 answer. */
export const conflict = (description: string) => ({ description, content: { 'application/json': { schema: ErrorSchema } } }) as const;

/** A JSON body part of a route. */
export const jsonBody = <T extends z.ZodType>(schema: T, description?: string) => ({
  required: true,
  description,
  content: { 'application/json': { schema } },
});

/** A JSON answer of a route. */
export const jsonAnswer = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});

/** A uuid path parameter named `id`. */
export const IdParams = z.object({
  id: z.uuid({ error: 'must be a UUID' }).openapi({ param: { name: 'id', in: 'path' }, example: '0b5e2c7e-4a56-4f7e-9d0b-5d7c3c1f2a10' }),
});

/** Page size of listings: 1–200, default 50. */
export const LimitQuery = z.coerce
  .number({ error: 'must be an integer between 1 and 200' })
  .int('must be an integer between 1 and 200')
  .min(1, 'must be an integer between 1 and 200')
  .max(200, 'must be an integer between 1 and 200')
  .default(50)
  .openapi({ param: { name: 'limit', in: 'query' }, example: 50 });

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
