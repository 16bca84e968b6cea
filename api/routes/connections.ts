import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { getConnector, connectorSlugs } from '../../connectors/registry';
import { findBreaker } from '../../db/queries/find-breaker';
import { findConnection } from '../../db/queries/find-connection';
import { insertConnection } from '../../db/queries/insert-connection';
import { listConnections } from '../../db/queries/list-connections';
import { updateConnection } from '../../db/queries/update-connection';
import type { ConnectionRow } from '../../db/queries/connection-row';
import { ensureConnectionWorkflow, stopConnectionWorkflow } from '../../lib/connection-workflows';
import { pauseSignal, resumeSignal, stateQuery, updateScheduleSignal } from '../../workflows/connection';
import { connectionWorkflowId } from '../../workflows/ids';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { ApiError, describeIssues } from '../errors';
import { presentAccepted, presentConnection } from '../present';
import { requestJob } from '../request-job';
import { conflict, decodeCursor, encodeCursor, errorResponses, IdParams, jsonAnswer, jsonBody, notFound } from '../schemas/common';
import {
  ConnectionDetailSchema,
  ConnectionPageSchema,
  ConnectionSchema,
  CreateConnectionBody,
  ListConnectionsQuery,
  StatusChangeSchema,
  SyncNowBody,
  UpdateConnectionBody,
} from '../schemas/connections';
import { SyncAcceptedSchema } from '../schemas/sync';

const tags = ['connections'];
const QUERY_DEADLINE_MS = 3000;

const create = createRoute({
  method: 'post', path: '/connections', tags, summary: 'Create a connection and start its workflow',
  request: { body: jsonBody(CreateConnectionBody) },
  responses: { 201: jsonAnswer(ConnectionSchema, 'Created; its connection workflow is running'), ...errorResponses, 409: conflict('tenant_id + app_key already taken') },
});
const list = createRoute({
  method: 'get', path: '/connections', tags, summary: 'List connections (cursor pagination, by id)',
  request: { query: ListConnectionsQuery },
  responses: { 200: jsonAnswer(ConnectionPageSchema, 'One page'), ...errorResponses },
});
const get = createRoute({
  method: 'get', path: '/connections/{id}', tags, summary: "A connection with its workflow's live state and its breaker",
  request: { params: IdParams },
  responses: { 200: jsonAnswer(ConnectionDetailSchema, 'The connection'), ...errorResponses, 404: notFound },
});
const update = createRoute({
  method: 'patch', path: '/connections/{id}', tags, summary: 'Change config, credentials or schedule (a schedule change re-plans the sleeping workflow)',
  request: { params: IdParams, body: jsonBody(UpdateConnectionBody) },
  responses: { 200: jsonAnswer(ConnectionSchema, 'Updated'), ...errorResponses, 404: notFound, 409: conflict('The connection is disabled') },
});
const statusRoute = (action: 'pause' | 'resume' | 'disable', summary: string) =>
  createRoute({
    method: 'post', path: `/connections/{id}/${action}`, tags, summary,
    request: { params: IdParams },
    responses: { 200: jsonAnswer(StatusChangeSchema, 'Done'), ...errorResponses, 404: notFound, 409: conflict('Not possible in the current status') },
  });
const pause = statusRoute('pause', 'Stop scheduling runs (a running job finishes; a queued one is cancelled)');
const resume = statusRoute('resume', 'Resume scheduling (also re-enables a disabled connection)');
const disable = statusRoute('disable', 'Stop the workflow; keep the data');
const syncNow = createRoute({
  method: 'post', path: '/connections/{id}/sync', tags, summary: 'Sync now (incremental or full)',
  request: { params: IdParams, body: { ...jsonBody(SyncNowBody), required: false } },
  responses: { 202: jsonAnswer(SyncAcceptedSchema, 'The job that runs the sync'), ...errorResponses, 404: notFound, 409: conflict('Paused, disabled, or paused by the circuit breaker') },
});

