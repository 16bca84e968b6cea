import { z } from '@hono/zod-openapi';
import { SyncModeSchema } from './common';
import { AppKeySchema, TenantIdSchema } from './connections';

/** `POST /sync` body (seed 003). */
export const SyncBody = z
  .strictObject({
    app_key: AppKeySchema,
    tenant_id: TenantIdSchema.optional().openapi({ description: 'Needed only when two tenants use the same app_key' }),
    mode: SyncModeSchema.default('incremental'),
    resource_types: z.array(z.string().min(1)).min(1).optional(),
    immediate: z.boolean().default(false).openapi({ description: 'Run now and answer with the results; no job or task rows' }),
  })
  .openapi('SyncRequest', { example: { app_key: 'acme-github', mode: 'incremental' } });

/** 202 answer of a sync request: the job that will run it. */
export const SyncAcceptedSchema = z
  .object({
    job_id: z.string(),
    status: z.enum(['queued', 'running', 'retrying']),
    total_tasks: z.number(),
    resource_types: z.array(z.string()),
    connection_id: z.string(),
    mode: SyncModeSchema,
    workflow_id: z.string(),
  })
  .openapi('SyncAccepted');

/** 200 answer of an immediate sync. */
export const ImmediateSyncSchema = z
  .object({
    immediate: z.literal(true),
    connection_id: z.string(),
    mode: SyncModeSchema,
    total_entities: z.number(),
    resources: z.array(z.object({ resource_type: z.string(), entity_count: z.number(), written_count: z.number(), pages: z.number() })),
  })
  .openapi('ImmediateSync');
