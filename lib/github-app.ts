// GitHub App installation tokens. The app's JWT (RS256, `iss` the app id, ten minutes at most) is
// made by `universal-github-app-jwt` (WebCrypto, no dependencies; it takes GitHub's PKCS#1 keys as
// they are downloaded); the token request goes through `postBoundedForAnswer` (lib/outbound.ts):
// bounded in time and size, its resolved address checked unless the deployment allows private
// ones (PROVIDER_ALLOW_PRIVATE, for test servers). Errors name GitHub's status, never the key,
// the JWT or a token.
import githubAppJwt from 'universal-github-app-jwt';
import { postBoundedForAnswer } from './outbound';

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

/** A minted installation token and its expiry (ISO), and the JWT it was minted with (a secret too). */
export interface MintedToken {
  token: string;
  expires_at: string;
  jwt: string;
}

/** GitHub refused the app or the installation (401, 403, 404): the credential itself is wrong or revoked. */
export class InstallationRefused extends Error {
  override name = 'InstallationRefused';
}

/** Any other failed mint (network, 5xx, an unusable answer): it may succeed later. */
export class MintFailed extends Error {
  override name = 'MintFailed';
}

/** Mints an installation token: `POST {apiBase}/app/installations/{id}/access_tokens` with the app's JWT. */
export async function mintInstallationToken(app: GitHubAppInstallation, policy: MintPolicy, signal?: AbortSignal): Promise<MintedToken> {
  let jwt: string;
  try {
    ({ token: jwt } = await githubAppJwt({ id: app.appId, privateKey: app.privateKey }));
  } catch {
    // The library's message may quote the key's first bytes.
    throw new InstallationRefused('the GitHub App private key is not a usable RSA key (PEM, PKCS#1 or PKCS#8)');
  }
  const url = `${app.apiBase}/app/installations/${encodeURIComponent(String(app.installationId))}/access_tokens`;
  let answer;
  try {
    answer = await postBoundedForAnswer(
      url,
      '',
      { authorization: `Bearer ${jwt}`, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', 'user-agent': 'synctide' },
      { timeoutMs: policy.timeoutMs, maxBodyBytes: policy.maxResponseBytes, allowPrivate: policy.allowPrivate, ...(signal && { signal }) },
    );
  } catch (err) {
    if (err instanceof Error && err.name === 'AbortError') throw err;
    throw new MintFailed(`the installation token request failed: ${err instanceof Error ? err.message : String(err)}`);
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
  return { token, expires_at: new Date(Date.parse(expires_at)).toISOString(), jwt };
}
