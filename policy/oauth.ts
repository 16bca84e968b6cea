// OAuth 2 credentials: what an `oauth2` credential holds once opened, when it is refreshed, and
// how long a connect flow's `state` lives. Pure: no I/O.

/**
 * A token within this many seconds of its expiry is refreshed before it is used: a request sent
 * with it could otherwise meet its expiry in flight (and a page's requests take seconds). A token
 * living less than twice this is refreshed at half its lifetime instead (`refreshMarginSeconds`).
 */
export const REFRESH_MARGIN_SECONDS = 300;

/** How long a connect flow's `state` (and its PKCE verifier) may wait for the callback. */
export const OAUTH_STATE_TTL_SECONDS = 600;

/**
 * What a connect flow keeps sealed with its `state` until the callback: the PKCE verifier, and the
 * scopes its authorization URL asked for (the scopes granted when the token answer has no `scope`).
 */
export interface ConnectFlowSecret {
  verifier: string;
  scopes: string[];
}

/** The plaintext a connect flow's secret is sealed as. */
export function connectFlowSecretText(flow: ConnectFlowSecret): string {
  return JSON.stringify({ verifier: flow.verifier, scopes: flow.scopes });
}

/**
 * A connect flow's secret from its opened plaintext. A flow started before the scopes were kept
 * holds the bare verifier (PKCE's characters, never a JSON object): its scopes are then unknown
 * (null).
 */
export function connectFlowSecretOf(text: string): { verifier: string; scopes: string[] | null } {
  if (!text.startsWith('{')) return { verifier: text, scopes: null };
  const parsed = JSON.parse(text) as { verifier?: unknown; scopes?: unknown };
  if (typeof parsed.verifier !== 'string') throw new Error("a connect flow's sealed secret holds no verifier");
  const scopes = Array.isArray(parsed.scopes) ? parsed.scopes.filter((s): s is string => typeof s === 'string') : null;
  return { verifier: parsed.verifier, scopes };
}

/** An opened `oauth2` credential (the plaintext of its envelope). */
export interface OAuth2Secret {
  kind: 'oauth2';
  access_token: string;
  /** Null when the provider gave none: the grant then ends with the access token. */
  refresh_token: string | null;
  /** ISO time the access token expires; null when the provider did not say (used until refused). */
  expires_at: string | null;
  /**
   * ISO time the access token was obtained (its lifetime is `expires_at` minus this); null in an
   * envelope written before it was recorded.
   */
  obtained_at: string | null;
  /**
   * The scopes granted: those the token answer named, else (RFC 6749 §5.1, §6) those asked for in
   * the connect flow, or on a refresh those held before.
   */
  scopes: string[];
}

/** The `oauth2` credential `opened` holds, or null when it is of another kind. */
export function oauth2SecretOf(opened: Record<string, unknown> | null): OAuth2Secret | null {
  if (!opened || opened.kind !== 'oauth2' || typeof opened.access_token !== 'string') return null;
  return {
    kind: 'oauth2',
    access_token: opened.access_token,
    refresh_token: typeof opened.refresh_token === 'string' ? opened.refresh_token : null,
    expires_at: typeof opened.expires_at === 'string' ? opened.expires_at : null,
    obtained_at: typeof opened.obtained_at === 'string' ? opened.obtained_at : null,
    scopes: Array.isArray(opened.scopes) ? opened.scopes.filter((s): s is string => typeof s === 'string') : [],
  };
}

/** When a token was obtained and when it expires (ISO times; null when unknown). */
export interface TokenTimes {
  expires_at: string | null;
  obtained_at?: string | null | undefined;
}

/**
 * The refresh margin of a token: REFRESH_MARGIN_SECONDS, or half its lifetime (expiry minus when
 * it was obtained) when that is shorter, so a token living 300 s (Keycloak's default) is used for
 * 150 s instead of being due the moment it arrives. A token whose lifetime is unknown (an envelope
 * written before `obtained_at` was recorded, or a time that does not parse) keeps the fixed
 * margin: refreshed early rather than late, and its refresh records the lifetime from then on.
 */
export function refreshMarginSeconds(secret: TokenTimes): number {
  if (!secret.expires_at || !secret.obtained_at) return REFRESH_MARGIN_SECONDS;
  const lifetimeMs = Date.parse(secret.expires_at) - Date.parse(secret.obtained_at);
  if (Number.isNaN(lifetimeMs)) return REFRESH_MARGIN_SECONDS;
  return Math.max(0, Math.min(REFRESH_MARGIN_SECONDS, lifetimeMs / 2000));
}

/** Whether `secret` must be refreshed before use at `nowMs`: its expiry is known and within its margin (`refreshMarginSeconds`). */
export function refreshDue(secret: TokenTimes, nowMs: number, marginSeconds = refreshMarginSeconds(secret)): boolean {
  if (secret.expires_at === null) return false;
  const at = Date.parse(secret.expires_at);
  return Number.isNaN(at) || at - nowMs <= marginSeconds * 1000;
}

/**
 * Whether the access token of `secret` must be renewed before use at `nowMs`: within its refresh
 * margin (`refreshDue`) when it has a refresh token; without one nothing can renew it, so it is
 * used until it has expired (the grant then needs a new connect flow).
 */
export function renewalDue(secret: TokenTimes & Pick<OAuth2Secret, 'refresh_token'>, nowMs: number): boolean {
  return secret.refresh_token === null ? refreshDue(secret, nowMs, 0) : refreshDue(secret, nowMs);
}

