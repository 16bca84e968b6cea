import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import {
  createConnection,
  describeConnection,
  disableConnection,
  getConnection,
  listConnections,
  pauseConnection,
  resumeConnection,
  updateConnection,
} from '../../commands/connections';
import { requestJob } from '../../commands/jobs';
import { connectionWorkflowId } from '../../temporal/ids';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { ApiError, describeIssues } from '../errors';
import { tenantFilter, writeAnswer } from '../middleware/auth';
import { pageAnswer, pageRequest } from '../pagination';
import { uuidCursor } from '../../policy/cursors';
import { presentAccepted, presentConnection, presentConnectionDetail } from '../present';
import { conflict, errorAnswer, bodyErrorResponses, errorResponses, IdParams, jsonAnswer, jsonBody, notFound } from '../schemas/common';
import {
  ConnectionDetailSchema,
  ConnectionPageSchema,
  ConnectionSchema,
  UpdatedConnectionSchema,
  CreateConnectionBody,
  ListConnectionsQuery,
  StatusChangeSchema,
  SyncNowBody,
  UpdateConnectionBody,
} from '../schemas/connections';
import { SyncAcceptedSchema } from '../schemas/sync';

const tags = ['connections'];

/** A GitHub App private key as an example shows it (never a real key). */
const EXAMPLE_PRIVATE_KEY = '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA…\n-----END RSA PRIVATE KEY-----\n';
const GITHUB_CONFIG_EXAMPLE = { repositories: ['octo-org/octo-repo'] };
const GITHUB_APP_CREDENTIALS_EXAMPLE = { kind: 'github_app', app_id: 123456, installation_id: 7890123, private_key: EXAMPLE_PRIVATE_KEY };

const SHARED_GRANT_EXAMPLE = { kind: 'oauth2', grant_from_connection: '0b7c3d52-8f0e-4c1a-9a57-2f4d6e8b1c90' };

const createExamples = {
  github_token: { summary: 'A GitHub connection with a token', value: { tenant_id: 'acme', app_key: 'acme-github', provider: 'github', config: GITHUB_CONFIG_EXAMPLE, credentials: { token: 'ghp_0123456789abcdefghijklmnopqrstuvwxyz' } } },
  github_app: {
    summary: 'A GitHub connection through a GitHub App installation (installation tokens minted and renewed by the platform)',
    value: { tenant_id: 'acme', app_key: 'acme-github-app', provider: 'github', config: GITHUB_CONFIG_EXAMPLE, credentials: GITHUB_APP_CREDENTIALS_EXAMPLE },
  },
  shared_oauth2_grant: {
    summary: "A connection sharing another connection's OAuth 2 grant (same tenant; one refresh serves both)",
    value: { tenant_id: 'acme', app_key: 'acme-github-2', provider: 'github', config: GITHUB_CONFIG_EXAMPLE, credentials: SHARED_GRANT_EXAMPLE },
  },
};
const updateExamples = {
  token: { summary: 'New credentials: a token', value: { credentials: { token: 'ghp_0123456789abcdefghijklmnopqrstuvwxyz' } } },
  github_app: { summary: 'New credentials: a GitHub App installation', value: { credentials: GITHUB_APP_CREDENTIALS_EXAMPLE } },
  http_client_credentials: {
    summary: 'New credentials of an http connection: an OAuth 2 client (client credentials grant)',
    value: { credentials: { kind: 'oauth2_client_credentials', token_url: 'https://auth.example.com/oauth/token', client_id: 'synctide-reader', client_secret: 'cs_…', scopes: ['read'] } },
  },
  shared_oauth2_grant: { summary: "New credentials: share another connection's OAuth 2 grant (same tenant)", value: { credentials: SHARED_GRANT_EXAMPLE } },
  schedule: { summary: 'A new schedule', value: { schedule: { interval_seconds: 3600 } } },
};

