// GitHub App installation tokens. The app's JWT (RS256, `iss` the app id, ten minutes at most) is
// made by `universal-github-app-jwt` (WebCrypto, no dependencies; it takes GitHub's PKCS#1 keys as
// they are downloaded) on this machine's clock, or on GitHub's (its answer's `Date`) once GitHub
// refused the JWT's times: a clock apart from GitHub's is no wrong credential. The token request
// goes through `postBoundedForAnswer` (lib/outbound.ts): bounded in time and size, its resolved
// address checked unless the deployment allows private ones (PROVIDER_ALLOW_PRIVATE, for test
// servers). Errors name GitHub's status, never the key, the JWT or a token.
import { createPrivateKey } from 'node:crypto';
import githubAppJwt from 'universal-github-app-jwt';
import { CertificateRefused, MalformedAnswer, postBoundedForAnswer, type BoundedAnswer } from './outbound';
import { answeredAtMs, parseHttpDate, retryAfterSeconds } from '../policy/retry-after';

/** An app installation with the app's key opened (in memory, for one request). */
export interface GitHubAppInstallation {
  appId: number | string;
  installationId: number;
  privateKey: string;
  /** The GitHub API base the installation lives on (api.github.com, or a GitHub Enterprise `/api/v3`). */
  apiBase: string;
}

/** How the token request may go: private addresses (tests) and the time and size caps. */
export interface MintPolicy {
  allowPrivate: boolean;
  timeoutMs: number;
  maxResponseBytes: number;
}

/**
 * A minted installation token, its expiry and when it was minted (ISO, on this machine's clock: its
 * lifetime is the difference), and the JWTs made to mint it (secrets too).
 */
export interface MintedToken {
  token: string;
  expires_at: string;
  obtained_at: string;
  jwts: string[];
}

/** GitHub refused the app or the installation (401, 403 that is no rate limit, 404): the credential itself is wrong or revoked. */
export class InstallationRefused extends Error {
  override name = 'InstallationRefused';
}

/** Any other failed mint (network, 5xx, a rate limit, an unusable answer): it may succeed later. */
export class MintFailed extends Error {
  override name = 'MintFailed';
}

/**
 * GitHub rate-limited the token request (403 or 429 with a rate-limit signal): the credential is
 * fine and the mint may succeed later, after `retryAfterSeconds` when GitHub told it.
 */
export class MintRateLimited extends MintFailed {
  override name = 'MintRateLimited';
  constructor(message: string, readonly retryAfterSeconds?: number) {
    super(message);
  }
}

/** Waits longer than this many seconds are not believed (a clock skew or a bogus header). */
const MAX_WAIT_SECONDS = 3600;

/**
 * Seconds to wait when a 403 or 429 is GitHub's rate limit, as its REST API signals one (and as the
 * github connector reads it): a `Retry-After` (secondary limit), `x-ratelimit-remaining: 0` (primary
 * limit, until `x-ratelimit-reset`), any 429, or a message naming a rate limit. `undefined` seconds
 * when the answer gives no wait; `null` when the answer is not a rate limit (a real refusal).
 */
function rateLimitWait(status: number, headers: Headers, body: Buffer): { seconds: number | undefined } | null {
  if (status !== 403 && status !== 429) return null;
  const bound = (seconds: number) => Math.min(MAX_WAIT_SECONDS, Math.max(0, Math.ceil(seconds)));
  // Waits are counted from GitHub's clock (its answer's Date), as its reset and dates are its own.
  const now = answeredAtMs(headers.get('date'), Date.now());
  const retryAfter = headers.get('retry-after')?.trim();
  if (retryAfter) {
    const seconds = retryAfterSeconds(retryAfter, now);
    return { seconds: seconds === undefined ? undefined : bound(seconds) };
  }
  if (headers.get('x-ratelimit-remaining')?.trim() === '0') {
    const reset = headers.get('x-ratelimit-reset')?.trim() ?? '';
    return { seconds: /^\d+$/.test(reset) ? bound(Number(reset) - now / 1000) : undefined };
  }
  if (status === 429 || /rate limit/i.test(messageOf(body))) return { seconds: undefined };
  return null;
}

