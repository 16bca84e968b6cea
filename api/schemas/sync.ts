import { z } from '@hono/zod-openapi';
import { ACTIVE_JOB_STATUSES } from '../../policy/vocabulary';
import { ResourceTypesSchema, SyncModeSchema } from './common';
import { TenantIdSchema } from './common';
import { AppKeySchema } from './connections';

/** `POST /sync` body. */
export const SyncBody = z
  .strictObject({
    app_key: AppKeySchema,
    tenant_id: TenantIdSchema.optional().openapi({ description: 'The tenant whose app_key it is: required with the admin key (an app_key is unique only within a tenant); a tenant key names its own tenant' }),
    mode: SyncModeSchema.default('incremental'),
    resource_types: ResourceTypesSchema.optional(),
    immediate: z.boolean().default(false).openapi({ description: 'Run now and answer with the results; no job or task rows' }),
  })
  .openapi('SyncRequest', { example: { app_key: 'acme-github', tenant_id: 'acme', mode: 'incremental' } });

/** 202 answer of a sync request: the job that will run it. */
export const SyncAcceptedSchema = z
  .object({
    job_id: z.string(),
    status: z.enum(ACTIVE_JOB_STATUSES),
    total_tasks: z.number(),
    resource_types: z.array(z.string()),
    connection_id: z.string(),
    mode: SyncModeSchema,
    workflow_id: z.string(),
  })
  .openapi('SyncAccepted');

/** What one resource of an immediate sync fetched (entity_count) and wrote. */
const ResourceCountsSchema = z
  .object({ resource_type: z.string(), entity_count: z.number(), written_count: z.number(), pages: z.number() })
  .openapi('ResourceCounts');

/** 200 answer of an immediate sync. */
export const ImmediateSyncSchema = z
  .object({
    immediate: z.literal(true),
    connection_id: z.string(),
    mode: SyncModeSchema,
    total_entities: z.number(),
    resources: z.array(ResourceCountsSchema),
  })
  .openapi('ImmediateSync');

/** 504 answer of an immediate sync that outran IMMEDIATE_SYNC_TIMEOUT_SECONDS: what it fetched (and stored) so far. */
export const ImmediateSyncTimeoutSchema = z
  .object({
    error: z.object({
      code: z.literal('timeout'),
      message: z.string(),
      fetched: z.object({ total_entities: z.number(), resources: z.array(ResourceCountsSchema) }),
    }),
  })
  .openapi('ImmediateSyncTimeout');