const create = createRoute({
  method: 'post', path: '/connections', tags, summary: 'Create a connection and start its workflow', operationId: 'createConnection',
  description: "Stores a provider connection of a tenant (its config checked by the provider's schema, its credentials sealed) and starts its `connection:<id>` workflow, which runs the first sync at once unless `status` is `paused`.",
  request: { body: jsonBody(CreateConnectionBody, undefined, createExamples) },
  responses: { 201: jsonAnswer(ConnectionSchema, 'Created (with the config as given); its connection workflow is running'), ...bodyErrorResponses, 404: errorAnswer('`credentials.grant_from_connection` names no connection of the tenant', 'not_found'), 409: conflict('tenant_id + app_key already taken (`purge_in_progress`, with `purge_id`, while the connection holding it is being deleted: the app key is free once that purge completes), the tenant has its limit of connections (`tenant_limit`, with `limit` and `value`), or `credentials.grant_from_connection` names a connection holding no oauth2 grant (`grant_source_not_oauth2`) or one whose grant the provider refused (`connection_needs_reauth`)', 'conflict', 'purge_in_progress', 'tenant_limit', 'grant_source_not_oauth2', 'connection_needs_reauth') },
});
const list = createRoute({
  method: 'get', path: '/connections', tags, summary: 'List connections (cursor pagination, by id)', operationId: 'listConnections',
  description: 'Connections ordered by id, filtered by tenant, provider or status; a tenant key lists its own tenant only. Pass `next_cursor` as `cursor` for the next page.',
  request: { query: ListConnectionsQuery },
  responses: { 200: jsonAnswer(ConnectionPageSchema, 'One page'), ...errorResponses },
});
const get = createRoute({
  method: 'get', path: '/connections/{id}', tags, summary: "A connection with its workflow's live state and its breaker", operationId: 'getConnection',
  description: "The connection, the live state its workflow answers to the `state` query (null when the workflow is not running or did not answer) and its circuit breaker with any open alert.",
  request: { params: IdParams },
  responses: { 200: jsonAnswer(ConnectionDetailSchema, 'The connection'), ...errorResponses, 404: notFound },
});
const update = createRoute({
  method: 'patch', path: '/connections/{id}', tags, summary: 'Change config, credentials or schedule (a schedule change re-plans the sleeping workflow)', operationId: 'updateConnection',
  description: 'Changes any of config, credentials (null removes them) and schedule. A running job finishes with what it started with; a schedule change is signalled to the workflow, which plans its next run again.',
  request: { params: IdParams, body: jsonBody(UpdateConnectionBody, undefined, updateExamples) },
  responses: {
    200: jsonAnswer(UpdatedConnectionSchema, 'Updated (without `config` for a key lacking the `read` scope). A config that moves the provider origin (e.g. GitHub `base_url`) without `credentials` in the same request clears the stored credentials (`has_credentials: false`)'),
    ...bodyErrorResponses,
    404: notFound,
    409: conflict('The connection is disabled (for a schedule change), being deleted (`purge_in_progress`, with `purge_id`), or `credentials.grant_from_connection` names a connection holding no oauth2 grant (`grant_source_not_oauth2`) or one whose grant the provider refused (`connection_needs_reauth`)', 'connection_disabled', 'purge_in_progress', 'grant_source_not_oauth2', 'connection_needs_reauth'),
  },
});
const statusRoute = (action: 'pause' | 'resume' | 'disable', summary: string, description: string, refusals: { 409?: ReturnType<typeof conflict> } = {}) =>
  createRoute({
    method: 'post', path: `/connections/{id}/${action}`, tags, summary, description, operationId: `${action}Connection`,
    request: { params: IdParams },
    responses: { 200: jsonAnswer(StatusChangeSchema, 'Done, with the status the connection has now; a connection workflow that was not running is started'), ...errorResponses, 404: notFound, ...refusals },
  });
