// GitHub App credentials: what a `github_app` credential holds once opened and when its cached
// installation token is minted again. Pure: no I/O.

/**
 * An installation token within this many seconds of its expiry is minted again before use (GitHub
 * gives them one hour): a page's requests must not meet the expiry in flight. A token living less
 * than twice this is minted again at half its lifetime instead (`installationTokenMarginSeconds`).
 */
export const INSTALLATION_TOKEN_MARGIN_SECONDS = 300;

/** An opened `github_app` credential (the plaintext of its envelope). */
export interface GitHubAppSecret {
  kind: 'github_app';
  /** The app's id (a number) or client id (`Iv…`): the `iss` of the app's JWT. */
  app_id: number | string;
  installation_id: number;
  /** The app's private key, PEM (PKCS#1 as GitHub issues it, or PKCS#8). */
  private_key: string;
  /** The cached installation token, null until one was minted. */
  token: string | null;
  /** ISO time the cached token expires, null with no token. */
  expires_at: string | null;
  /**
   * ISO time the cached token was minted (its lifetime is `expires_at` minus this); null with no
   * token, or in an envelope written before it was recorded.
   */
  obtained_at: string | null;
}

/** The `github_app` credential `opened` holds, or null when it is of another kind. */
export function githubAppSecretOf(opened: Record<string, unknown> | null): GitHubAppSecret | null {
  if (!opened || opened.kind !== 'github_app') return null;
  const { app_id, installation_id, private_key } = opened;
  if ((typeof app_id !== 'number' && typeof app_id !== 'string') || typeof installation_id !== 'number' || typeof private_key !== 'string') return null;
  const token = typeof opened.token === 'string' ? opened.token : null;
  return {
    kind: 'github_app',
    app_id,
    installation_id,
    private_key,
    token,
    expires_at: token && typeof opened.expires_at === 'string' ? opened.expires_at : null,
    obtained_at: token && typeof opened.obtained_at === 'string' ? opened.obtained_at : null,
  };
}

/**
 * The margin of a cached installation token: INSTALLATION_TOKEN_MARGIN_SECONDS, or half its
 * lifetime (expiry minus when it was minted) when that is shorter, so a token that arrives with
 * less than twice the margin left (a GitHub giving shorter lives, an expiry read across clocks
 * apart) is used for half of what it has instead of being due the moment it arrives, which minted
 * one more before every request. A token whose lifetime is unknown (an envelope written before
 * `obtained_at` was recorded, or a time that does not parse) keeps the fixed margin.
 */
export function installationTokenMarginSeconds(secret: { expires_at: string | null; obtained_at?: string | null | undefined }): number {
  if (!secret.expires_at || !secret.obtained_at) return INSTALLATION_TOKEN_MARGIN_SECONDS;
  const lifetimeMs = Date.parse(secret.expires_at) - Date.parse(secret.obtained_at);
  if (Number.isNaN(lifetimeMs)) return INSTALLATION_TOKEN_MARGIN_SECONDS;
  return Math.max(0, Math.min(INSTALLATION_TOKEN_MARGIN_SECONDS, lifetimeMs / 2000));
}

/** Whether `secret` needs a new installation token at `nowMs`: none cached, or the cached one within its margin (`installationTokenMarginSeconds`). */
export function installationTokenDue(
  secret: Pick<GitHubAppSecret, 'token' | 'expires_at'> & { obtained_at?: string | null | undefined },
  nowMs: number,
  marginSeconds = installationTokenMarginSeconds(secret),
): boolean {
  if (secret.token === null || secret.expires_at === null) return true;
  const at = Date.parse(secret.expires_at);
  return Number.isNaN(at) || at - nowMs <= marginSeconds * 1000;
}

/** Whether `a` and `b` are the same installation of the same app with the same key (a cache entry of one may stand for the other). */
export function sameInstallation(a: GitHubAppSecret, b: GitHubAppSecret): boolean {
  return String(a.app_id) === String(b.app_id) && a.installation_id === b.installation_id && a.private_key === b.private_key;
}