/** The latest time a JavaScript date holds (ms since the epoch): an expiry past it cannot be stored. */
const MAX_DATE_MS = 8.64e15;

/**
 * The ISO expiry of a token answered at `nowMs` with `expires_in` (seconds), or null when the
 * answer gave none or one past any date (a "never expires" sentinel such as 1e13): such a token is
 * used until refused. Never throws: the answer may already have rotated the refresh token, and an
 * expiry that cannot be written must not lose it.
 */
export function expiryOf(nowMs: number, expiresIn: number | undefined): string | null {
  if (typeof expiresIn !== 'number') return null;
  const at = nowMs + expiresIn * 1000;
  return Number.isFinite(at) && Math.abs(at) <= MAX_DATE_MS ? new Date(at).toISOString() : null;
}

/**
 * The scopes a token answer's `scope` names, or null when the answer has none (the scope granted
 * is then the one asked for, or held before). RFC 6749 separates them by spaces; GitHub answers them
 * comma-separated ("repo,user"): both are read, empty entries and repeats left out. A `scope` naming
 * none ("", as GitHub answers a GitHub App's user token) granted none: []. A scope token never holds
 * whitespace; a comma, which RFC 6749 would allow inside one, is read as a separator.
 */
export function scopesOf(scope: string | undefined): string[] | null {
  if (scope === undefined) return null;
  return [...new Set(scope.split(/[\s,]+/).filter(Boolean))];
}

/**
 * The credential after a token answer at `nowMs`: the new access token, the rotated refresh token
 * when the provider sent one (else the one it was refreshed with: rotation is optional), the expiry
 * from `expires_in` (`expiryOf`), when it was obtained (`nowMs`: the lifetime its margin is judged by), and the
 * granted scopes: those the answer's `scope` names (`scopesOf`), else those of `before`, read the
 * same way (RFC 6749 §5.1 and §6: an answer without `scope` granted the scope asked for, or on a
 * refresh the one granted before; a code exchange passes the scopes its flow asked for).
 */
export function nextSecret(
  before: Pick<OAuth2Secret, 'refresh_token' | 'scopes'>,
  answer: { access_token: string; refresh_token?: string | undefined; expires_in?: number | undefined; scope?: string | undefined },
  nowMs: number,
): OAuth2Secret {
  return {
    kind: 'oauth2',
    access_token: answer.access_token,
    refresh_token: answer.refresh_token ?? before.refresh_token,
    expires_at: expiryOf(nowMs, answer.expires_in),
    obtained_at: new Date(nowMs).toISOString(),
    scopes: scopesOf(answer.scope) ?? scopesOf(before.scopes.join(' ')) ?? [],
  };
}

/**
 * An opened `oauth2_client_credentials` credential: the client (token endpoint, id, secret,
 * scopes) given inline and sealed, and the access token it last obtained, cached with its expiry.
 */
export interface ClientCredentialsSecret {
  kind: 'oauth2_client_credentials';
  token_url: string;
  client_id: string;
  client_secret: string;
  scopes: string[];
  /** The cached access token, null until one was obtained. */
  token: string | null;
  /** ISO expiry of the cached token; null with no token, or when the endpoint did not say. */
  expires_at: string | null;
  /** ISO time the cached token was obtained; null with no token, or in an envelope written before it was recorded. */
  obtained_at: string | null;
}

/** The `oauth2_client_credentials` credential `opened` holds, or null when it is of another kind. */
export function clientCredentialsSecretOf(opened: Record<string, unknown> | null): ClientCredentialsSecret | null {
  if (!opened || opened.kind !== 'oauth2_client_credentials') return null;
  const { token_url, client_id, client_secret } = opened;
  if (typeof token_url !== 'string' || typeof client_id !== 'string' || typeof client_secret !== 'string') return null;
  const token = typeof opened.token === 'string' ? opened.token : null;
  return {
    kind: 'oauth2_client_credentials',
    token_url,
    client_id,
    client_secret,
    scopes: Array.isArray(opened.scopes) ? opened.scopes.filter((s): s is string => typeof s === 'string') : [],
    token,
    expires_at: token && typeof opened.expires_at === 'string' ? opened.expires_at : null,
    obtained_at: token && typeof opened.obtained_at === 'string' ? opened.obtained_at : null,
  };
}

/** Whether a client credentials token must be obtained at `nowMs`: none cached, or the cached one within its refresh margin. */
export function clientTokenDue(secret: Pick<ClientCredentialsSecret, 'token' | 'expires_at'> & { obtained_at?: string | null }, nowMs: number): boolean {
  return secret.token === null || refreshDue(secret, nowMs);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The credentials that share another connection's OAuth 2 grant: `{"kind": "oauth2",
 * "grant_from_connection": "<connection id>"}`, nothing else. Null when `credentials` are of
 * another kind; else the source connection's id, or the problem (naming the key).
 */
export function sharedGrantOf(credentials: Record<string, unknown> | null | undefined): { source: string } | { problem: string } | null {
  if (!credentials || credentials.kind !== 'oauth2') return null;
  const extra = Object.keys(credentials).find((key) => key !== 'kind' && key !== 'grant_from_connection');
  if (extra) return { problem: `${extra}: not allowed; an oauth2 credential is given by the connect flow, or shared as {"kind": "oauth2", "grant_from_connection": "<connection id>"}` };
  const source = credentials.grant_from_connection;
  if (typeof source !== 'string' || !UUID.test(source)) return { problem: 'grant_from_connection: must be the id of a connection of the same tenant holding an oauth2 grant' };
  return { source: source.toLowerCase() };
}
