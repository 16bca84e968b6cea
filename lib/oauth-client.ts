// The OAuth 2 client side of Synctide, on `oauth4webapi` (standards only, no dependencies): the
// authorization URL with PKCE S256, the code exchange, the refresh and the client credentials grant. Every token request goes
// through `postBoundedForAnswer` (lib/outbound.ts): bounded in time and size, its resolved address
// checked like a webhook's, so a token URL cannot reach internal addresses unless the deployment
// allows private ones (PROVIDER_ALLOW_PRIVATE, for test servers). Errors name the endpoint's
// answer (`error` code) and never a token or the client secret. Synctide is an OAuth 2 client
// only: an OpenID Connect `id_token` in a token answer is dropped unread (see `plainAnswer`). Token
// requests ask for JSON (oauth4webapi sends `Accept: application/json`); an answer form-encoded all
// the same is read as the JSON object of its members.
import * as oauth from 'oauth4webapi';
import { CertificateRefused, MalformedAnswer, postBoundedForAnswer } from './outbound';
import { redactValues } from '../policy/redact';
import { retryAfterSeconds } from '../policy/retry-after';

/** A tenant's OAuth client with its secret opened (in memory, for one request). */
export interface OAuthClientApp {
  clientId: string;
  clientSecret: string;
  authorizeUrl: string;
  tokenUrl: string;
  redirectUri: string;
}

/** How token requests may go: private addresses (tests) and the time and size caps. */
export interface TokenRequestPolicy {
  allowPrivate: boolean;
  timeoutMs: number;
  maxResponseBytes: number;
}

/** What a token endpoint granted. */
export interface TokenAnswer {
  access_token: string;
  refresh_token?: string | undefined;
  expires_in?: number | undefined;
  scope?: string | undefined;
}

/** The grant is gone (`invalid_grant`: revoked, expired, or a refresh token used twice): only a person can renew it. */
export class GrantRefused extends Error {
  override name = 'GrantRefused';
}

/**
 * The token endpoint refused the OAuth app itself on a refresh (`invalid_client`,
 * `unauthorized_client`, or a 401 challenge): its client id or secret was revoked, rotated or
 * changed at the provider. Only a person can fix it (PATCH the OAuth app); a `GrantRefused`, so
 * the grant cannot be used until then.
 */
export class ClientRefused extends GrantRefused {
  override name = 'ClientRefused';
}

/** Any other failed token request (network, 5xx, an unusable answer): it may succeed later. */
export class TokenRequestFailed extends Error {
  override name = 'TokenRequestFailed';
}

/**
 * The token endpoint rate-limited the request (429): nothing is refused, and it may succeed after
 * `retryAfterSeconds` when the endpoint said so (`Retry-After`).
 */
export class TokenRequestRateLimited extends TokenRequestFailed {
  override name = 'TokenRequestRateLimited';
  constructor(message: string, readonly retryAfterSeconds?: number) {
    super(message);
  }
}

