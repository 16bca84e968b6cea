import { randomUUID } from 'node:crypto';
import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { WorkflowFailedError } from '@temporalio/client';
import type { ImmediateSyncResult } from '../../activities/sync-immediately';
import { findConnectionsByAppKey } from '../../db/queries/find-connection';
import type { ConnectionRow } from '../../db/queries/connection-row';
import type { immediateSyncWorkflow } from '../../workflows/immediate-sync';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { ApiError } from '../errors';
import { presentAccepted, safeMessage } from '../present';
import { requestJob, resolveResourceTypes } from '../request-job';
import { conflict, ErrorSchema, errorResponses, jsonAnswer, jsonBody, notFound } from '../schemas/common';
import { ImmediateSyncSchema, SyncAcceptedSchema, SyncBody } from '../schemas/sync';

const route = createRoute({
  method: 'post', path: '/sync', tags: ['sync'], summary: 'Sync an app instance (seed 003): a job, or immediate results',
  request: { body: jsonBody(SyncBody) },
  responses: {
    202: jsonAnswer(SyncAcceptedSchema, 'A job was created (or an identical one is already active) and will run'),
    200: jsonAnswer(ImmediateSyncSchema, 'immediate: the sync ran; no job or task rows were written'),
    ...errorResponses,
    404: notFound,
    409: conflict('Ambiguous app_key, or the connection is paused, disabled or paused by its circuit breaker'),
    502: { description: 'immediate: the provider failed', content: { 'application/json': { schema: ErrorSchema } } },
  },
});

/** `POST /sync`. */
export function syncRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<ApiEnv>();
  app.openapi(route, async (c) => {
    const body = c.req.valid('json');
    const connection = await findByAppKey(deps, body.app_key, body.tenant_id);
    if (body.immediate) {
      const result = await runImmediately(deps, connection, body.mode, body.resource_types);
      const resources = result.resources.map((r) => ({ resource_type: r.resourceType, entity_count: r.entityCount, written_count: r.writtenCount, pages: r.pages }));
      return c.json({
        immediate: true as const, connection_id: connection.id, mode: body.mode,
        total_entities: resources.reduce((sum, r) => sum + r.entity_count, 0), resources,
      }, 200);
    }
    const answer = await requestJob(deps, { connection, mode: body.mode, resourceTypes: body.resource_types });
    c.get('log').info({ connection_id: connection.id, job_id: answer.job.id, created: answer.created, mode: body.mode }, 'sync requested');
    return c.json(presentAccepted(answer.job, answer.resourceTypes), 202);
  });
  return app;
}

async function findByAppKey(deps: ApiDeps, appKey: string, tenantId?: string): Promise<ConnectionRow> {
  const rows = await findConnectionsByAppKey(deps.pool, appKey, tenantId);
  if (rows.length === 0) throw new ApiError(404, 'not_found', 'no connection with that app_key');
  if (rows.length > 1) throw new ApiError(409, 'ambiguous_app_key', 'several tenants use this app_key; give tenant_id');
  return rows[0]!;
}

async function runImmediately(deps: ApiDeps, connection: ConnectionRow, mode: 'incremental' | 'full', requested?: string[]): Promise<ImmediateSyncResult> {
  if (connection.status === 'disabled') throw new ApiError(409, 'connection_disabled', 'the connection is disabled; resume it first');
  const resourceTypes = resolveResourceTypes(connection, requested);
  try {
    return await deps.temporal.workflow.execute<typeof immediateSyncWorkflow>('immediateSyncWorkflow', {
      workflowId: `immediate-sync:${connection.id}:${randomUUID()}`,
      taskQueue: deps.taskQueue,
      args: [{ connectionId: connection.id, mode, resourceTypes }],
    });
  } catch (err) {
    if (!(err instanceof WorkflowFailedError)) throw err;
    // The activity's failure message is the connector's (tokens already redacted); the first line only.
    let cause: unknown = err.cause;
    while ((cause as { cause?: unknown })?.cause) cause = (cause as { cause: unknown }).cause;
    throw new ApiError(502, 'sync_failed', `the sync failed: ${safeMessage((cause as Error)?.message ?? 'unknown error')}`);
  }
}
