import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import {
  completeAuthorization,
  createOAuthApp,
  deleteOAuthApp,
  getOAuthApp,
  listOAuthApps,
  startAuthorization,
  updateOAuthApp,
} from '../../commands/oauth';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { tenantFilter, writeAnswer } from '../middleware/auth';
import { callbackTurn } from '../middleware/tenant-turns';
import { CLIENT_GONE } from '../middleware/receive-body';
import { TenantTurns } from '../../lib/tenant-turns';
import { tenantShareOfPool } from '../../policy/tenant-limits';
import { presentOAuthApp } from '../present';
import { uuidCursor } from '../../policy/cursors';
import { pageAnswer, pageRequest } from '../pagination';
import { conflict, errorAnswer, bodyErrorResponses, errorResponses, IdParams, jsonAnswer, jsonBody, notFound, retryAfter } from '../schemas/common';
import {
  AuthorizationSchema,
  AuthorizeBody,
  CallbackQuery,
  CallbackSchema,
  CreateOAuthAppBody,
  ListOAuthAppsQuery,
  OAuthAppPageSchema,
  OAuthAppSchema,
  UpdatedOAuthAppSchema,
  UpdateOAuthAppBody,
} from '../schemas/oauth';

const tags = ['oauth'];

/** The callback path: called by the person's browser coming back from the provider, with no API key (the single-use state is its proof). */
export const OAUTH_CALLBACK_PATH = '/oauth/callback';

const create = createRoute({
  method: 'post', path: '/oauth-apps', tags, summary: "Register a tenant's OAuth client at a provider (the client secret is sealed and never shown)", operationId: 'createOAuthApp',
  description: "Registers a tenant's OAuth 2 client (client id, client secret, authorization and token endpoints, the exact redirect URI, scopes). Connections of the tenant name it in the connect flow; the client secret is sealed at rest and appears in no answer.",
  request: { body: jsonBody(CreateOAuthAppBody) },
  responses: { 201: jsonAnswer(OAuthAppSchema, 'Created'), ...bodyErrorResponses, 409: conflict('The tenant has an app of that name, or its limit of apps (`tenant_limit`, with `limit` and `value`)', 'conflict', 'tenant_limit') },
});
const list = createRoute({
  method: 'get', path: '/oauth-apps', tags, summary: 'List OAuth apps (cursor pagination, by id; never their secrets)', operationId: 'listOAuthApps',
  description: "OAuth apps ordered by id, optionally of one tenant; a tenant key lists its own tenant's only.",
  request: { query: ListOAuthAppsQuery },
  responses: { 200: jsonAnswer(OAuthAppPageSchema, 'One page'), ...errorResponses },
});
const get = createRoute({
  method: 'get', path: '/oauth-apps/{id}', tags, summary: 'One OAuth app', operationId: 'getOAuthApp',
  description: 'One OAuth app, without its client secret.',
  request: { params: IdParams },
  responses: { 200: jsonAnswer(OAuthAppSchema, 'The app'), ...errorResponses, 404: notFound },
});
const patch = createRoute({
  method: 'patch', path: '/oauth-apps/{id}', tags, summary: 'Change an OAuth app (a new client secret is sealed); connections using it refresh with the change', operationId: 'updateOAuthApp',
  description:
    'Changes any of the client id, client secret (sealed), endpoints, redirect URI and scopes. The next refresh of every connection using the app uses its client id, client secret and `token_url`; `authorize_url`, `redirect_uri` and `scopes` apply from the next connect flow (a refresh asks for no scope: a grant keeps the scopes it was given). A `token_url` on another origin (scheme, host, port) needs `client_secret` in the same request (400 otherwise), and is refused while grants of the app exist (409 `oauth_app_in_use`): the secret and their refresh tokens are sent there.',
  request: { params: IdParams, body: jsonBody(UpdateOAuthAppBody) },
  responses: {
    200: jsonAnswer(UpdatedOAuthAppSchema, 'Updated (without `client_id`, `authorize_url`, `token_url`, `redirect_uri` and `scopes` for a key lacking the `read` scope)'), ...bodyErrorResponses, 404: notFound,
    409: conflict('A `token_url` on another origin while grants of the app exist', 'oauth_app_in_use'),
  },
});
const remove = createRoute({
  method: 'delete', path: '/oauth-apps/{id}', tags, summary: 'Delete an OAuth app no connection uses', operationId: 'deleteOAuthApp',
  description: 'Deletes the app; refused while a connection holds credentials obtained through it.',
  request: { params: IdParams },
  responses: { 204: { description: 'Deleted' }, ...errorResponses, 404: notFound, 409: conflict('Connections use the app', 'oauth_app_in_use') },
});
const authorize = createRoute({
  method: 'post', path: '/connections/{id}/oauth/authorize', tags, summary: "Start the connect flow: the provider's authorization URL (PKCE S256, single-use state, 10 minutes)", operationId: 'startOAuthAuthorization',
  description: "Answers the URL to send the person to: the provider's authorization endpoint with PKCE (S256) and a single-use state bound to the tenant, the connection and the app, valid for 10 minutes. A redirect_uri, when given, must equal the app's registered one exactly. A tenant holds at most TENANT_MAX_OAUTH_STATES flows under way (states neither used by a callback nor expired); one more answers 429 `tenant_limit` (`max_oauth_states`) with Retry-After until its oldest state expires.",
  request: { params: IdParams, body: jsonBody(AuthorizeBody) },
  responses: {
    200: jsonAnswer(AuthorizationSchema, 'Where to send the person'), ...bodyErrorResponses, 404: notFound, 409: conflict("The connection is disabled (`connection_disabled`), or its config sends no token a grant could give (`invalid_connection_config`: an http connection's `basic` auth)", 'connection_disabled', 'invalid_connection_config'),
    429: { ...errorAnswer("This API key exceeded its request rate, or the tenant holds its limit of connect flows under way (`tenant_limit`, `max_oauth_states`: TENANT_MAX_OAUTH_STATES states neither used nor expired, with `limit`, `value` and `retry_after_seconds`, until the tenant's oldest state expires); retry after `Retry-After` seconds", 'rate_limited', 'tenant_limit'), headers: retryAfter('Seconds until a request may succeed') },
  },
});
const callback = createRoute({
  method: 'get', path: OAUTH_CALLBACK_PATH, tags, summary: 'The redirect URI target: exchanges the code, stores the tokens sealed, ends needs_reauth (no API key: the state is the proof)', operationId: 'completeOAuthCallback',
  description: 'Where the provider sends the person back: consumes the single-use state, exchanges the code with the PKCE verifier at the token endpoint, stores the tokens sealed and ends the connection’s `needs_reauth`, if it had it: it gets back the status the refusal found (`active`, or `paused` when its owner paused it); any other status is left as it is. A replayed or expired state answers 400.',
  security: [],
  request: { query: CallbackQuery },
  responses: {
    200: jsonAnswer(CallbackSchema, 'Connected'), ...errorResponses,
    409: conflict(
      "The connection is being deleted (`purge_in_progress`, with `purge_id`): nothing is exchanged nor stored; or its config was changed since the flow started to one that sends no token a grant could give (`invalid_connection_config`: an http connection's `basic` auth): nothing is stored; or its grant kept changing while this flow stored its tokens, other flows of the connection completing at once (`conflict`): its current grant stays",
      'purge_in_progress', 'invalid_connection_config', 'conflict',
    ),
    429: { ...errorAnswer('This address failed too many lookups (unknown states, or tenant keys: API_AUTH_FAILURES_PER_MINUTE); retry after `Retry-After` seconds', 'rate_limited'), headers: retryAfter('Seconds until this address may look one up again') },
    502: errorAnswer('The provider refused the authorization or the code exchange failed', 'authorization_refused', 'token_exchange_failed'),
  },
});