/** GitHub's error `message` of an answer body (not its documentation URL), or the body's text. */
function messageOf(body: Buffer): string {
  const text = body.toString('utf8');
  try {
    const json = JSON.parse(text) as unknown;
    if (json && typeof json === 'object' && typeof (json as { message?: unknown }).message === 'string') return (json as { message: string }).message;
  } catch {
    // not JSON
  }
  return text;
}

/**
 * GitHub's 401 words for a JWT whose `iat` or `exp` its clock refuses ("'Expiration time' claim
 * ('exp') is too far in the future", "'Issued at' claim ('iat') must be an Integer representing a
 * time in the past", …): the JWT was made on a clock apart from GitHub's.
 */
const CLAIM_TIMES_REFUSED = /'(Issued at|Expiration time)' claim \('(iat|exp)'\)/;

/** Whether `answer` is GitHub refusing a JWT's times (see CLAIM_TIMES_REFUSED). */
const claimTimesRefused = (answer: BoundedAnswer) => answer.status === 401 && CLAIM_TIMES_REFUSED.test(messageOf(answer.body));

/**
 * Mints an installation token: `POST {apiBase}/app/installations/{id}/access_tokens` with the app's
 * JWT. When GitHub refuses the JWT's times (this machine's clock is apart from GitHub's), the JWT is
 * made once more on GitHub's clock as its answer's `Date` states, and the request sent again; a
 * refusal of the times after that (or without a `Date`) is a `MintFailed`, never an
 * `InstallationRefused`: the credential may well be right.
 */
export async function mintInstallationToken(app: GitHubAppInstallation, policy: MintPolicy, signal?: AbortSignal): Promise<MintedToken> {
  // One deadline for the mint: the request made again gets what the first left, so a mint takes
  // at most `policy.timeoutMs` (what the renewal lease of the credential is sized for).
  const startedAt = performance.now();
  const first = await requestToken(app, policy, Math.floor(Date.now() / 1000), signal);
  let { answer } = first;
  const jwts = [first.jwt];
  if (claimTimesRefused(answer)) {
    const githubNow = githubTime(answer);
    if (githubNow !== undefined) {
      const leftMs = Math.ceil(policy.timeoutMs - (performance.now() - startedAt));
      if (leftMs <= 0) throw new MintFailed('the installation token request failed: timed out');
      const again = await requestToken(app, { ...policy, timeoutMs: leftMs }, Math.floor(githubNow / 1000), signal);
      answer = again.answer;
      jwts.push(again.jwt);
    }
    if (claimTimesRefused(answer)) {
      const apart = githubNow === undefined ? "(GitHub's answer has no Date)" : `by about ${Math.round(Math.abs(githubNow - Date.now()) / 1000)}s`;
      throw new MintFailed(`GitHub refused the app JWT's times (401): this machine's clock is apart from GitHub's ${apart}`);
    }
  }
  return mintedOf(app, answer, jwts);
}

/**
 * The app's key as the JWT library reads it: the key read as the credential's check reads it
 * (`githubCredentialsProblem`: Node's PEM reader, escaped newlines taken as newlines), written
 * again as a bare PKCS#8 PEM block. The library takes the lines between a PEM's first and last as
 * its base64 body, so a key with any text around its block (the Bag Attributes a PKCS#12 export
 * writes before it, a comment after it), which the check takes, could never sign. Throws on a key
 * that is no private key.
 */
function signingKey(privateKey: string): string {
  return createPrivateKey(privateKey.replace(/\\n/g, '\n')).export({ type: 'pkcs8', format: 'pem' }) as string;
}

