// OAuth 2: a tenant's OAuth apps (client id, sealed client secret, endpoints, the one redirect
// URI, scopes) and the connect flow that gives a connection an `oauth2` credential.
//
// Connect flow: `startAuthorization` stores a random `state` (its SHA-256 hash only) bound to the
// tenant, the connection and the app, with the PKCE S256 verifier and the scopes asked for (sealed
// together) and a short expiry (policy/oauth.ts), and answers the provider's authorization URL. The provider sends the person
// back to the app's redirect URI with `code` and `state`; `completeAuthorization` consumes the
// state (once: a second callback with it finds nothing), exchanges the code with the verifier and
// the exact registered redirect URI, and stores the tokens sealed as the connection's credential,
// which ends `needs_reauth`; its scopes are those the token answer names, else those asked for.
import { createHash, randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { resolveAlert } from '../db/models/alerts';
import * as connections from '../db/models/connections';
import * as apps from '../db/models/oauth-apps';
import type { OAuthAppRow } from '../db/models/oauth-apps';
import { consumeOAuthState, countTenantOAuthStates, deleteExpiredTenantOAuthStates, insertOAuthState } from '../db/models/oauth-states';
import { withTransaction } from '../db/transaction';
import { open, seal, sealCredentials } from '../lib/credentials';
import { authorizationUrl, exchangeCode, GrantRefused, newPkce, newState, type OAuthClientApp } from '../lib/oauth-client';
import { outboundUrlProblem } from '../lib/outbound';
import { connectFlowSecretOf, connectFlowSecretText, nextSecret, OAUTH_STATE_TTL_SECONDS } from '../policy/oauth';
import { DEFAULT_PROVIDER_POLICY, providerUrlProblem } from '../connectors/provider-http';
import { countOAuthApps, lockTenant } from '../db/models/tenant-limits';
import { DEFAULT_TENANT_MAX_OAUTH_STATES, fitsUnder, OAUTH_STATES_LIMIT_NAME, oauthStateRetryAfterSeconds } from '../policy/tenant-limits';
import { refuseWhilePurging } from './connections';
import { tokenProblem } from './provider-configs';
import type { CommandDeps } from './deps';
import { CommandRefused, invalid, notFound } from './errors';
import type { HeldTurn, WaitOutsideTurn } from './turns';
import { lockedLimits, overLimit } from './tenant-limits';

export type { OAuthAppRow } from '../db/models/oauth-apps';

/** An OAuth app to create. */
export interface NewOAuthAppRequest {
  tenantId: string;
  name: string;
  clientId: string;
  clientSecret: string;
  authorizeUrl: string;
  tokenUrl: string;
  redirectUri: string;
  scopes: string[];
}

/** What may change on an app; undefined leaves a field as it is. */
export type OAuthAppUpdate = Partial<Omit<NewOAuthAppRequest, 'tenantId' | 'name'>>;

const policyOf = (deps: Pick<CommandDeps, 'providers'>) => deps.providers ?? DEFAULT_PROVIDER_POLICY;

/** The app's endpoints, by the API field that names each. */
type EndpointField = 'authorize_url' | 'token_url' | 'redirect_uri';

/**
 * Refuses an endpoint a token request may not reach: https only (plain http and private
 * addresses only with PROVIDER_ALLOW_PRIVATE), no credentials, query allowed only on the
 * authorization URL (`authorize_url`), never a fragment. The token URL is where the client secret
 * goes: a query there is no place for a secret (it would be stored and answered unsealed), as the
 * client credentials grant's `token_url` refuses one too. The redirect URI must reach this API's
 * callback, whose query is the provider's `code` and `state`: a query of its own would come back
 * before them (a `state` of its own read instead of the flow's). The token URL is the one endpoint
 * Synctide itself requests: its host must be one PROVIDER_HOSTS allows (`tokenUrlProblem`), as a
 * provider base URL's and a client credentials `token_url`'s must; the other two are visited by a
 * person's browser only.
 */
function checkUrl(deps: Pick<CommandDeps, 'providers'>, field: EndpointField, raw: string | undefined): void {
  if (raw === undefined) return;
  const allowPrivate = policyOf(deps).allowPrivate;
  const problem = outboundUrlProblem(raw, allowPrivate);
  if (problem) throw invalid(`${field}: ${problem}`);
  const url = new URL(raw);
  if (url.protocol !== 'https:' && !allowPrivate) throw invalid(`${field}: must be an https URL`);
  if (url.hash) throw invalid(`${field}: must not carry a fragment`);
  if (field !== 'authorize_url' && raw.includes('?')) throw invalid(`${field}: must not carry a query (only authorize_url may)`);
  if (field === 'token_url') {
    const hostProblem = tokenUrlProblem(deps, raw);
    if (hostProblem) throw invalid(`${field}: ${hostProblem}`);
  }
}

/**
 * What is wrong with an OAuth app's token URL under the deployment's provider rules (a host of
 * PROVIDER_HOSTS, https; a private literal only with PROVIDER_ALLOW_PRIVATE), or null. Checked
 * when an app is stored and again before each token request: an app stored before the rule, or
 * before PROVIDER_HOSTS changed, is refused then.
 */
export function tokenUrlProblem(deps: Pick<CommandDeps, 'providers'>, raw: string): string | null {
  return providerUrlProblem(raw, policyOf(deps));
}

/**
 * Creates a tenant's OAuth app; its client secret is sealed (bound to the row) and never answered.
 * One more app than the tenant's limit is refused (`tenant_limit`, 409), counted and inserted
 * under the tenant's lock so that two requests cannot both take the last place.
 */
export async function createOAuthApp(deps: CommandDeps, request: NewOAuthAppRequest): Promise<OAuthAppRow> {
  checkUrl(deps, 'authorize_url', request.authorizeUrl);
  checkUrl(deps, 'token_url', request.tokenUrl);
  checkUrl(deps, 'redirect_uri', request.redirectUri);
  const id = randomUUID();
  const sealedClientSecret = seal(deps.credentials, { table: 'oauth_apps', id }, request.clientSecret);
  const row = await withTransaction(deps.pool, async (tx) => {
    const max = (await lockedLimits(deps, tx, request.tenantId)).oauthApps;
    if (!fitsUnder(max, await countOAuthApps(tx, request.tenantId))) throw overLimit('oauthApps', max, 'OAuth apps');
    return apps.insertOAuthApp(tx, {
      id,
      tenantId: request.tenantId,
      name: request.name,
      clientId: request.clientId,
      sealedClientSecret,
      authorizeUrl: request.authorizeUrl,
      tokenUrl: request.tokenUrl,
      redirectUri: request.redirectUri,
      scopes: request.scopes,
    });
  });
  if (!row) throw new CommandRefused('conflict', 'conflict', `tenant ${request.tenantId} already has an OAuth app named ${request.name}`);
  return row;
}

/** The app with id `id`, or `not_found`. */
export async function getOAuthApp(deps: Pick<CommandDeps, 'pool'>, id: string): Promise<OAuthAppRow> {
  const row = await apps.findOAuthApp(deps.pool, id);
  if (!row) throw notFound('no OAuth app with that id');
  return row;
}

/** One page of apps ordered by id. */
export function listOAuthApps(deps: Pick<CommandDeps, 'pool'>, query: { tenantId?: string; afterId?: string; limit: number }) {
  return apps.listOAuthApps(deps.pool, query);
}

/**
 * Changes an app (a new client secret is sealed); connections using it refresh with the change, and
 * those refused for its client credentials get back their status when these change.
 */
export async function updateOAuthApp(deps: CommandDeps, id: string, change: OAuthAppUpdate): Promise<OAuthAppRow> {
  checkUrl(deps, 'authorize_url', change.authorizeUrl);
  checkUrl(deps, 'token_url', change.tokenUrl);
  checkUrl(deps, 'redirect_uri', change.redirectUri);
  const row = await withTransaction(deps.pool, async (tx) => {
    const stored = await apps.lockOAuthAppForChange(tx, id);
    if (!stored) throw notFound('no OAuth app with that id');
    // The token endpoint is where the client secret and every grant's refresh token are sent: on
    // another origin (scheme, host, port) only with the secret given again in the same request,
    // and never while grants of the app exist (they were given for the origin they came from).
    const from = new URL(stored.token_url).origin;
    const to = change.tokenUrl === undefined ? from : new URL(change.tokenUrl).origin;
    if (to !== from) {
      if (change.clientSecret === undefined) {
        throw invalid(`token_url: moving the token endpoint to another origin (${from} to ${to}) needs client_secret in the same request: the stored secret is never sent to a host it was not given for`);
      }
      if (await apps.oauthAppHasGrants(tx, id)) {
        throw new CommandRefused('conflict', 'oauth_app_in_use', 'token_url: connections hold grants of this OAuth app, whose refresh tokens would go to the new origin; create another OAuth app for it and reconnect them');
      }
    }
    const updated = await apps.updateOAuthApp(tx, id, {
      clientId: change.clientId,
      sealedClientSecret: change.clientSecret === undefined ? undefined : seal(deps.credentials, { table: 'oauth_apps', id }, change.clientSecret),
      authorizeUrl: change.authorizeUrl,
      tokenUrl: change.tokenUrl,
      redirectUri: change.redirectUri,
      scopes: change.scopes,
    });
    // New client credentials end the refusals of the old ones: the connections refused for the
    // app's client (not for their grant) get back their status, and their next run refreshes with
    // the new client. Under the app's lock, so a refusal of the old client either committed first
    // (and is ended here) or waits and then finds the client changed (marking nothing).
    if (change.clientId !== undefined || change.clientSecret !== undefined || change.tokenUrl !== undefined) {
      await connections.resumeClientRefusedConnections(tx, id, new Date());
    }
    return updated;
  });
  if (!row) throw notFound('no OAuth app with that id');
  return row;
}

/** Deletes an app no connection's credential uses (`conflict` otherwise). */
export async function deleteOAuthApp(deps: Pick<CommandDeps, 'pool'>, id: string): Promise<void> {
  // The app's row first: a connect flow storing a grant of the app meanwhile commits before the
  // deletion looks at what uses the app, and is seen.
  const outcome = await withTransaction(deps.pool, async (tx) => {
    await apps.lockOAuthAppForChange(tx, id);
    return apps.deleteOAuthApp(tx, id);
  });
  if (outcome === 'missing') throw notFound('no OAuth app with that id');
  if (outcome === 'in_use') throw new CommandRefused('conflict', 'oauth_app_in_use', 'connections use this OAuth app; give them other credentials first');
}

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest('hex');

/** The app of `appId` with its secret opened, for one token request. */
async function clientOf(deps: CommandDeps, appId: string): Promise<{ row: OAuthAppRow; client: OAuthClientApp }> {
  const row = await apps.findOAuthAppClient(deps.pool, appId);
  if (!row) throw notFound('no OAuth app with that id');
  const problem = tokenUrlProblem(deps, row.token_url);
  if (problem) throw invalid(`the OAuth app's token_url: ${problem}; PATCH the OAuth app`);
  const clientSecret = open(deps.credentials, { table: 'oauth_apps', id: row.id }, row.client_secret);
  return {
    row,
    client: { clientId: row.client_id, clientSecret, authorizeUrl: row.authorize_url, tokenUrl: row.token_url, redirectUri: row.redirect_uri },
  };
}

/**
 * Refuses (409 `invalid_connection_config`) a connection whose config sends no token an OAuth 2
 * grant could give (an http connection's basic auth): the grant would be stored, and every sync
 * fail for good. `then` is added to the message.
 */
function refuseUnsentGrant(connection: { provider_slug: string; config: Record<string, unknown> | null }, then = ''): void {
  const unsent = tokenProblem(connection.provider_slug, connection.config ?? {});
  if (unsent) throw new CommandRefused('conflict', 'invalid_connection_config', `the connection's config sends no token an OAuth 2 grant could give: ${unsent}${then}`);
}

/** What a callback refused for its connection's config adds: what became of the flow. */
const UNSENT_AT_CALLBACK = '; its config changed since the connect flow started, and nothing was stored. Give it an auth that sends a token, then start the connect flow again';

/** What `startAuthorization` answers. */
export interface AuthorizationStart {
  authorization_url: string;
  expires_at: Date;
}

/**
 * Starts the connect flow of connection `connectionId` with app `appId` (of the connection's
 * tenant); a connection whose config sends no token (an http connection's basic auth) is refused
 * (`invalid_connection_config`), as the grant would never be sent. A `redirectUri`, when given,
 * must equal the app's registered one exactly. A tenant holds
 * at most `oauthStatesPerTenant` flows under way (states neither used nor expired): one more is
 * refused, 429 `tenant_limit` naming `max_oauth_states`, with the seconds until the tenant's oldest
 * state expires. A tenant at its limit is refused after one statement, before the tenant's lock
 * (asking again and again costs little and never waits for it); room seen there is taken under
 * the lock, where the tenant's expired states are deleted and the count and the insert run, so
 * concurrent starts take exactly the places left.
 */
export async function startAuthorization(
  deps: CommandDeps,
  connectionId: string,
  request: { appId: string; redirectUri?: string; scopes?: string[] },
): Promise<AuthorizationStart> {
  const connection = await connections.findConnection(deps.pool, connectionId);
  if (!connection) throw notFound('no connection with that id');
  if (connection.status === 'disabled') throw new CommandRefused('conflict', 'connection_disabled', 'the connection is disabled');
  refuseUnsentGrant(connection);
  const { row, client } = await clientOf(deps, request.appId);
  // Another tenant's app is as good as missing.
  if (row.tenant_id !== connection.tenant_id) throw notFound('no OAuth app with that id');
  if (request.redirectUri !== undefined && request.redirectUri !== row.redirect_uri) {
    throw invalid("redirect_uri: must equal the OAuth app's registered redirect_uri exactly");
  }
  const state = newState();
  const pkce = await newPkce();
  const hash = sha256(state);
  const expiresAt = new Date(Date.now() + OAUTH_STATE_TTL_SECONDS * 1000);
  const scopes = request.scopes ?? row.scopes;
  // The scopes asked for are kept with the verifier: an answer naming no scope granted them.
  const codeVerifier = seal(deps.credentials, { table: 'oauth_states', id: hash }, connectFlowSecretText({ verifier: pkce.verifier, scopes }));
  const max = deps.oauthStatesPerTenant ?? DEFAULT_TENANT_MAX_OAUTH_STATES;
  const refuseOver = (held: { live: number; firstExpiry: Date | null }) => {
    if (fitsUnder(max, held.live)) return;
    const retryAfter = oauthStateRetryAfterSeconds(held.firstExpiry ?? expiresAt, new Date());
    throw new CommandRefused('limited', 'tenant_limit', `the tenant has reached its limit of ${max} connect flows under way (${OAUTH_STATES_LIMIT_NAME}); retry in ${retryAfter} s, or complete a flow started before`, {
      limit: OAUTH_STATES_LIMIT_NAME, value: max, retry_after_seconds: retryAfter,
    });
  };
  refuseOver(await countTenantOAuthStates(deps.pool, connection.tenant_id));
  const stored = await withTransaction(deps.pool, async (tx) => {
    await lockTenant(tx, connection.tenant_id);
    await deleteExpiredTenantOAuthStates(tx, connection.tenant_id);
    refuseOver(await countTenantOAuthStates(tx, connection.tenant_id));
    return insertOAuthState(tx, {
      state_hash: hash,
      tenant_id: connection.tenant_id,
      connection_id: connection.id,
      oauth_app_id: row.id,
      code_verifier: codeVerifier,
      expires_at: expiresAt,
    });
  });
  // Deleted since they were read.
  if (!stored) throw notFound('no connection with that id, or no OAuth app with that id (deleted meanwhile)');
  return {
    authorization_url: authorizationUrl(client, { state, challenge: pkce.challenge, scopes }),
    expires_at: expiresAt,
  };
}

/** What the callback did. */
export interface AuthorizationDone {
  connection_id: string;
  status: string;
}

/**
 * Completes a connect flow from the provider's redirect: `state` must be a live one (unknown,
 * used or expired: `invalid`), the provider's `error` is answered as such, and the code is
 * exchanged at the app's token endpoint with the flow's verifier and the registered redirect URI.
 * The tokens are stored sealed as the connection's OAuth 2 grant: the grant it has through the
 * same app is replaced (for every connection sharing it), else a new grant is made its own; a grant
 * read that is gone when replaced (another callback of the connection committed meanwhile) makes
 * it read the connection's grant again (`storeGrant`), 409 `conflict` after a few tries. A
 * connection whose config, as the grant would be stored (under its row's lock), sends no token is
 * refused as the authorize step refuses it (409 `invalid_connection_config`), storing nothing. Every
 * connection of the grant that needed reauthorization gets back the status the refusal found it in
 * (active, or paused) and its credentials alert is resolved. All of it after the state's lookup
 * runs in the flow's tenant's turn at the API's pool (`turn`), but for the code exchange, a request
 * to the token endpoint holding no connection: that runs outside it (`HeldTurn.outsideTurn`).
 */
export async function completeAuthorization(
  deps: CommandDeps,
  callback: { state?: string; code?: string; error?: string },
  turn: (tenantId: string) => Promise<HeldTurn> = async () => ({ outsideTurn: (wait) => wait(), end: () => undefined }),
): Promise<AuthorizationDone> {
  if (!callback.state) throw invalid('state: required');
  const hash = sha256(callback.state);
  const flow = await consumeOAuthState(deps.pool, hash, new Date());
  if (!flow) throw invalid('state: unknown, already used or expired; start the connect flow again');
  // The rest is the flow's tenant's work: it waits for that tenant's turn at the pool, as the
  // tenant's keyed requests do, so a tenant's many callbacks hold no more than its share of it.
  // The code exchange, which holds no connection, runs outside it (completeFlow).
  const held = await turn(flow.tenant_id);
  try {
    return await completeFlow(deps, { ...callback, state: callback.state }, flow, hash, held.outsideTurn);
  } finally {
    held.end();
  }
}

/** How many times a callback reads its connection's grant again when the grant it read is gone. */
const GRANT_DECISIONS = 3;

/**
 * Stores the tokens `secret` of a connect flow as its connection's grant, in transaction `tx`
 * (which holds the flow's app and the connection's purge lock): the grant the connection has
 * through the flow's app gets them, else a new grant does. The grant's id, or null when there is
 * no connection. The grant read may be gone when its tokens are replaced: another callback of the
 * connection committed a grant of its own meanwhile (and the one it left, used by no connection,
 * was deleted), or the connection was given other credentials. Then the connection's grant is read
 * again and the decision made again, a few times at most; after that the callback is refused
 * (`conflict`, 409), never left to name a grant that no longer exists.
 */
async function storeGrant(
  deps: CommandDeps,
  tx: PoolClient,
  flow: NonNullable<Awaited<ReturnType<typeof consumeOAuthState>>>,
  secret: ReturnType<typeof nextSecret>,
): Promise<string | null> {
  for (let decision = 0; decision < GRANT_DECISIONS; decision++) {
    const current = await connections.findConnectionGrant(tx, flow.connection_id);
    if (!current) return null;
    const replacing = current.oauth_grant_id !== null && current.oauth_app_id === flow.oauth_app_id;
    const grantId = replacing ? current.oauth_grant_id! : randomUUID();
    // Sealed bound to the grant's id (in the slot of a connection's credentials).
    const sealed = sealCredentials(deps.credentials, grantId, { ...secret })!;
    if (!replacing) {
      await connections.insertGrant(tx, grantId, current.tenant_id, flow.oauth_app_id, sealed);
      return grantId;
    }
    // A grant's tokens are replaced under its refresh lock, which a refresh's store and a refusal
    // take too: a refusal of the old tokens either commits first (and is undone here: its
    // connections are active again) or comes second and sees the new tokens (marking nothing).
    // Replaced, the grant's row is held until the commit: it cannot be deleted under this callback.
    // Found gone, its refresh lock stays held to the end, before the next grant's: no refresh or
    // store takes a gone grant's lock, and a grant is gone for good, so no one holding a later
    // grant's lock waits for it (a callback that read the gone one too waits here, holding none).
    await connections.lockCredentialRefresh(tx, grantId);
    if (await connections.replaceGrant(tx, grantId, sealed)) return grantId;
  }
  throw new CommandRefused('conflict', 'conflict', "the connection's OAuth grant kept changing while this connect flow stored its tokens (other connect flows of the connection completed at once); its current grant stays. Start the connect flow again if it should hold this one");
}

/** completeAuthorization once its state was found (`flow`, consumed) and its tenant's turn came. */
async function completeFlow(
  deps: CommandDeps,
  callback: { state: string; code?: string; error?: string },
  flow: NonNullable<Awaited<ReturnType<typeof consumeOAuthState>>>,
  hash: string,
  outsideTurn: WaitOutsideTurn,
): Promise<AuthorizationDone> {
  if (callback.error) throw new CommandRefused('failed', 'authorization_refused', `the provider answered ${callback.error.slice(0, 100)}; start the connect flow again`);
  const code = callback.code;
  if (!code) throw invalid('code: required');
  // A connection being deleted takes no new credentials (409 `purge_in_progress`): no code is
  // exchanged for it, and (checked again under its purge lock below) no grant is stored.
  await refuseWhilePurging(deps.pool, flow.connection_id);
  // Nor does one whose config was changed since the flow started to an auth that sends no token
  // (409 `invalid_connection_config`, as the authorize step answers): checked again below, under
  // its row's lock, for a change that commits meanwhile.
  const before = await connections.findConnection(deps.pool, flow.connection_id);
  if (before) refuseUnsentGrant(before, UNSENT_AT_CALLBACK);
  const { row: app, client } = await clientOf(deps, flow.oauth_app_id);
  const { verifier, scopes: asked } = connectFlowSecretOf(open(deps.credentials, { table: 'oauth_states', id: hash }, flow.code_verifier));
  let answer;
  try {
    // The request to the token endpoint (up to PROVIDER_REQUEST_TIMEOUT_SECONDS, holding no
    // connection) runs outside the tenant's turn: a slow endpoint holds no place of the pool. The
    // turn is taken again after it, before the grant is stored, whether or not the person's
    // browser is still there: the code is spent, so the tokens it gave are kept.
    answer = await outsideTurn(() => exchangeCode(client, { code, state: callback.state }, verifier, policyOf(deps)));
  } catch (err) {
    const reason = err instanceof GrantRefused ? 'the provider refused the code' : 'the code exchange failed';
    throw new CommandRefused('failed', 'token_exchange_failed', `${reason}: ${(err as Error).message}`);
  }
  // An answer naming no scope granted the scopes asked for (RFC 6749 §5.1); a flow started before
  // they were kept with it asked for its app's.
  const secret = nextSecret({ refresh_token: null, scopes: asked ?? app.scopes }, answer, Date.now());
  const row = await withTransaction(deps.pool, async (tx) => {
    // The app may have been deleted while the token endpoint answered; held from here to the commit.
    if (!(await apps.lockOAuthAppForUse(tx, flow.oauth_app_id))) throw notFound('the OAuth app of this connect flow no longer exists; create one and start the connect flow again');
    await refuseWhilePurging(tx, flow.connection_id, 'locked');
    const grantId = await storeGrant(deps, tx, flow, secret);
    if (!grantId) return null;
    const resumed = await connections.attachGrant(tx, flow.connection_id, grantId, flow.oauth_app_id);
    // Deleted since it was read (its deletion committed while this waited for its row): nothing is
    // kept, so a grant made for it is not left behind, with its tokens, in no connection's use.
    if (!resumed.includes(flow.connection_id)) throw notFound('the connection no longer exists');
    // The config the grant is stored for, read under the row's lock attachGrant took (held to the
    // commit, so no config change comes between): one that sends no token refuses the grant, and
    // the transaction (the grant, its tokens, the connection's change) is rolled back.
    const connection = await connections.findConnection(tx, flow.connection_id);
    if (connection) refuseUnsentGrant(connection, UNSENT_AT_CALLBACK);
    for (const id of resumed) await resolveAlert(tx, 'connection_credentials_invalid', id, new Date());
    return connection;
  });
  if (!row) throw notFound('the connection no longer exists');
  return { connection_id: row.id, status: row.status };
}