/** Routes of `/oauth-apps`, the connect flow's authorize route and its callback: parse, call a command, present. */
/**
 * `turns`: the app's turns at its pool, which a callback takes of its flow's tenant (a router built
 * alone, as for the OpenAPI document, has its own).
 */
export function oauthRoutes(deps: ApiDeps, turns?: TenantTurns) {
  const poolMax = (deps.pool as ApiDeps['pool'] | undefined)?.options?.max ?? 10;
  const callbackTurns = turns ?? new TenantTurns(poolMax, tenantShareOfPool(poolMax));
  const app = new OpenAPIHono<ApiEnv>();

  app.openapi(create, async (c) => {
    const b = c.req.valid('json');
    const row = await createOAuthApp(deps, {
      tenantId: b.tenant_id, name: b.name, clientId: b.client_id, clientSecret: b.client_secret,
      authorizeUrl: b.authorize_url, tokenUrl: b.token_url, redirectUri: b.redirect_uri, scopes: b.scopes,
    });
    c.get('log').info({ oauth_app_id: row.id, tenant_id: row.tenant_id }, 'oauth app created');
    return c.json(presentOAuthApp(row), 201);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    const { after, limit } = pageRequest(uuidCursor, q);
    const page = await listOAuthApps(deps, { tenantId: tenantFilter(c, q.tenant_id), afterId: after?.id, limit });
    return c.json(pageAnswer(page, uuidCursor, (row) => ({ id: row.id }), presentOAuthApp), 200);
  });

  app.openapi(get, async (c) => c.json(presentOAuthApp(await getOAuthApp(deps, c.req.valid('param').id)), 200));

  app.openapi(patch, async (c) => {
    const b = c.req.valid('json');
    const row = await updateOAuthApp(deps, c.req.valid('param').id, {
      clientId: b.client_id, clientSecret: b.client_secret, authorizeUrl: b.authorize_url, tokenUrl: b.token_url, redirectUri: b.redirect_uri, scopes: b.scopes,
    });
    // A key without the read scope may change an app but not read it: its answer leaves out the
    // client and its endpoints (an empty PATCH would otherwise read them).
    return c.json(writeAnswer(c, presentOAuthApp(row), ['client_id', 'authorize_url', 'token_url', 'redirect_uri', 'scopes']), 200);
  });

  app.openapi(remove, async (c) => {
    await deleteOAuthApp(deps, c.req.valid('param').id);
    return c.body(null, 204);
  });

  app.openapi(authorize, async (c) => {
    const b = c.req.valid('json');
    const start = await startAuthorization(deps, c.req.valid('param').id, {
      appId: b.oauth_app_id, ...(b.redirect_uri !== undefined && { redirectUri: b.redirect_uri }), ...(b.scopes && { scopes: b.scopes }),
    });
    return c.json({ authorization_url: start.authorization_url, expires_at: start.expires_at.toISOString() }, 200);
  });

  app.openapi(callback, async (c) => {
    const q = c.req.valid('query');
    const gone = c.req.raw.signal;
    let done;
    try {
      done = await completeAuthorization(deps, { state: q.state, code: q.code, error: q.error }, callbackTurn(callbackTurns, gone));
    } catch (err) {
      // Its client went away while it waited for its tenant's turn: nobody reads an answer.
      // (An answer for the request log only; not one of the route's documented answers.)
      if (gone.aborted) return c.body(null, CLIENT_GONE) as never;
      throw err;
    }
    c.get('log').info({ connection_id: done.connection_id }, 'oauth connect flow completed');
    return c.json({ connection_id: done.connection_id, status: done.status, credential_kind: 'oauth2' as const }, 200);
  });

  return app;
}