/** Routes of `/connections`. */
export function connectionRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<ApiEnv>();
  const { pool, temporal } = deps;
  const mustFind = async (id: string): Promise<ConnectionRow> => {
    const row = await findConnection(pool, id);
    if (!row) throw new ApiError(404, 'not_found', 'no connection with that id');
    return row;
  };
  const refOf = (row: ConnectionRow) => ({ id: row.id, tenantId: row.tenant_id, providerSlug: row.provider_slug });
  const checkSchedule = (schedule: { interval_seconds?: number } | undefined) => {
    if (schedule?.interval_seconds !== undefined && schedule.interval_seconds > deps.maxIntervalSeconds) {
      throw new ApiError(400, 'invalid_request', `schedule.interval_seconds: exceeds MAX_OVERRIDDEN_INTERVAL_SECONDS (${deps.maxIntervalSeconds})`);
    }
  };

  app.openapi(create, async (c) => {
    const body = c.req.valid('json');
    checkSchedule(body.schedule);
    checkConfig(body.provider, body.config);
    const row = await insertConnection(pool, {
      tenantId: body.tenant_id,
      providerSlug: body.provider,
      appKey: body.app_key,
      config: body.config,
      credentials: body.credentials ?? null,
      schedule: body.schedule ?? null,
    });
    if (!row) throw new ApiError(409, 'conflict', `tenant ${body.tenant_id} already has a connection with app_key ${body.app_key}`);
    const created = body.status === 'paused' ? (await updateConnection(pool, row.id, { status: 'paused' }))! : row;
    await ensureConnectionWorkflow(temporal, deps.taskQueue, refOf(created));
    c.get('log').info({ connection_id: row.id, tenant_id: row.tenant_id, provider: row.provider_slug }, 'connection created');
    return c.json(presentConnection(created), 201);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    const position = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
    if (position === null || (position && !/^[0-9a-f-]{36}$/i.test(position.id ?? ''))) {
      throw new ApiError(400, 'invalid_request', 'cursor: not a cursor this API made');
    }
    const page = await listConnections(pool, { tenantId: q.tenant_id, providerSlug: q.provider, status: q.status, afterId: position?.id, limit: q.limit });
    const last = page.rows[page.rows.length - 1];
    return c.json({ items: page.rows.map(presentConnection), next_cursor: page.more && last ? encodeCursor({ id: last.id }) : null }, 200);
  });

  app.openapi(get, async (c) => {
    const row = await mustFind(c.req.valid('param').id);
    const [live, breaker] = await Promise.all([
      row.status === 'disabled'
        ? null
        : temporal
            .withDeadline(Date.now() + QUERY_DEADLINE_MS, () => temporal.workflow.getHandle(connectionWorkflowId(row.id)).query(stateQuery))
            .catch((err) => {
              c.get('log').warn({ err, connection_id: row.id }, 'connection state query failed');
              return null;
            }),
      findBreaker(pool, row.id),
    ]);
    const open = breaker.paused_until !== null && breaker.paused_until.getTime() > Date.now();
    return c.json(
      {
        ...presentConnection(row),
        live: live && {
          phase: live.phase, next_run_at: live.next_run_at, scheduled_at: live.scheduled_at,
          last_jitter_seconds: live.last_jitter_seconds, current_job_id: live.current_job_id,
          last_outcome: live.last_outcome, pending: live.pending, cycles: live.cycles,
        },
        breaker: {
          open,
          consecutive_failures: breaker.consecutive_failures,
          paused_until: breaker.paused_until?.toISOString() ?? null,
          last_failure_at: breaker.last_failure_at?.toISOString() ?? null,
          alert: breaker.alert && { ...breaker.alert, created_at: breaker.alert.created_at.toISOString() },
        },
      },
      200,
    );
  });

  app.openapi(update, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    const current = await mustFind(id);
    checkSchedule(body.schedule);
    if (body.config) checkConfig(current.provider_slug, body.config);
    if (body.schedule && current.status === 'disabled') {
      throw new ApiError(409, 'connection_disabled', 'the connection is disabled; resume it before changing its schedule');
    }
    let row = current;
    if (body.config !== undefined || body.credentials !== undefined) {
      row = (await updateConnection(pool, id, { config: body.config, credentials: body.credentials }))!;
    }
    if (body.schedule) {
      // The workflow validates, stores and re-plans at once (also while it sleeps).
      const handle = temporal.workflow.getHandle(connectionWorkflowId(id));
      await handle.signal(updateScheduleSignal, body.schedule);
      row = { ...row, metadata: { ...row.metadata, sync: { ...(row.metadata.sync as object), ...scheduleFields(body.schedule) } } };
    }
    c.get('log').info({ connection_id: id, changed: Object.keys(body) }, 'connection updated');
    return c.json(presentConnection(row), 200);
  });

  app.openapi(pause, async (c) => {
    const row = await mustFind(c.req.valid('param').id);
    if (row.status === 'disabled') throw new ApiError(409, 'connection_disabled', 'the connection is disabled');
    await updateConnection(pool, row.id, { status: 'paused' });
    await temporal.workflow.getHandle(connectionWorkflowId(row.id)).signal(pauseSignal);
    c.get('log').info({ connection_id: row.id }, 'connection paused');
    return c.json({ id: row.id, status: 'paused' as const, workflow: connectionWorkflowId(row.id) }, 200);
  });

  app.openapi(resume, async (c) => {
    const row = await mustFind(c.req.valid('param').id);
    await updateConnection(pool, row.id, { status: 'active' });
    const handle = await ensureConnectionWorkflow(temporal, deps.taskQueue, refOf(row));
    await handle.signal(resumeSignal);
    c.get('log').info({ connection_id: row.id }, 'connection resumed');
    return c.json({ id: row.id, status: 'active' as const, workflow: connectionWorkflowId(row.id) }, 200);
  });

  app.openapi(disable, async (c) => {
    const row = await mustFind(c.req.valid('param').id);
    await updateConnection(pool, row.id, { status: 'disabled' });
    await stopConnectionWorkflow(temporal, row.id);
    c.get('log').info({ connection_id: row.id }, 'connection disabled; its workflow was cancelled');
    return c.json({ id: row.id, status: 'disabled' as const, workflow: connectionWorkflowId(row.id) }, 200);
  });

  app.openapi(syncNow, async (c) => {
    const row = await mustFind(c.req.valid('param').id);
    const body = (await c.req.json().catch(() => ({}))) as unknown;
    const parsed = SyncNowBody.safeParse(body ?? {});
    if (!parsed.success) throw new ApiError(400, 'invalid_request', describeIssues(parsed.error.issues));
    const answer = await requestJob(deps, { connection: row, mode: parsed.data.mode, resourceTypes: parsed.data.resource_types });
    return c.json(presentAccepted(answer.job, answer.resourceTypes), 202);
  });

  return app;
}

function checkConfig(provider: string, config: Record<string, unknown>) {
  if (!connectorSlugs().includes(provider)) {
    throw new ApiError(400, 'invalid_request', `provider: unknown provider '${provider}' (known: ${connectorSlugs().join(', ')})`);
  }
  try {
    getConnector(provider).resourceTypes(config);
  } catch (err) {
    throw new ApiError(400, 'invalid_request', `config: ${(err as Error).message}`);
  }
}

function scheduleFields(schedule: { interval_seconds?: number; cron?: string }) {
  return schedule.cron !== undefined ? { cron: schedule.cron, interval_seconds: undefined } : { interval_seconds: schedule.interval_seconds, cron: undefined };
}