/** One token request with a JWT made at `nowSeconds` (on this machine's clock, or GitHub's). */
async function requestToken(app: GitHubAppInstallation, policy: MintPolicy, nowSeconds: number, signal?: AbortSignal): Promise<{ answer: BoundedAnswer; jwt: string }> {
  let jwt: string;
  try {
    ({ token: jwt } = await githubAppJwt({ id: app.appId, privateKey: signingKey(app.privateKey), now: nowSeconds }));
  } catch {
    // The library's message may quote the key's first bytes.
    throw new InstallationRefused('the GitHub App private key is not a usable RSA key (PEM, PKCS#1 or PKCS#8)');
  }
  const url = `${app.apiBase}/app/installations/${encodeURIComponent(String(app.installationId))}/access_tokens`;
  let answer: BoundedAnswer;
  try {
    answer = await postBoundedForAnswer(
      url,
      '',
      { authorization: `Bearer ${jwt}`, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', 'user-agent': 'synctide' },
      { timeoutMs: policy.timeoutMs, maxBodyBytes: policy.maxResponseBytes, allowPrivate: policy.allowPrivate, ...(signal && { signal }) },
    );
  } catch (err) {
    if (err instanceof Error && err.name === 'AbortError') throw err;
    // Kept as the cause: GitHub (Enterprise) answering so answers so every time.
    if (err instanceof MalformedAnswer) throw new MintFailed(`the installation token request to '${new URL(url).hostname}' was answered, but ${err.message}`, { cause: err });
    if (err instanceof CertificateRefused) throw new MintFailed(`the installation token request failed: ${err.message}`, { cause: err });
    throw new MintFailed(`the installation token request failed: ${err instanceof Error ? err.message : String(err)}`);
  }
  return { answer, jwt };
}

/** GitHub's clock when it answered: its answer's `Date` (an HTTP-date, whole seconds), or undefined without a readable one. */
const githubTime = (answer: BoundedAnswer): number | undefined => parseHttpDate(answer.headers.get('date')?.trim() ?? '', Date.now());

/**
 * GitHub's time `githubMs` (an expiry it stated) on this machine's clock: as far from now as it is
 * from `githubNow` (GitHub's clock when it answered, whole seconds: a second less, so it is never
 * later), or as it is without one. A machine whose clock is behind GitHub's would otherwise keep
 * using a token after it expired, by as much as the clocks are apart.
 */
function onOurClock(githubMs: number, githubNow: number | undefined): number {
  return githubNow === undefined ? githubMs : Date.now() + (githubMs - githubNow) - 1000;
}

/** The token GitHub's `answer` to a token request holds, or the error it is. */
function mintedOf(app: GitHubAppInstallation, answer: BoundedAnswer, jwts: string[]): MintedToken {
  // A rate limit first: GitHub answers it with 403 too, and it says nothing about the credential.
  const limited = rateLimitWait(answer.status, answer.headers, answer.body);
  if (limited) {
    const wait = limited.seconds === undefined ? '' : `, retry after ${limited.seconds}s`;
    throw new MintRateLimited(`GitHub rate-limited the installation token request (${answer.status})${wait}`, limited.seconds);
  }
  if (answer.status === 401 || answer.status === 403 || answer.status === 404) {
    const what = answer.status === 401 ? 'the app JWT (wrong app id or key, or the key was revoked)' : `installation ${app.installationId} (not installed, suspended or not this app's)`;
    throw new InstallationRefused(`GitHub refused ${what}: ${answer.status}`);
  }
  if (answer.status !== 201 && answer.status !== 200) throw new MintFailed(`the installation token request answered ${answer.status}`);
  let body: unknown;
  try {
    body = JSON.parse(answer.body.toString('utf8'));
  } catch {
    throw new MintFailed('the installation token answer is not JSON');
  }
  const { token, expires_at } = (body ?? {}) as { token?: unknown; expires_at?: unknown };
  if (typeof token !== 'string' || token.length < 20 || typeof expires_at !== 'string' || Number.isNaN(Date.parse(expires_at))) {
    throw new MintFailed('the installation token answer has no token or expiry');
  }
  return { token, expires_at: new Date(onOurClock(Date.parse(expires_at), githubTime(answer))).toISOString(), obtained_at: new Date().toISOString(), jwts };
}
