import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { countsView, runImmediately } from '../../commands/immediate-sync';
import { findConnectionByAppKey, requestJob } from '../../commands/jobs';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { tenantFilter } from '../middleware/auth';
import { presentAccepted } from '../present';
import { conflict, errorAnswer, bodyErrorResponses, jsonAnswer, jsonBody, notFound, retryAfter } from '../schemas/common';
import { ImmediateSyncSchema, ImmediateSyncTimeoutSchema, SyncAcceptedSchema, SyncBody } from '../schemas/sync';

const route = createRoute({
  method: 'post', path: '/sync', tags: ['sync'], summary: 'Sync an app instance: a job, or immediate results', operationId: 'requestSync',
  description: 'Finds the connection by `app_key` (and `tenant_id` when two tenants share it) and requests a job (202), or with `immediate: true` runs the sync now and answers with what it fetched (200), writing no job or task rows.',
  request: { body: jsonBody(SyncBody) },
  responses: {
    202: jsonAnswer(SyncAcceptedSchema, 'A job was created (or an active one of that mode that syncs every type asked for answers) and will run; a job created while one of that mode runs runs once that one has ended'),
    200: jsonAnswer(ImmediateSyncSchema, 'immediate: the sync ran; no job or task rows were written'),
    ...bodyErrorResponses,
    404: notFound,
    409: conflict('The connection is being deleted (`purge_in_progress`, with `purge_id`), paused, disabled, waiting for new credentials after the provider refused its OAuth grant (`connection_needs_reauth`), or paused by its circuit breaker (then with `paused_until` and the open alert), also for `immediate`; for `immediate`, also when the connection is disabled or its deletion begins while it runs (the sync is cancelled), and `immediate_sync_running` while an immediate sync of the connection runs (one at a time)', 'purge_in_progress', 'connection_paused', 'connection_disabled', 'connection_needs_reauth', 'circuit_breaker_open', 'invalid_connection_config', 'immediate_sync_running'),
    429: { ...errorAnswer('This API key exceeded its request rate, or (immediate) the tenant runs its limit of immediate syncs at once (`tenant_limit`, with `limit`, `value` and `retry_after_seconds`); retry after `Retry-After` seconds', 'rate_limited', 'tenant_limit'), headers: retryAfter('Seconds until a request may succeed') },
    502: errorAnswer('immediate: the provider failed', 'sync_failed'),
    504: jsonAnswer(ImmediateSyncTimeoutSchema, 'immediate: not finished within IMMEDIATE_SYNC_TIMEOUT_SECONDS; the sync was cancelled, and `fetched` tells what it fetched and stored so far'),
  },
});

/** `POST /sync`: parse, call a command, present. */
export function syncRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<ApiEnv>();
  app.openapi(route, async (c) => {
    const body = c.req.valid('json');
    const { connection, blockers } = await findConnectionByAppKey(deps, body.app_key, tenantFilter(c, body.tenant_id));
    if (body.immediate) {
      const result = await runImmediately(deps, connection, body.mode, body.resource_types, c.get('outsideTurn'));
      return c.json({ immediate: true as const, connection_id: connection.id, mode: body.mode, ...countsView(result.resources) }, 200);
    }
    const answer = await requestJob(deps, { connection, blockers, mode: body.mode, resourceTypes: body.resource_types });
    c.set('auditTargetId', answer.job.id);
    c.get('log').info({ connection_id: connection.id, job_id: answer.job.id, created: answer.created, mode: body.mode }, 'sync requested');
    return c.json(presentAccepted(answer.job, answer.resourceTypes), 202);
  });
  return app;
}
