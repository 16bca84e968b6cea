import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { deleteConnection, getPurge } from '../../commands/purges';
import { createApiKey, listApiKeys, listAudit, revokeApiKey } from '../../commands/tenancy';
import { getTenantLimits, setTenantLimits } from '../../commands/tenant-limits';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { ApiError, describeIssues } from '../errors';
import { writeAnswer } from '../middleware/auth';
import { pageAnswer, pageRequest } from '../pagination';
import { presentApiKey, presentAuditEntry, presentPurge, presentTenantLimits } from '../present';
import { serialCursor } from '../../policy/cursors';
import { bodyErrorResponses, errorResponses, IdParams, jsonAnswer, jsonBody, notFound } from '../schemas/common';
import {
  ApiKeyListSchema,
  ApiKeySchema,
  AuditPageSchema,
  AuditQuery,
  CreateApiKeyBody,
  CreatedApiKeySchema,
  PurgeSchema,
  StartedPurgeSchema,
  TenantKeyParams,
  TenantLimitsBody,
  TenantLimitsSchema,
  TenantParams,
} from '../schemas/tenancy';

const createKey = createRoute({
  method: 'post', path: '/tenants/{tenant_id}/api-keys', tags: ['tenants'], summary: "Create a tenant API key (admin only; the secret is shown once)", operationId: 'createApiKey',
  description: 'Creates a key for the tenant with the scopes given (default read and write). The answer carries the key itself, the only time it is shown; only its hash is stored.',
  request: { params: TenantParams, body: { ...jsonBody(CreateApiKeyBody), required: false } },
  responses: { 201: jsonAnswer(CreatedApiKeySchema, 'Created, with its secret'), ...bodyErrorResponses },
});
const listKeys = createRoute({
  method: 'get', path: '/tenants/{tenant_id}/api-keys', tags: ['tenants'], summary: "A tenant's API keys, revoked ones included (admin only; never secrets)", operationId: 'listApiKeys',
  description: "The tenant's keys with their prefixes, scopes and last use, revoked ones included; never the keys themselves.",
  request: { params: TenantParams },
  responses: { 200: jsonAnswer(ApiKeyListSchema, 'The keys'), ...errorResponses },
});
const revokeKey = createRoute({
  method: 'delete', path: '/tenants/{tenant_id}/api-keys/{key_id}', tags: ['tenants'], summary: 'Revoke a tenant API key at once (admin only)', operationId: 'revokeApiKey',
  description: 'Revokes the key: its next request answers 401.',
  request: { params: TenantKeyParams },
  responses: { 200: jsonAnswer(ApiKeySchema, 'Revoked'), ...errorResponses, 404: notFound },
});
const readLimits = createRoute({
  method: 'get', path: '/tenants/{tenant_id}/limits', tags: ['tenants'], summary: "A tenant's limits: the values that apply, its overrides and what it holds now (admin only)", operationId: 'getTenantLimits',
  description: 'The limits that apply to a tenant (each override where set, else the deployment default TENANT_MAX_*), the overrides themselves, and what the tenant holds now as each limit counts it.',
  request: { params: TenantParams },
  responses: { 200: jsonAnswer(TenantLimitsSchema, 'The limits'), ...errorResponses },
});
const changeLimits = createRoute({
  method: 'patch', path: '/tenants/{tenant_id}/limits', tags: ['tenants'],
  summary: "Override a tenant's limits (admin only): each field named is set, null returns it to the default, the others are kept", operationId: 'updateTenantLimits',
  description: 'Sets overrides of the named limits (0 allows none; null returns a limit to the default); limits not named keep their override. Requests over a limit are refused with 409 (counts) or 429 (rates) `tenant_limit`.',
  request: { params: TenantParams, body: jsonBody(TenantLimitsBody) },
  responses: { 200: jsonAnswer(TenantLimitsSchema, 'The limits now'), ...bodyErrorResponses },
});
const audit = createRoute({
  method: 'get', path: '/audit', tags: ['tenants'], summary: 'The audit log of mutating calls, newest first (admin only)', operationId: 'listAuditEntries',
  description: 'One entry per mutating call (who, which tenant, method, path, target and status), refused ones included, newest first; optionally of one tenant.',
  request: { query: AuditQuery },
  responses: { 200: jsonAnswer(AuditPageSchema, 'One page'), ...errorResponses },
});
const remove = createRoute({
  method: 'delete', path: '/connections/{id}', tags: ['connections'],
  summary: 'Delete a connection and purge everything of it (its workflow and jobs are stopped first)', operationId: 'deleteConnection',
  description: 'Disables the connection, stops its workflow and jobs, then a `connection-purge:<id>` workflow deletes its rows in batches, the connection last. Read the purge at `/purges/{id}`. Repeated while the purge is open, answers the same purge. A key lacking the `read` scope gets the purge without `deleted_rows`.',
  request: { params: IdParams },
  responses: { 202: jsonAnswer(StartedPurgeSchema, 'The purge, running (without `deleted_rows` for a key lacking the `read` scope); read it at /purges/{id}. Afterwards the connection is 404'), ...errorResponses, 404: notFound },
});
const purge = createRoute({
  method: 'get', path: '/purges/{id}', tags: ['connections'], summary: "A connection purge's status", operationId: 'getPurge',
  description: 'How far the purge got: its status and the rows deleted so far.',
  request: { params: IdParams },
  responses: { 200: jsonAnswer(PurgeSchema, 'The purge'), ...errorResponses, 404: notFound },
});