const pause = statusRoute('pause', 'Stop scheduling runs (a running job finishes; a queued one is cancelled)', 'Sets the connection `paused` and signals its workflow, which plans no run until it is resumed; requested syncs are refused with 409 `connection_paused`. A connection that needs reauthorization stays `needs_reauth` (answered so) and gets `paused` back, not `active`, when new credentials come.', { 409: conflict('The connection is disabled', 'connection_disabled') });
const resume = statusRoute('resume', 'Resume scheduling (also re-enables a disabled connection)', 'Sets the connection `active` and signals (or starts) its workflow, which plans its next run from the schedule. A connection that needs reauthorization, or was disabled while it did (`status_before_reauth` set), is `needs_reauth` after it (answered so): its refused credentials are not used again; it becomes `active` when new credentials come.', { 409: conflict('The connection is being deleted (`purge_in_progress`, with `purge_id`)', 'purge_in_progress') });
const disable = statusRoute('disable', 'Stop the workflow; keep the data', 'Sets the connection `disabled`, cancels its active jobs and its immediate sync and stops its workflow; its records stay readable. Sends `connection.disabled` to subscribed webhooks. A connection that needs reauthorization keeps the refusal (its `status_before_reauth`): a resume makes it `needs_reauth` again, not `active`, unless new credentials came meanwhile.');
const syncNow = createRoute({
  method: 'post', path: '/connections/{id}/sync', tags, summary: 'Sync now (incremental or full)', operationId: 'syncConnection',
  description: 'Requests a job of the connection now (all resource types, or some). An active job of that mode that syncs every type asked for is answered instead of a new one; a running one that does not is followed by a job queued behind it (it runs once that one has ended), which later requests join. Poll `GET /jobs/{id}` for its progress.',
  request: { params: IdParams, body: { ...jsonBody(SyncNowBody), required: false } },
  responses: {
    202: jsonAnswer(SyncAcceptedSchema, 'The job that runs the sync'),
    ...bodyErrorResponses,
    404: notFound,
    409: conflict('Being deleted (`purge_in_progress`, with `purge_id`), paused, disabled, waiting for new credentials after the provider refused its OAuth grant (`connection_needs_reauth`), or paused by the circuit breaker (then with `paused_until` and the open alert), or its stored config is invalid', 'purge_in_progress', 'connection_paused', 'connection_disabled', 'connection_needs_reauth', 'circuit_breaker_open', 'invalid_connection_config'),
  },
});

/** Routes of `/connections`: parse, call a command, present. */
export function connectionRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<ApiEnv>();

  app.openapi(create, async (c) => {
    const body = c.req.valid('json');
    const row = await createConnection(deps, {
      tenantId: body.tenant_id,
      appKey: body.app_key,
      provider: body.provider,
      config: body.config,
      credentials: body.credentials ?? null,
      schedule: body.schedule ?? null,
      status: body.status,
    });
    c.get('log').info({ connection_id: row.id, tenant_id: row.tenant_id, provider: row.provider_slug }, 'connection created');
    return c.json(presentConnection(row), 201);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    const { after, limit } = pageRequest(uuidCursor, q);
    const page = await listConnections(deps, { tenantId: tenantFilter(c, q.tenant_id), providerSlug: q.provider, status: q.status, afterId: after?.id, limit });
    return c.json(pageAnswer(page, uuidCursor, (row) => ({ id: row.id }), presentConnection), 200);
  });

  app.openapi(get, async (c) => {
    const { id } = c.req.valid('param');
    const detail = await describeConnection(deps, id, (err) => c.get('log').warn({ err, connection_id: id }, 'connection state query failed'), c.get('outsideTurn'));
    return c.json(presentConnectionDetail(detail), 200);
  });

  app.openapi(update, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    const row = await updateConnection(deps, id, body);
    c.get('log').info({ connection_id: id, changed: Object.keys(body) }, 'connection updated');
    // A key without the read scope may change a connection but not read it: its answer leaves the
    // config out (an empty or schedule-only PATCH would otherwise read it).
    return c.json(writeAnswer(c, presentConnection(row), ['config']), 200);
  });

  app.openapi(pause, async (c) => {
    const { id, status } = await pauseConnection(deps, c.req.valid('param').id);
    c.get('log').info({ connection_id: id }, 'connection paused');
    return c.json({ id, status, workflow: connectionWorkflowId(id) }, 200);
  });

  app.openapi(resume, async (c) => {
    const { id, status } = await resumeConnection(deps, c.req.valid('param').id);
    c.get('log').info({ connection_id: id }, 'connection resumed');
    return c.json({ id, status, workflow: connectionWorkflowId(id) }, 200);
  });

  app.openapi(disable, async (c) => {
    const { id, status } = await disableConnection(deps, c.req.valid('param').id);
    c.get('log').info({ connection_id: id }, 'connection disabled; its workflow was cancelled');
    return c.json({ id, status, workflow: connectionWorkflowId(id) }, 200);
  });

  app.openapi(syncNow, async (c) => {
    const row = await getConnection(deps, c.req.valid('param').id);
    const body = (await c.req.json().catch(() => ({}))) as unknown;
    const parsed = SyncNowBody.safeParse(body ?? {});
    if (!parsed.success) throw new ApiError(400, 'invalid_request', describeIssues(parsed.error.issues));
    const answer = await requestJob(deps, { connection: row, mode: parsed.data.mode, resourceTypes: parsed.data.resource_types });
    return c.json(presentAccepted(answer.job, answer.resourceTypes), 202);
  });

  return app;
}
