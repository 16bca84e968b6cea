import { z } from '@hono/zod-openapi';
import { CursorQuery, LimitQuery, TenantIdQuery, TenantIdSchema, uuid } from './common';

const httpUrl = (description: string) =>
  z
    .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
    .max(2000, 'must be at most 2000 characters')
    .openapi({ description: `${description}; https only, and no loopback, private or link-local address, unless PROVIDER_ALLOW_PRIVATE` });

const scopes = z.array(z.string().regex(/^[\x21\x23-\x5B\x5D-\x7E]{1,200}$/, 'must be a scope token (no spaces or quotes)')).max(100, 'must name at most 100 scopes');
const secretText = (max: number) => z.string().min(1, 'must not be empty').max(max, `must be at most ${max} characters`);

/** `POST /oauth-apps` body, strict. */
export const CreateOAuthAppBody = z
  .strictObject({
    tenant_id: TenantIdSchema,
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 letters, digits, _ or -'),
    client_id: secretText(500),
    client_secret: secretText(2000).openapi({ description: 'Sealed at rest; never shown again, in no answer' }),
    authorize_url: httpUrl("The provider's authorization endpoint"),
    token_url: httpUrl("The provider's token endpoint (code exchange and refresh), without a query, on a host PROVIDER_HOSTS allows"),
    redirect_uri: httpUrl('The one redirect URI registered with the provider (it must reach `GET /oauth/callback`), without a query; compared exactly'),
    scopes: scopes.default([]),
  })
  .openapi('CreateOAuthApp');

/** `PATCH /oauth-apps/{id}` body, strict: the fields to change. */
export const UpdateOAuthAppBody = z
  .strictObject({
    client_id: secretText(500).optional(),
    client_secret: secretText(2000).optional(),
    authorize_url: httpUrl("The provider's authorization endpoint").optional(),
    token_url: httpUrl("The provider's token endpoint, without a query, on a host PROVIDER_HOSTS allows").optional(),
    redirect_uri: httpUrl('The registered redirect URI, without a query').optional(),
    scopes: scopes.optional(),
  })
  .openapi('UpdateOAuthApp');

/** An OAuth app (never its client secret). */
export const OAuthAppSchema = z
  .object({
    id: z.string(),
    tenant_id: z.string(),
    name: z.string(),
    client_id: z.string(),
    authorize_url: z.string(),
    token_url: z.string(),
    redirect_uri: z.string(),
    scopes: z.array(z.string()),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('OAuthApp');

/** `PATCH /oauth-apps/{id}` answer: the app; without its client and endpoints for a key lacking the `read` scope. */
export const UpdatedOAuthAppSchema = OAuthAppSchema.partial({ client_id: true, authorize_url: true, token_url: true, redirect_uri: true, scopes: true }).openapi('UpdatedOAuthApp');

/** One page of OAuth apps. */
export const OAuthAppPageSchema = z.object({ items: z.array(OAuthAppSchema), next_cursor: z.string().nullable() }).openapi('OAuthAppPage');

/** `GET /oauth-apps` query. */
export const ListOAuthAppsQuery = z.object({ tenant_id: TenantIdQuery(), limit: LimitQuery, cursor: CursorQuery });

/** `POST /connections/{id}/oauth/authorize` body. */
export const AuthorizeBody = z
  .strictObject({
    oauth_app_id: uuid(),
    redirect_uri: z.string().max(2000).optional().openapi({ description: "When given, must equal the app's registered redirect_uri exactly" }),
    scopes: scopes.optional().openapi({ description: "Scopes to ask for (default: the app's)" }),
  })
  .openapi('OAuthAuthorize');

/** What the authorize route answers. */
export const AuthorizationSchema = z
  .object({
    authorization_url: z.string().openapi({ description: "Send the person here: the provider's consent page (PKCE S256, a single-use state)" }),
    expires_at: z.string().openapi({ description: 'The flow must complete before this time' }),
  })
  .openapi('OAuthAuthorization');

/** `GET /oauth/callback` query, as the provider sends it. */
export const CallbackQuery = z.object({
  state: z.string().max(500).optional(),
  code: z.string().max(4000).optional(),
  error: z.string().max(200).optional(),
  error_description: z.string().max(2000).optional(),
});

/** What the callback answers. */
export const CallbackSchema = z
  .object({ connection_id: z.string(), status: z.string(), credential_kind: z.literal('oauth2') })
  .openapi('OAuthCallback');
