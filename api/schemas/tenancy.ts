import { z } from '@hono/zod-openapi';
import { KEY_SCOPES, PURGE_STATUSES } from '../../policy/vocabulary';
import { MAX_TENANT_LIMIT } from '../../policy/tenant-limits';
import { CursorQuery, LimitQuery, NullableTime, TenantIdQuery, TenantIdSchema, uuid } from './common';

/** The `tenant_id` path parameter of a tenant's API keys. */
export const TenantParams = z.object({
  tenant_id: TenantIdSchema.openapi({ param: { name: 'tenant_id', in: 'path' }, example: 'acme' }),
});

/** `DELETE /tenants/{tenant_id}/api-keys/{key_id}` path. */
export const TenantKeyParams = TenantParams.extend({
  key_id: uuid().openapi({ param: { name: 'key_id', in: 'path' } }),
});

/** `POST /tenants/{tenant_id}/api-keys` body (optional). */
export const CreateApiKeyBody = z
  .strictObject({
    name: z.string().min(1).max(200).optional().openapi({ description: 'A label for people, e.g. "billing backend"' }),
    scopes: z
      .array(z.enum(KEY_SCOPES))
      .min(1, 'must name at least one scope')
      // Each scope once is all a key can carry; a longer list is refused before its names are
      // checked one by one (a hundred thousand of them, one issue each, overflowed the stack).
      .max(KEY_SCOPES.length, `must name at most ${KEY_SCOPES.length} scopes`)
      .optional()
      .openapi({ description: 'read: GET routes; write: every other route. Default both.' }),
  })
  .openapi('CreateApiKey');

/** A tenant API key as listed: never its secret. */
export const ApiKeySchema = z
  .object({
    id: z.string(),
    tenant_id: z.string(),
    name: z.string().nullable(),
    prefix: z.string().openapi({ description: 'The public part of the key (`stk_<prefix>_...`), to tell keys apart' }),
    scopes: z.array(z.string()),
    created_at: z.string(),
    last_used_at: NullableTime,
    revoked_at: NullableTime,
  })
  .openapi('ApiKey');

/** A new API key with its secret, shown this once. */
export const CreatedApiKeySchema = ApiKeySchema.extend({
  secret: z.string().openapi({ description: 'The key: `Authorization: Bearer <secret>`. Shown only in this answer; only its hash is stored' }),
}).openapi('CreatedApiKey');

/** A tenant's keys. */
export const ApiKeyListSchema = z.object({ items: z.array(ApiKeySchema) }).openapi('ApiKeyList');

/** `GET /audit` query. */
export const AuditQuery = z.object({
  tenant_id: TenantIdQuery("The tenant's own calls, and other tenants' refused calls aimed at it"),
  limit: LimitQuery,
  cursor: CursorQuery,
});

/** One audited call. */
export const AuditEntrySchema = z
  .object({
    id: z.string(),
    at: z.string(),
    actor: z.string().openapi({ description: '`admin`, or `key:<api key id>`' }),
    api_key_id: z.string().nullable(),
    tenant_id: z.string().nullable(),
    method: z.string(),
    path: z.string(),
    target_id: z.string().nullable(),
    target_tenant_id: z.string().nullable().openapi({ description: "For a tenant key's call refused because it named another tenant's resource or tenant_id: that tenant" }),
    status: z.number().int(),
  })
  .openapi('AuditEntry');

/** A page of the audit log, newest first. */
export const AuditPageSchema = z.object({ items: z.array(AuditEntrySchema), next_cursor: z.string().nullable() }).openapi('AuditPage');

/** A connection purge. */
export const PurgeSchema = z
  .object({
    id: z.string(),
    connection_id: z.string(),
    tenant_id: z.string(),
    status: z.enum(PURGE_STATUSES),
    deleted_rows: z.number().int().openapi({ description: 'Rows deleted so far' }),
    workflow_id: z.string(),
    created_at: z.string(),
    finished_at: NullableTime,
  })
  .openapi('Purge');

/**
 * `DELETE /connections/{id}` answer: the purge started (or, repeated while it is open, the same
 * purge); for a key lacking the `read` scope without `deleted_rows` (how far it got is for a key
 * that reads, at `GET /purges/{id}`).
 */
export const StartedPurgeSchema = PurgeSchema.partial({ deleted_rows: true }).openapi('StartedPurge');

/** What a limit override must be, in words. */
const LIMIT_OVERRIDE_RULE = `must be an integer from 0 to ${MAX_TENANT_LIMIT}, or null for the default`;

/**
 * One per-tenant limit override: an integer from 0 to MAX_TENANT_LIMIT (its column is a Postgres
 * integer, which refuses more), or null for the default.
 */
const LimitOverride = z.number(LIMIT_OVERRIDE_RULE).int(LIMIT_OVERRIDE_RULE).min(0, LIMIT_OVERRIDE_RULE).max(MAX_TENANT_LIMIT, LIMIT_OVERRIDE_RULE).nullable();

/** `PATCH /tenants/{tenant_id}/limits` body: each field named is set (null: back to the default); the others are kept. */
export const TenantLimitsBody = z
  .strictObject({
    max_connections: LimitOverride.optional(),
    max_webhooks: LimitOverride.optional(),
    max_immediate_syncs: LimitOverride.optional(),
    max_running_jobs: LimitOverride.optional(),
    max_redeliveries_per_hour: LimitOverride.optional(),
    max_oauth_apps: LimitOverride.optional(),
  })
  .openapi('TenantLimitsChange');

const LimitValues = z.object({
  max_connections: z.number().int(),
  max_webhooks: z.number().int(),
  max_immediate_syncs: z.number().int(),
  max_running_jobs: z.number().int(),
  max_redeliveries_per_hour: z.number().int(),
  max_oauth_apps: z.number().int(),
});

/** A tenant's limits: the values that apply, its overrides (null: the default) and what it holds now. */
export const TenantLimitsSchema = z
  .object({
    tenant_id: z.string(),
    limits: LimitValues.openapi({ description: 'The values that apply: each override where set, else the default (TENANT_MAX_*)' }),
    overrides: z.object({
      max_connections: z.number().int().nullable(),
      max_webhooks: z.number().int().nullable(),
      max_immediate_syncs: z.number().int().nullable(),
      max_running_jobs: z.number().int().nullable(),
      max_redeliveries_per_hour: z.number().int().nullable(),
      max_oauth_apps: z.number().int().nullable(),
    }),
    usage: z.object({
      connections: z.number().int(),
      webhooks: z.number().int(),
      immediate_syncs: z.number().int(),
      running_jobs: z.number().int(),
      redeliveries_last_hour: z.number().int(),
      oauth_apps: z.number().int(),
    }),
  })
  .openapi('TenantLimits');