/** A value as OAuth's client authentication form-encodes it (RFC 6749 §2.3.1: `application/x-www-form-urlencoded`, as oauth4webapi writes it). */
const formEncoded = (value: string) => encodeURIComponent(value).replace(/[-_.!~*'()]|%20/g, (c) => (c === '%20' ? '+' : `%${c.charCodeAt(0).toString(16).toUpperCase()}`));

/**
 * The secrets of a token request by `app`: its client secret, and the HTTP Basic credentials the
 * request carries it in (the base64 of the form-encoded client id and secret), which an endpoint
 * echoing the request's Authorization header would quote.
 */
const clientSecrets = (app: Pick<OAuthClientApp, 'clientId' | 'clientSecret'>): string[] => [
  app.clientSecret,
  Buffer.from(`${formEncoded(app.clientId)}:${formEncoded(app.clientSecret)}`, 'utf8').toString('base64'),
];

function server(app: Pick<OAuthClientApp, 'authorizeUrl' | 'tokenUrl'>): oauth.AuthorizationServer {
  return { issuer: new URL(app.tokenUrl).origin, authorization_endpoint: app.authorizeUrl, token_endpoint: app.tokenUrl };
}

/**
 * A token answer's body as a plain OAuth 2 answer, or null when it is not a JSON object needing a
 * change (it is then validated as it came):
 * - its `id_token` member dropped: Synctide asks for no OpenID Connect login and reads no ID token;
 *   an ID token's `iss` is the provider's OpenID issuer (`https://idp.example/realms/acme`,
 *   `https://accounts.google.com`), which the token URL does not tell, so validating it would refuse
 *   good answers (and lose a refresh token the provider already rotated);
 * - optional members given as null (`expires_in`, `refresh_token`, `scope`) taken as absent, a
 *   `refresh_token` given as "" (Tailscale's tsidp answers so when it issues none) too, and an
 *   `expires_in` that is no positive number of seconds (-1 or "never" for a token that does not
 *   expire) dropped: such a token is used until refused. Refusing the whole answer would throw away
 *   the access token and a refresh token the provider already rotated (the grant then lost);
 * - a `scope` given as a JSON array of strings (Twitch answers so) taken as the space-separated
 *   list RFC 6749 spells, and a `scope` of any other type dropped (the scopes held before stay),
 *   for the same reason.
 * - no `token_type` (or null; LinkedIn answers none, though RFC 6749 asks for one) taken as
 *   `bearer`: Synctide sends every access token as a bearer token, and refusing the answer would
 *   lose it and a rotated refresh token, as above.
 * Every other member is kept and validated as it came.
 */
function plainAnswer(answer: JsonObject): Buffer | null {
  const drop = new Set<string>();
  const replaced: Record<string, string> = {};
  if (Object.hasOwn(answer, 'id_token')) drop.add('id_token');
  for (const key of ['expires_in', 'refresh_token', 'scope']) if (Object.hasOwn(answer, key) && answer[key] === null) drop.add(key);
  if (answer.refresh_token === '') drop.add('refresh_token');
  if (Object.hasOwn(answer, 'expires_in') && answer.expires_in !== null) {
    const seconds = typeof answer.expires_in === 'number' ? answer.expires_in : typeof answer.expires_in === 'string' ? Number.parseFloat(answer.expires_in) : Number.NaN;
    if (!Number.isFinite(seconds) || seconds <= 0) drop.add('expires_in');
  }
  // No token type (LinkedIn answers none; RFC 6749 asks for one): the access token is a bearer
  // token, the only kind Synctide sends.
  if (typeof answer.access_token === 'string' && (answer.token_type === undefined || answer.token_type === null)) replaced.token_type = 'bearer';
  const scope = answer.scope;
  if (Array.isArray(scope) && scope.every((s) => typeof s === 'string')) replaced.scope = scope.join(' ');
  else if (scope !== undefined && scope !== null && typeof scope !== 'string') drop.add('scope');
  if (drop.size === 0 && Object.keys(replaced).length === 0) return null;
  const kept = Object.entries(answer).filter(([key]) => !drop.has(key) && !Object.hasOwn(replaced, key));
  return Buffer.from(JSON.stringify({ ...Object.fromEntries(kept), ...replaced }), 'utf8');
}

/** The media type a Content-Type header names, in lower case without its parameters ('' for none). */
const mediaType = (contentType: string | null): string => (contentType ?? '').split(';')[0]!.trim().toLowerCase();

/**
 * A form-encoded answer (`application/x-www-form-urlencoded`: GitHub's OAuth apps answer so a
 * request whose Accept is not JSON, and some older providers every request) as the JSON object of
 * the same members, or null for an answer of any other type. Each member is its first value's text;
 * `expires_in` is the number it spells (its text when it spells none, which `plainAnswer` then
 * drops as it drops any `expires_in` that is no lifetime). The object is then read as a JSON answer
 * is: a token answer passes the same checks, an error answer (`error=...`) is the same error.
 */
function formAnswer(body: Buffer, contentType: string | null): JsonObject | null {
  if (mediaType(contentType) !== 'application/x-www-form-urlencoded') return null;
  const form = new URLSearchParams(body.toString('utf8'));
  const members = new Map<string, string | number>();
  for (const key of form.keys()) if (!members.has(key)) members.set(key, form.get(key)!);
  const seconds = members.get('expires_in');
  if (typeof seconds === 'string' && seconds.trim() !== '' && Number.isFinite(Number(seconds))) members.set('expires_in', Number(seconds));
  return Object.fromEntries(members);
}

/** A token endpoint's answer read as JSON, when it is an object. */
type JsonObject = Record<string, unknown>;

/** `body` read as a JSON object, or null when it is not one. */
function jsonObject(body: Buffer): JsonObject | null {
  try {
    const json = JSON.parse(body.toString('utf8')) as unknown;
    return json && typeof json === 'object' && !Array.isArray(json) ? (json as JsonObject) : null;
  } catch {
    return null;
  }
}

/** Whether an answer is an OAuth 2 error answer: a string `error` and no `access_token`. */
const isErrorAnswer = (answer: JsonObject): boolean => typeof answer.error === 'string' && !Object.hasOwn(answer, 'access_token');

/** Whether an answer is a token answer: it has an `access_token` member (whose value the usual checks judge). */
const isTokenAnswer = (answer: JsonObject): boolean => Object.hasOwn(answer, 'access_token');

/**
 * What a token answer's `refresh_token` is ('a number', 'an object', 'an array', 'a boolean') when
 * it is present and neither a string nor null, else null. Such an answer is refused: the endpoint
 * meant to issue a refresh token, perhaps rotating the one sent, and taking the answer without it
 * would keep a refresh token the provider may have spent (the grant then refused later with no
 * word of why), while taking a number's digits as the token may name another token (a JSON number
 * past 2^53 loses digits). The refusal names the member, what it is and the endpoint's host, never
 * a value; a refresh refused so is tried again, and an endpoint that did rotate then answers
 * `invalid_grant`, which asks a person to reconnect.
 */
function misTypedRefreshToken(answer: JsonObject): string | null {
  const value = answer.refresh_token;
  if (value === undefined || value === null || typeof value === 'string') return null;
  return Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** Statuses whose answer has no body (the Fetch standard's null body statuses). */
const NULL_BODY = new Set([204, 205, 304]);

/** Marks an answer whose status was rewritten (an error answered 2xx): the status the endpoint gave. */
const ANSWERED_STATUS = 'x-synctide-answered-status';

/** The status the token endpoint answered an error with (the 2xx of one it answered so, not the 400 it is read as). */
const answeredStatus = (err: oauth.ResponseBodyError): number => Number(err.response.headers.get(ANSWERED_STATUS) ?? err.status);

/**
 * Error codes that mean the grant is gone (RFC 6749's `invalid_grant`; GitHub's `bad_refresh_token`
 * and `bad_verification_code`, its words for a refresh token or code expired, revoked or used).
 */
const GRANT_GONE = new Set(['invalid_grant', 'bad_refresh_token', 'bad_verification_code']);

function options(policy: TokenRequestPolicy, signal?: AbortSignal): oauth.TokenEndpointRequestOptions {
  return {
    [oauth.allowInsecureRequests]: policy.allowPrivate,
    [oauth.customFetch]: async (url, init) => {
      const body = init.body instanceof URLSearchParams ? init.body.toString() : String(init.body ?? '');
      const answer = await postBoundedForAnswer(url, body, init.headers, {
        timeoutMs: policy.timeoutMs,
        maxBodyBytes: policy.maxResponseBytes,
        allowPrivate: policy.allowPrivate,
        ...(signal && { signal }),
      });
      // A rate limit says nothing of the grant or the client, whatever error its body names.
      if (answer.status === 429) {
        const seconds = retryAfterSeconds(answer.headers.get('retry-after'), Date.now());
        throw new TokenRequestRateLimited(`the token endpoint rate-limited the request (429)${seconds === undefined ? '' : `, retry after ${seconds}s`}`, seconds);
      }
      // A form-encoded answer is read as the JSON object of its members, typed so. Read once.
      const form = formAnswer(answer.body, answer.headers.get('content-type'));
      const read = form ? Buffer.from(JSON.stringify(form), 'utf8') : answer.body;
      const object = form ?? jsonObject(answer.body);
      // Headers as they came; a rewritten body's length is the new one's. An error answered with a
      // 2xx status (GitHub's token endpoint answers every error with 200) is the error answer it
      // is: 400. A token answered with a 2xx status other than 200 (201 Created, as some endpoints
      // answer) is the success it is: 200 (oauth4webapi takes a token answer of 200 only).
      const stripped = object && plainAnswer(object);
      const headers = new Headers(answer.headers);
      if (form || stripped) headers.delete('content-length');
      const errorAnswer = object !== null && isErrorAnswer(object);
      const success = answer.status >= 200 && answer.status < 300;
      const errorIn2xx = success && errorAnswer;
      if (errorIn2xx) headers.set(ANSWERED_STATUS, String(answer.status));
      const tokenIn2xx = success && object !== null && isTokenAnswer(object);
      const status = errorIn2xx ? 400 : tokenIn2xx ? 200 : answer.status;
      const refreshToken = tokenIn2xx ? misTypedRefreshToken(object) : null;
      if (refreshToken) throw new TokenRequestFailed(`the token endpoint at '${new URL(url).hostname}' answered, but its refresh_token is ${refreshToken}, not a string: the answer is refused`);
      // An error answer is read as the JSON it is, whatever its Content-Type says (text/plain,
      // text/html, problem+json, none, other letter case): oauth4webapi reads an error's code only
      // from an answer typed exactly application/json, and a refused grant or client read as no
      // error at all would fail as transient on every run instead of needing reauthorization.
      if (errorAnswer || form) headers.set('content-type', 'application/json');
      // A status that has no body (204 No Content) is answered without one: refused for its status.
      return new Response(NULL_BODY.has(status) ? null : new Uint8Array(stripped ?? read), { status, headers });
    },
  };
}

/** The most of a token endpoint's `error` a message quotes: an OAuth 2 error code is one short ASCII word. */
const MAX_QUOTED_ERROR = 100;

/**
 * A token endpoint's `error` fit for a message: each of `secrets` (the client secret and the HTTP
 * Basic credentials carrying it, and the refresh token, code or verifier the request sent), as it
 * is or in any URL encoding (a form body encodes them), replaced by `[redacted]` first, then cut to
 * MAX_QUOTED_ERROR characters. The endpoint is aimed by a tenant and may answer any text as its
 * code: quoted whole, it would carry what it echoed, up to its whole answer, into job errors,
 * alerts, API answers and logs.
 */
function quotedError(code: string, secrets: readonly string[]): string {
  const text = redactValues(code, secrets);
  return text.length > MAX_QUOTED_ERROR ? `${text.slice(0, MAX_QUOTED_ERROR - 1)}…` : text;
}

/**
 * A token request's failure in words that carry no secret: the endpoint's error code (as
 * `quotedError` quotes it, without `secrets`), an answer Node's HTTP parser refuses (a header
 * section past its limit, malformed HTTP: naming what was wrong and the host of `tokenUrl`, the
 * `MalformedAnswer` kept as its cause: the endpoint answers so every time), a TLS certificate
 * refused (its `CertificateRefused`, naming the host and why, kept as the cause: the same on every
 * try), or a generic reason.
 */
function describe(err: unknown, secrets: readonly string[], tokenUrl: string): Error {
  // Thrown by the token request's own reading of the answer (a rate limit, an unusable member): already in words that carry no secret.
  if (err instanceof TokenRequestFailed) return err;
  if (err instanceof oauth.ResponseBodyError) {
    const words = `the token endpoint answered ${answeredStatus(err)} ${quotedError(err.error, secrets)}`;
    return GRANT_GONE.has(err.error) ? new GrantRefused(words) : new TokenRequestFailed(words);
  }
  if (err instanceof MalformedAnswer) return new TokenRequestFailed(`the token endpoint at '${new URL(tokenUrl).hostname}' answered, but ${err.message}`, { cause: err });
  if (err instanceof CertificateRefused) return new TokenRequestFailed(`the token request failed: ${err.message}`, { cause: err });
  if (err instanceof Error && err.name === 'AbortError') return err;
  return new TokenRequestFailed(`the token request failed: ${err instanceof Error ? err.message : String(err)}`);
}

/** Token endpoint errors that mean the OAuth app's own client credentials are refused (GitHub's `incorrect_client_credentials` too). */
const APP_REFUSED = new Set(['invalid_client', 'unauthorized_client', 'incorrect_client_credentials']);

/**
 * A refresh's failure: `ClientRefused` when the endpoint refuses the OAuth app's client credentials
 * (an `invalid_client` or `unauthorized_client` answer, or a 401 with a WWW-Authenticate challenge,
 * which is how RFC 6749 answers a failed HTTP Basic client authentication), else as `describe`.
 */
function describeRefresh(err: unknown, secrets: readonly string[], tokenUrl: string): Error {
  const refused = "the OAuth app's client credentials were refused (PATCH the OAuth app's client_id or client_secret)";
  if (err instanceof oauth.ResponseBodyError && APP_REFUSED.has(err.error)) return new ClientRefused(`the token endpoint answered ${answeredStatus(err)} ${err.error}: ${refused}`);
  if (err instanceof oauth.WWWAuthenticateChallengeError && err.status === 401) return new ClientRefused(`the token endpoint refused the client (401): ${refused}`);
  return describe(err, secrets, tokenUrl);
}

function answerOf(result: oauth.TokenEndpointResponse): TokenAnswer {
  return {
    access_token: result.access_token,
    refresh_token: result.refresh_token,
    expires_in: result.expires_in,
    scope: result.scope,
  };
}

/** The PKCE pair of a new connect flow: the verifier (kept, sealed) and its S256 challenge (sent). */
export async function newPkce(): Promise<{ verifier: string; challenge: string }> {
  const verifier = oauth.generateRandomCodeVerifier();
  return { verifier, challenge: await oauth.calculatePKCECodeChallenge(verifier) };
}

/** A new random `state`. */
export function newState(): string {
  return oauth.generateRandomState();
}

/** The provider's authorization URL for a connect flow. */
export function authorizationUrl(app: OAuthClientApp, input: { state: string; challenge: string; scopes: string[] }): string {
  const url = new URL(app.authorizeUrl);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', app.clientId);
  url.searchParams.set('redirect_uri', app.redirectUri);
  if (input.scopes.length > 0) url.searchParams.set('scope', input.scopes.join(' '));
  url.searchParams.set('state', input.state);
  url.searchParams.set('code_challenge', input.challenge);
  url.searchParams.set('code_challenge_method', 'S256');
  return url.href;
}

/**
 * Exchanges an authorization `code` (with the flow's PKCE verifier) for tokens at the app's token
 * endpoint, authenticating with the client secret (HTTP Basic).
 */
export async function exchangeCode(app: OAuthClientApp, callback: { code: string; state: string }, verifier: string, policy: TokenRequestPolicy): Promise<TokenAnswer> {
  const as = server(app);
  const client: oauth.Client = { client_id: app.clientId };
  try {
    // The state was checked (and consumed) by the caller; this validates the parameters' shape.
    const params = oauth.validateAuthResponse(as, client, new URLSearchParams(callback), callback.state);
    const response = await oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretBasic(app.clientSecret), params, app.redirectUri, verifier, options(policy));
    return answerOf(await oauth.processAuthorizationCodeResponse(as, client, response));
  } catch (err) {
    throw describe(err, [...clientSecrets(app), callback.code, verifier], app.tokenUrl);
  }
}

/**
 * Refreshes a grant: the token endpoint's answer, `GrantRefused` on `invalid_grant`, `ClientRefused`
 * (a `GrantRefused`) when the OAuth app's client credentials are refused, `TokenRequestFailed` otherwise.
 */
export async function refreshGrant(
  app: Pick<OAuthClientApp, 'clientId' | 'clientSecret' | 'tokenUrl'>,
  refreshToken: string,
  policy: TokenRequestPolicy,
  signal?: AbortSignal,
): Promise<TokenAnswer> {
  const as = server({ authorizeUrl: app.tokenUrl, tokenUrl: app.tokenUrl });
  const client: oauth.Client = { client_id: app.clientId };
  try {
    const response = await oauth.refreshTokenGrantRequest(as, client, oauth.ClientSecretBasic(app.clientSecret), refreshToken, options(policy, signal));
    return answerOf(await oauth.processRefreshTokenResponse(as, client, response));
  } catch (err) {
    throw describeRefresh(err, [...clientSecrets(app), refreshToken], app.tokenUrl);
  }
}

/** Token endpoint errors that mean the client itself is refused (wrong or revoked secret, grant or scope not allowed): only a person can fix them. */
const CLIENT_REFUSED = new Set(['invalid_client', 'unauthorized_client', 'incorrect_client_credentials', 'invalid_grant', 'invalid_scope']);

/**
 * An access token by the client credentials grant (the client acting for itself, no person):
 * `GrantRefused` when the endpoint refuses the client, `TokenRequestFailed` otherwise.
 */
export async function clientCredentialsToken(
  app: Pick<OAuthClientApp, 'clientId' | 'clientSecret' | 'tokenUrl'>,
  scopes: string[],
  policy: TokenRequestPolicy,
  signal?: AbortSignal,
): Promise<TokenAnswer> {
  const as = server({ authorizeUrl: app.tokenUrl, tokenUrl: app.tokenUrl });
  const client: oauth.Client = { client_id: app.clientId };
  const parameters: Record<string, string> = scopes.length > 0 ? { scope: scopes.join(' ') } : {};
  try {
    const response = await oauth.clientCredentialsGrantRequest(as, client, oauth.ClientSecretBasic(app.clientSecret), parameters, options(policy, signal));
    return answerOf(await oauth.processClientCredentialsResponse(as, client, response));
  } catch (err) {
    if (err instanceof oauth.ResponseBodyError && CLIENT_REFUSED.has(err.error)) throw new GrantRefused(`the token endpoint answered ${answeredStatus(err)} ${err.error}`);
    if (err instanceof oauth.WWWAuthenticateChallengeError && err.status === 401) throw new GrantRefused('the token endpoint refused the client (401)');
    throw describe(err, clientSecrets(app), app.tokenUrl);
  }
}
