import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { invalid } from '../../commands/errors';
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
import { tenantFilter } from '../middleware/auth';
import { presentOAuthApp } from '../present';
import { conflict, decodeCursor, encodeCursor, errorResponses, IdParams, jsonAnswer, jsonBody, notFound } from '../schemas/common';
import {
  AuthorizationSchema,
  AuthorizeBody,
  CallbackQuery,
  CallbackSchema,
  CreateOAuthAppBody,
  ListOAuthAppsQuery,
  OAuthAppPageSchema,
  OAuthAppSchema,
  UpdateOAuthAppBody,
} from '../schemas/oauth';

const tags = ['oauth'];
const UUID = /^[0-9a-f-]{36}$/i;

/** The callback path: called by the person's browser coming back from the provider, with no API key (the single-use state is its proof). */
export const OAUTH_CALLBACK_PATH = '/oauth/callback';

const create = createRoute({
  method: 'post', path: '/oauth-apps', tags, summary: "Register a tenant's OAuth client at a provider (the client secret is sealed and never shown)",
  request: { body: jsonBody(CreateOAuthAppBody) },
  responses: { 201: jsonAnswer(OAuthAppSchema, 'Created'), ...errorResponses, 409: conflict('The tenant has an app of that name') },
});
const list = createRoute({
  method: 'get', path: '/oauth-apps', tags, summary: 'List OAuth apps (cursor pagination, by id; never their secrets)',
  request: { query: ListOAuthAppsQuery },
  responses: { 200: jsonAnswer(OAuthAppPageSchema, 'One page'), ...errorResponses },
});
const get = createRoute({
  method: 'get', path: '/oauth-apps/{id}', tags, summary: 'One OAuth app',
  request: { params: IdParams },
  responses: { 200: jsonAnswer(OAuthAppSchema, 'The app'), ...errorResponses, 404: notFound },
});
const patch = createRoute({
  method: 'patch', path: '/oauth-apps/{id}', tags, summary: 'Change an OAuth app (a new client secret is sealed); connections using it refresh with the change',
  request: { params: IdParams, body: jsonBody(UpdateOAuthAppBody) },
  responses: { 200: jsonAnswer(OAuthAppSchema, 'Updated'), ...errorResponses, 404: notFound },
});
const remove = createRoute({
  method: 'delete', path: '/oauth-apps/{id}', tags, summary: 'Delete an OAuth app no connection uses',
  request: { params: IdParams },
  responses: { 204: { description: 'Deleted' }, ...errorResponses, 404: notFound, 409: conflict('Connections use the app (`oauth_app_in_use`)') },
});
const authorize = createRoute({
  method: 'post', path: '/connections/{id}/oauth/authorize', tags, summary: "Start the connect flow: the provider's authorization URL (PKCE S256, single-use state, 10 minutes)",
  request: { params: IdParams, body: jsonBody(AuthorizeBody) },
  responses: { 200: jsonAnswer(AuthorizationSchema, 'Where to send the person'), ...errorResponses, 404: notFound, 409: conflict('The connection is disabled') },
});
const callback = createRoute({
  method: 'get', path: OAUTH_CALLBACK_PATH, tags, summary: 'The redirect URI target: exchanges the code, stores the tokens sealed, ends needs_reauth (no API key: the state is the proof)',
  security: [],
  request: { query: CallbackQuery },
  responses: { 200: jsonAnswer(CallbackSchema, 'Connected'), ...errorResponses, 502: { description: 'The provider refused the code or the exchange failed' } },
});

/** Routes of `/oauth-apps`, the connect flow's authorize route and its callback: parse, call a command, present. */
export function oauthRoutes(deps: ApiDeps) {
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
    const position = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
    if (position === null || (position && !UUID.test(position.id ?? ''))) throw invalid('cursor: not a cursor this API made');
    const page = await listOAuthApps(deps, { tenantId: tenantFilter(c, q.tenant_id), afterId: position?.id, limit: q.limit });
    const last = page.rows.at(-1);
    return c.json({ items: page.rows.map(presentOAuthApp), next_cursor: page.more && last ? encodeCursor({ id: last.id }) : null }, 200);
  });

  app.openapi(get, async (c) => c.json(presentOAuthApp(await getOAuthApp(deps, c.req.valid('param').id)), 200));

  app.openapi(patch, async (c) => {
    const b = c.req.valid('json');
    const row = await updateOAuthApp(deps, c.req.valid('param').id, {
      clientId: b.client_id, clientSecret: b.client_secret, authorizeUrl: b.authorize_url, tokenUrl: b.token_url, redirectUri: b.redirect_uri, scopes: b.scopes,
    });
    return c.json(presentOAuthApp(row), 200);
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
    const done = await completeAuthorization(deps, { state: q.state, code: q.code, error: q.error });
    c.get('log').info({ connection_id: done.connection_id }, 'oauth connect flow completed');
    return c.json({ connection_id: done.connection_id, status: done.status, credential_kind: 'oauth2' as const }, 200);
  });

  return app;
}