/** Routes of tenant API keys, the audit log, and connection deletion with its purge. */
export function tenancyRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<ApiEnv>();

  app.openapi(createKey, async (c) => {
    const { tenant_id } = c.req.valid('param');
    const body = (await c.req.json().catch(() => ({}))) as unknown;
    const parsed = CreateApiKeyBody.safeParse(body ?? {});
    if (!parsed.success) throw new ApiError(400, 'invalid_request', describeIssues(parsed.error.issues));
    const { key, secret } = await createApiKey(deps, tenant_id, parsed.data);
    c.get('log').info({ api_key_id: key.id, tenant_id, prefix: key.prefix }, 'api key created');
    return c.json({ ...presentApiKey(key), secret }, 201);
  });

  app.openapi(listKeys, async (c) => c.json({ items: (await listApiKeys(deps, c.req.valid('param').tenant_id)).map(presentApiKey) }, 200));

  app.openapi(revokeKey, async (c) => {
    const { tenant_id, key_id } = c.req.valid('param');
    const key = await revokeApiKey(deps, tenant_id, key_id);
    c.get('log').info({ api_key_id: key.id, tenant_id }, 'api key revoked');
    return c.json(presentApiKey(key), 200);
  });

  app.openapi(readLimits, async (c) => c.json(presentTenantLimits(await getTenantLimits(deps, c.req.valid('param').tenant_id)), 200));

  app.openapi(changeLimits, async (c) => {
    const { tenant_id } = c.req.valid('param');
    const body = c.req.valid('json');
    const view = await setTenantLimits(deps, tenant_id, {
      connections: body.max_connections,
      webhooks: body.max_webhooks,
      immediateSyncs: body.max_immediate_syncs,
      runningJobs: body.max_running_jobs,
      redeliveriesPerHour: body.max_redeliveries_per_hour,
      oauthApps: body.max_oauth_apps,
    });
    c.get('log').info({ tenant_id, overrides: view.overrides }, 'tenant limits changed');
    return c.json(presentTenantLimits(view), 200);
  });

  app.openapi(audit, async (c) => {
    const q = c.req.valid('query');
    const { after, limit } = pageRequest(serialCursor, q);
    const page = await listAudit(deps, { tenantId: q.tenant_id, beforeId: after?.id, limit });
    return c.json(pageAnswer(page, serialCursor, (row) => ({ id: row.id }), presentAuditEntry), 200);
  });

  app.openapi(remove, async (c) => {
    const row = await deleteConnection(deps, c.req.valid('param').id);
    c.get('log').info({ connection_id: row.connection_id, purge_id: row.id }, 'connection deleted; purge started');
    // A key without the read scope may delete a connection but not read its purge: its answer says
    // which purge and its status, not how far it got (repeated while the purge is open, the DELETE
    // answers that purge, rows deleted included).
    return c.json(writeAnswer(c, presentPurge(row), ['deleted_rows']), 202);
  });

  app.openapi(purge, async (c) => c.json(presentPurge(await getPurge(deps, c.req.valid('param').id)), 200));

  return app;
}
