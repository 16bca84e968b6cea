// The credential seam between the activities that call a provider and the connectors: a connector
// is handed "the current credential" (`{token}` for an OAuth 2 access token, or the stored static
// credentials as they are) and never learns how it was obtained.
//
// OAuth 2 rules:
// - A token within its refresh margin (policy/oauth.ts: 300 s, or half the token's lifetime when
//   shorter; the envelope records when the token was obtained) is refreshed before use, by exactly
//   one worker, and no database connection is held while the token endpoint answers
//   (`renewWithLease`): a short transaction under the credential's refresh lock
//   (`lockCredentialRefresh`) re-reads the stored credential and claims a renewal lease only when
//   it is still due (another worker's fresh token is used as it is); workers that find a live
//   lease wait for its stored result; a lease past its expiry (a dead worker's) is taken over.
//   A grant without a refresh token cannot be renewed: its access token is used until it expires
//   (`renewalDue`), and only then is the connection marked `needs_reauth`.
// - The answer (new access token, and the rotated refresh token when the provider sent one) is
//   sealed into one envelope and written with one compare-and-set statement: access and refresh
//   token are replaced together or not at all, so a crash cannot keep a used refresh token
//   without its successor, nor overwrite credentials a PATCH stored meanwhile. A store the
//   database fails (no connection to be had for a moment, a restart) is tried again, with backoff,
//   for as long as a lease lasts (`storePersistently`): the answer exists only in this process.
// - A 401 from the provider refreshes once and retries the request once; a second 401 fails.
// - A static credential (a token given whole) refused with a 401 fails the run for good, unless the
//   connection holds other credentials now (new ones given since the run opened them): then the
//   run is tried again with them.
// - The grant is its own row (`oauth_grants`), which connections of one tenant may share: the
//   refresh, its lease and its stored result are the grant's, so one refresh serves every
//   connection of the grant.
// - `invalid_grant` marks every connection of the grant `needs_reauth`, and for each opens a
//   `connection_credentials_invalid` alert and writes a `connection.credentials_invalid` webhook
//   event, in the same transaction; the task then fails with `CredentialsInvalid` (permanent,
//   counted toward no breaker). A refusal of credentials replaced while the endpoint answered, or
//   answered to an OAuth app client (endpoint, id, secret) changed meanwhile, marks nothing: the
//   task is tried again with what is stored now.
// - A refresh spends the stored refresh token. A worker whose lease ended before it stored its
//   answer (it waited that long for a database connection) still stores it, and another worker
//   that took the lease over meanwhile was refused the spent token (`invalid_grant`): that refusal
//   was of a grant that lives on, so the store gives the connections it marked their status before
//   it back (active, or paused) and resolves their alerts. A refusal, a store and a connect flow
//   replacing a grant's tokens take the credential's refresh lock, so whichever comes second sees
//   the other. The run refused under a lease it took over fails as retryable (its retry finds the
//   connections active again, or still refused and fails as `CredentialsInvalid`).
//
// Cached-token rules: a `github_app` credential (app id, private key, installation id: the token
// is an installation token minted from the app's JWT) and an `oauth2_client_credentials` one (token
// endpoint, client id and secret, scopes: the token comes from the client credentials grant).
// - The connector is handed the token (`{token}`). A new one is obtained when none is cached or
//   the cached one is within its margin (policy/github-app.ts, policy/oauth.ts), under the same
//   lease and re-read as a refresh, so one worker obtains one per expiry and the others use it; the
//   token and its expiry are sealed into the credential's envelope with one compare-and-set.
// - A 401 obtains one more (unless another worker's newer token is at hand) and retries once.
// - The provider refusing the credential itself (GitHub 401/403/404 on the mint: key revoked, app
//   uninstalled; `invalid_client` and the like from a token endpoint) marks the connection
//   `needs_reauth` exactly as `invalid_grant` does. GitHub rate-limiting the mint (or a token
//   endpoint answering 429, for a refresh too) refuses nothing: the run fails with `RateLimited` and
//   the wait the provider gave, as a listing's rate limit does.
import { raiseAlert, resolveAlert } from '../db/models/alerts';
import type { PoolClient } from 'pg';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  claimCredentialLease,
  findConnectionGrant,
  findHeldCredential,
  findSyncSource,
  lockCredentialRefresh,
  markGrantNeedsReauth,
  markNeedsReauth,
  releaseCredentialLease,
  resumeRefusedConnections,
  storeRenewedCredentials,
  type CredentialForRefresh,
  type CredentialHolder,
} from '../db/models/connections';
import { insertConnectionEvent } from '../db/models/webhooks';
import { lockOAuthAppForUse } from '../db/models/oauth-apps';
import { withTransaction } from '../db/transaction';
import { Permanent, RateLimited, Transient, Unauthorized, type Connector, type FetchPageInput, type RecheckInput } from '../connectors/types';
import { credentialSecrets, providerUrlProblem } from '../connectors/provider-http';
import { open, openCredentials, sealCredentials } from '../lib/credentials';
import { InstallationRefused, MintRateLimited, mintInstallationToken } from '../lib/github-app';
import { failsEveryTime } from '../lib/outbound';
import { ClientRefused, clientCredentialsToken, GrantRefused, refreshGrant, TokenRequestRateLimited } from '../lib/oauth-client';
import { parseGitHubConfig } from '../connectors/github';
import { githubAppSecretOf, installationTokenDue, sameInstallation, type GitHubAppSecret } from '../policy/github-app';
import { clientCredentialsSecretOf, clientTokenDue, expiryOf, nextSecret, oauth2SecretOf, renewalDue, type ClientCredentialsSecret, type OAuth2Secret } from '../policy/oauth';
import type { ActivityDeps } from './deps';
import { startDeliveriesSoon } from './webhook-deliveries';

/** The provider refused the grant: the connection needs new credentials. Permanent. */
export class CredentialsInvalid extends Permanent {
  override name = 'CredentialsInvalid';
}

/**
 * What a credential provider uses. Its waits (for another worker's renewal, up to twice a lease;
 * storing a renewal while the database is not to be had, up to a lease) may outlast an activity's
 * heartbeat timeout: the activities calling it heartbeat while they work (`heartbeatingWhile`).
 */
type Deps = Pick<ActivityDeps, 'pool' | 'credentials' | 'providers' | 'logger' | 'temporal' | 'taskQueue'>;

/** Where a connector's credential comes from, for one activity run. */
export interface CredentialProvider {
  /** The credential to send now; an OAuth 2 token within its margin is refreshed first. */
  current(): Promise<Record<string, unknown> | null>;
  /**
   * After the provider refused `used` (401): a renewed credential to retry with once, or null when
   * none can be had (a static token).
   */
  renewed(used: Record<string, unknown> | null): Promise<Record<string, unknown> | null>;
  /** What the shared rate budget is keyed by: stable across refreshes of one grant. */
  budgetKey: Record<string, unknown> | null;
  /** Every credential value this run opened or obtained (refreshed tokens too): what errors are redacted with. */
  secrets(): string[];
}

/**
 * Whether a token request failed on what its endpoint gives every time (`failsEveryTime`, the
 * cause of the token client's error): an answer Node's HTTP parser refuses (a header section past
 * its limit, malformed HTTP) or a TLS certificate refused (expired, self-signed, untrusted, for
 * another host name). Such a failure is `Permanent`, as the connectors' own requests fail on it:
 * retried, it only spends the job's retries. It is no refusal of the credential (the connection is
 * not marked `needs_reauth`).
 */
const answersSoEveryTime = (err: unknown): boolean => err instanceof Error && failsEveryTime(err.cause);

/** What the connector sees of an OAuth 2 credential. */
const presented = (secret: OAuth2Secret) => ({ token: secret.access_token });

/**
 * The credential provider of connection `connectionId`, whose credentials were read (sealed) as
 * `stored`: its own, or those of its OAuth 2 grant `grantId` (sealed bound to the grant's id), and
 * its config as read with them (`config`: where a GitHub App installation lives, which its rate
 * budget is keyed by). Opens them here, in the activity that calls the provider.
 */
export function credentialProvider(
  deps: Deps,
  connectionId: string,
  stored: unknown,
  grantId: string | null = null,
  config: Record<string, unknown> | null = null,
): CredentialProvider {
  const holder: CredentialHolder = grantId ? { table: 'oauth_grants', id: grantId } : { table: 'connections', id: connectionId };
  const opened = openCredentials(deps.credentials, holder.id, stored);
  const app = githubAppSecretOf(opened);
  if (app) return cachedTokenProvider(deps, connectionId, config, app, GITHUB_APP);
  const client = clientCredentialsSecretOf(opened);
  if (client) return cachedTokenProvider(deps, connectionId, config, client, CLIENT_CREDENTIALS);
  let secret = oauth2SecretOf(opened);
  if (!secret) {
    return {
      current: async () => opened,
      async renewed() {
        // Refused with credentials the connection no longer holds (new ones were given while this
        // run used them): the run is tried again with them as stored now, not failed for good.
        if (await replacedSince(deps, connectionId, opened)) throw new Transient(STATIC_REPLACED);
        return null;
      },
      budgetKey: opened,
      secrets: () => credentialSecrets(opened),
    };
  }
  // The token values this run held (the opened grant and each refresh): the secrets of an oauth2
  // credential are its tokens, not its kind, expiry or scope names.
  const tokens = (held: OAuth2Secret) => [held.access_token, held.refresh_token];
  const seen: (string | null)[] = tokens(secret);
  const refresh = async (held: OAuth2Secret, force: boolean): Promise<OAuth2Secret> => {
    const outcome = await refreshWithLease(deps, connectionId, holder, held, force);
    if ('invalid' in outcome) {
      startDeliveriesSoon(deps, outcome.deliveries);
      throw refusedError(outcome);
    }
    seen.push(...tokens(outcome.secret));
    return outcome.secret;
  };
  return {
    budgetKey: { oauth2_grant: holder.id },
    secrets: () => credentialSecrets({ tokens: seen.filter((token): token is string => token !== null) }),
    async current() {
      if (renewalDue(secret!, Date.now())) secret = await refresh(secret!, false);
      return presented(secret!);
    },
    async renewed(used) {
      // Refused with a token this run replaced meanwhile: the newer one, without another refresh.
      if (used?.token !== secret!.access_token) return presented(secret!);
      secret = await refresh(secret!, true);
      return presented(secret);
    },
  };
}

/** Why a run refused with credentials replaced while it used them is tried again. */
const STATIC_REPLACED = "the provider refused the credentials this run used, and the connection's credentials changed since it opened them; trying again with them as stored now";

/**
 * Whether connection `connectionId` holds credentials other than `opened` now (given through the
 * API since a run opened them): another grant, or other values (a key rotation re-seals the same
 * values, which is no change).
 */
async function replacedSince(deps: Pick<ActivityDeps, 'pool' | 'credentials'>, connectionId: string, opened: Record<string, unknown> | null): Promise<boolean> {
  const now = await findSyncSource(deps.pool, connectionId);
  if (!now) return false;
  if (now.oauth_grant_id !== null) return true;
  try {
    return JSON.stringify(openCredentials(deps.credentials, connectionId, now.credentials)) !== JSON.stringify(opened);
  } catch {
    return false;
  }
}

/**
 * The provider refused the credential itself: the connection needs new credentials. `oauthAppId`:
 * the refusal was of that OAuth app's own client credentials (its secret revoked or rotated at the
 * provider), not of the grant: a new client secret for the app ends it (see `updateOAuthApp`).
 */
class Refusal extends Error {
  constructor(message: string, readonly oauthAppId?: string) {
    super(message);
  }
}

/**
 * A refusal: its reason and the webhook deliveries it wrote. `replaced`: the refused credential is
 * no longer the connection's (new credentials arrived while the provider answered), so the run is
 * tried again with the new ones instead of failing as `CredentialsInvalid`.
 */
type Refused = { invalid: string; deliveries: string[]; replaced?: boolean; label?: string; takenOver?: boolean };

/** Why a run that renewed (or was refused) credentials replaced meanwhile is tried again. */
const REPLACED = (label = 'credentials') => `${label}: the credentials were replaced while they were renewed; trying again with the new ones`;

/**
 * The failure of a run refused a refresh token under a lease it took over: retryable, since the
 * worker whose lease ended may store the token's successor yet (which makes the connections active
 * again); a retry that finds them still refused fails as `CredentialsInvalid`.
 */
const refusedError = (outcome: Refused): Error =>
  outcome.replaced
    ? new Transient(REPLACED(outcome.label))
    : outcome.takenOver
      ? new Transient(`${outcome.invalid} (refused under a renewal lease taken over from a worker that had not stored its answer: trying again)`)
      : new CredentialsInvalid(outcome.invalid);
type RefreshOutcome = { secret: OAuth2Secret } | Refused;

/**
 * The provider refused the credential `row` holds: marks the connection `needs_reauth` (unless new
 * credentials arrived meanwhile), opens its alert and writes the `connection.credentials_invalid`
 * event, in the caller's transaction. A refusal of OAuth app `refusedApp`'s client names the app in
 * the alert's context (`oauth_app_id`), which a new client secret for the app looks for.
 */
async function refuseCredentials(
  deps: Pick<ActivityDeps, 'logger'>,
  tx: PoolClient,
  holder: CredentialHolder,
  row: CredentialForRefresh,
  reason: string,
  refusedApp?: string,
): Promise<Refused> {
  const at = new Date();
  // A grant's refusal is every one of its connections'; a connection's own credential is its own.
  const marked =
    holder.table === 'oauth_grants'
      ? await markGrantNeedsReauth(tx, holder.id, row.credentials)
      : (await markNeedsReauth(tx, holder.id, row.credentials)) ? [{ id: holder.id, provider_slug: row.provider_slug }] : [];
  const deliveries: string[] = [];
  for (const connection of marked) {
    const context = { connection_id: connection.id, provider_slug: connection.provider_slug, reason, at: at.toISOString() };
    await raiseAlert(tx, 'connection_credentials_invalid', connection.id, refusedApp ? { ...context, oauth_app_id: refusedApp } : context, { replace: true });
    deliveries.push(...(await insertConnectionEvent(tx, { type: 'connection.credentials_invalid', connectionId: connection.id, data: context }, at)));
    deps.logger.warn({ connection_id: connection.id, provider_slug: connection.provider_slug, kind: row.credential_kind }, 'credentials refused by the provider: connection needs reauthorization');
  }
  return { invalid: reason, deliveries };
}

/**
 * The refresh of an OAuth 2 grant, through `renewWithLease` (see the module comment). `force`
 * refreshes a token that is not yet due (the provider refused it) unless another worker already
 * replaced it.
 */
async function refreshWithLease(
  deps: Pick<Deps, 'pool' | 'credentials' | 'providers' | 'logger'>,
  connectionId: string,
  holder: CredentialHolder,
  held: OAuth2Secret,
  force: boolean,
): Promise<RefreshOutcome> {
  return renewWithLease<OAuth2Secret>(deps, connectionId, holder, {
    label: 'oauth2',
    parse(row) {
      const latest = oauth2SecretOf(openCredentials(deps.credentials, holder.id, row.credentials));
      if (!latest || row.credential_kind !== 'oauth2' || !row.oauth_app_id || !row.client_secret || !row.client_id || !row.token_url) return null;
      return latest;
    },
    gone: "oauth2: the connection's credentials changed while this run used them (it holds that OAuth 2 grant no more); trying again with them as stored now",
    needsReauth: 'oauth2: the connection needs new credentials (its grant was refused); reconnect it or PATCH its credentials',
    due: (latest) => renewalDue(latest, Date.now()) || (force && latest.access_token === held.access_token),
    async obtain(latest, row) {
      if (!latest.refresh_token) throw new Refusal('the access token expired and the grant has no refresh token; reconnect the connection');
      // The token endpoint is aimed by the tenant: an allowed provider host, like a base_url (an app
      // stored before the rule, or before PROVIDER_HOSTS changed, fails here until it is PATCHed).
      const problem = providerUrlProblem(row.token_url!, deps.providers);
      if (problem) throw new Permanent(`oauth2: the OAuth app's token_url: ${problem}; PATCH the OAuth app`);
      const clientSecret = open(deps.credentials, { table: 'oauth_apps', id: row.oauth_app_id! }, row.client_secret!);
      try {
        const answer = await refreshGrant(
          { clientId: row.client_id!, clientSecret, tokenUrl: row.token_url! },
          latest.refresh_token,
          { allowPrivate: deps.providers.allowPrivate, timeoutMs: deps.providers.timeoutMs, maxResponseBytes: deps.providers.maxResponseBytes },
        );
        deps.logger.info({ connection_id: connectionId, ...(holder.table === 'oauth_grants' ? { grant_id: holder.id } : {}), rotated: answer.refresh_token !== undefined }, 'oauth2 access token refreshed');
        return nextSecret(latest, answer, Date.now());
      } catch (err) {
        if (err instanceof ClientRefused) throw new Refusal(err.message, row.oauth_app_id!);
        if (err instanceof GrantRefused) throw new Refusal(`${err.message}; reconnect the connection or PATCH its credentials`);
        if (err instanceof TokenRequestRateLimited) throw new RateLimited(`oauth2: refreshing the access token: ${err.message}`, err.retryAfterSeconds);
        if (answersSoEveryTime(err)) throw new Permanent(`oauth2: refreshing the access token failed: ${(err as Error).message}`);
        throw new Transient(`oauth2: refreshing the access token failed: ${(err as Error).message}`);
      }
    },
    // The same grant: its refresh token unchanged (a key rotation re-sealed it meanwhile).
    same: (a, b) => a.refresh_token === b.refresh_token,
    // The same client: the OAuth app's endpoint, client id and client secret (opened: a key rotation
    // re-seals it) as the refresh sent them.
    sameClient(now, then) {
      if (now.oauth_app_id !== then.oauth_app_id || now.token_url !== then.token_url || now.client_id !== then.client_id) return false;
      if (now.client_secret === then.client_secret) return true;
      const slot = { table: 'oauth_apps', id: then.oauth_app_id! } as const;
      return open(deps.credentials, slot, now.client_secret!) === open(deps.credentials, slot, then.client_secret!);
    },
    spends: true,
  });
}

/** How a renewal leased across workers reads, judges, renews and compares one credential kind. */
interface LeasedRenewal<S> {
  label: string;
  /** The stored credential of `row` when it still is of this kind (else the renewal is `gone`). */
  parse(row: CredentialForRefresh): S | null;
  /** Why a run whose credential is gone (the connection's credentials changed) is tried again. */
  gone: string;
  needsReauth: string;
  /** Whether `latest` (as stored now) must be renewed; else it is used as it is. */
  due(latest: S): boolean;
  /**
   * The renewed credential, from the provider: throws `Refusal` (reason) when the provider refuses
   * the credential itself, `Permanent` when it cannot be asked, any other error as transient.
   */
  obtain(latest: S, row: CredentialForRefresh): Promise<S>;
  /** Whether `a` and `b` are the same credential (a renewal of one may be stored over the other). */
  same(a: S, b: S): boolean;
  /**
   * Whether the client the renewal authenticated as (`then`: an OAuth app's endpoint, id and secret,
   * read when the lease was claimed) is still the one stored (`now`). A refusal answered to a client
   * changed meanwhile (a PATCH of the OAuth app while the endpoint answered) is of a client no
   * longer used: nothing is refused, and the run is tried again with the new one. Absent: the
   * client is part of the credential (`same` judges it).
   */
  sameClient?(now: CredentialForRefresh, then: CredentialForRefresh): boolean;
  /**
   * Whether a renewal spends the stored credential (a refresh token): a refusal of it that another
   * worker got while this renewal was under way was of the token this one spent, and is undone
   * when this renewal is stored.
   */
  spends?: boolean;
}

/**
 * How long a renewal lease lasts: the provider's whole answer time and a margin, so the lease of a
 * live worker never ends while its request is under way; a dead worker's lease ends by itself.
 */
const leaseMsOf = (deps: Pick<ActivityDeps, 'providers'>) => deps.providers.timeoutMs + 10_000;

/** The first pause of a worker waiting for another worker's renewal, and the longest. */
const WAIT_FIRST_MS = 50;
const WAIT_MAX_MS = 1_000;

/**
 * Renews the credential of connection `connectionId` once across every worker, never holding a
 * database connection while the provider answers:
 * 1. a short transaction under `lockCredentialRefresh` re-reads the stored credential; a fresh one
 *    (another worker's renewal) is used as it is; a live lease of another worker means waiting
 *    (re-reading with backoff, bounded: twice the lease) for its stored result; else the lease is
 *    claimed (a lease past its expiry too: its worker died) and the transaction commits;
 * 2. the provider is asked with no connection held;
 * 3. a short compare-and-set stores the answer sealed and ends the lease: only over the credential
 *    that was renewed (or, re-sealed by a key rotation meanwhile, the same one); new credentials a
 *    PATCH stored meanwhile win. The old credential stays stored until then, so a crash before the
 *    store loses nothing that was stored; a refusal marks the connection `needs_reauth`.
 */
async function renewWithLease<S>(
  deps: Pick<Deps, 'pool' | 'credentials' | 'providers' | 'logger'>,
  connectionId: string,
  holder: CredentialHolder,
  kind: LeasedRenewal<S>,
): Promise<{ secret: S } | Refused> {
  const leaseMs = leaseMsOf(deps);
  const waitUntil = Date.now() + 2 * leaseMs;
  let pause = WAIT_FIRST_MS;
  let waited = false;
  for (;;) {
    type Step = { done: { secret: S } | Refused } | { wait: true } | { claimed: { row: CredentialForRefresh; latest: S; lease: string; takenOver: boolean } };
    const step = await withTransaction(deps.pool, async (tx): Promise<Step> => {
      await lockCredentialRefresh(tx, holder.id);
      const row = await findHeldCredential(tx, holder);
      const latest = row ? kind.parse(row) : null;
      // Gone or of another kind: the connection's credentials changed since this run opened them
      // (a PATCH, or a connect flow). The run is tried again with them as stored now.
      if (!row || !latest) throw new Transient(kind.gone);
      // Refused already: not asked again. Every connection of a refused credential needs
      // reauthorization, so one that was not marked with the others (disabled then, resumed since)
      // is marked now, with its alert and event.
      if (row.status === 'needs_reauth') return { done: await refuseCredentials(deps, tx, holder, row, kind.needsReauth) };
      if (!kind.due(latest)) return { done: { secret: latest } };
      if (row.lease_live) return { wait: true };
      const lease = randomUUID();
      if (!(await claimCredentialLease(tx, holder, lease, leaseMs))) return { wait: true };
      // A lease recorded but not live: its worker died, or has not stored its answer yet.
      return { claimed: { row, latest, lease, takenOver: row.lease_left } };
    });
    if ('done' in step) return step.done;
    if ('wait' in step) {
      if (Date.now() > waitUntil) throw new Transient(`${kind.label}: another worker has been renewing the credential for too long; trying again later`);
      if (!waited) deps.logger.info({ connection_id: connectionId, ...(holder.table === 'oauth_grants' ? { grant_id: holder.id } : {}), kind: kind.label }, 'waiting for the credential renewal of another worker');
      waited = true;
      await sleep(pause);
      pause = Math.min(pause * 2, WAIT_MAX_MS);
      continue;
    }
    return storeRenewal(deps, connectionId, holder, kind, step.claimed);
  }
}

/** The first pause before storing a renewed credential again after the database failed the store. */
const STORE_AGAIN_FIRST_MS = 100;

/**
 * Runs `store` (the transaction that stores a credential the provider has answered) until it
 * succeeds, pausing between tries (doubling to WAIT_MAX_MS), for as long as a renewal lease lasts;
 * then its last error is thrown. The answer exists only in this process, and the provider may have
 * spent the refresh token it replaced: a database connection that is not to be had for a moment
 * (a busy pool, a restart) must not throw the grant away.
 */
async function storePersistently<T>(deps: Pick<Deps, 'providers' | 'logger'>, connectionId: string, label: string, store: () => Promise<T>): Promise<T> {
  const until = Date.now() + leaseMsOf(deps);
  for (let pause = STORE_AGAIN_FIRST_MS; ; pause = Math.min(pause * 2, WAIT_MAX_MS)) {
    try {
      return await store();
    } catch (err) {
      if (Date.now() + pause > until) throw err;
      deps.logger.warn({ connection_id: connectionId, kind: label, error: (err as Error).message }, 'storing a renewed credential failed; trying again');
      await sleep(pause);
    }
  }
}

/** Steps 2 and 3 of `renewWithLease`, holding the lease `claimed.lease`. */
async function storeRenewal<S>(
  deps: Pick<Deps, 'pool' | 'credentials' | 'logger' | 'providers'>,
  connectionId: string,
  holder: CredentialHolder,
  kind: LeasedRenewal<S>,
  { row, latest, lease, takenOver }: { row: CredentialForRefresh; latest: S; lease: string; takenOver: boolean },
): Promise<{ secret: S } | Refused> {
  let next: S;
  try {
    next = await kind.obtain(latest, row);
  } catch (err) {
    if (err instanceof Refusal) {
      const reason = `${kind.label}: ${err.message}`;
      return withTransaction(deps.pool, async (tx) => {
        // After any store of a renewal that ended meanwhile (it undoes a refusal of what it spent).
        await lockCredentialRefresh(tx, holder.id);
        // Ordered with a change of the OAuth app's client (which ends refusals of the old one): it
        // committed first, and the client is seen changed below, or it waits for this commit.
        if (row.oauth_app_id) await lockOAuthAppForUse(tx, row.oauth_app_id);
        // The refusal is of the credential that was renewed, asked for by the client that asked:
        // while the holder still has it (or, re-sealed by a key rotation, the same one) and its
        // OAuth app still that client, its connections need reauthorization; the connection of
        // this run needs it only while it still uses that holder. New credentials, or a new client
        // secret, that arrived meanwhile are not refused: the run is tried again with them.
        const now = await findHeldCredential(tx, holder);
        const still = now ? kind.parse(now) : null;
        const held =
          now !== null && still !== null &&
          (JSON.stringify(now.credentials) === JSON.stringify(row.credentials) || kind.same(still, latest)) &&
          (kind.sameClient?.(now, row) ?? true);
        const refused: Refused = held ? await refuseCredentials(deps, tx, holder, { ...row, credentials: now.credentials }, reason, err.oauthAppId) : { invalid: reason, deliveries: [] };
        await releaseCredentialLease(tx, holder, lease);
        const ours = holder.table === 'connections' ? held : held && (await findConnectionGrant(tx, connectionId))?.oauth_grant_id === holder.id;
        if (!ours) return { ...refused, replaced: true, label: kind.label };
        // A spent credential refused under a lease taken over: the worker that spent it may store its successor yet.
        return takenOver && kind.spends ? { ...refused, takenOver: true } : refused;
      });
    }
    // Best effort: an unreleased lease ends by itself.
    await releaseCredentialLease(deps.pool, holder, lease).catch(() => undefined);
    throw err;
  }
  const sealed = sealCredentials(deps.credentials, holder.id, { ...next } as unknown as Record<string, unknown>)!;
  const stored = await storePersistently(deps, connectionId, kind.label, () => withTransaction(deps.pool, async (tx) => {
    // Ordered with a refusal of the same credential (see the module comment).
    await lockCredentialRefresh(tx, holder.id);
    const store = async () => {
      if (await storeRenewedCredentials(tx, holder, row.credentials, sealed, lease)) return true;
      // Changed meanwhile: re-sealed by a key rotation (the same credential: store over it, the old
      // refresh token is spent), or replaced by new credentials (they win).
      const now = await findHeldCredential(tx, holder);
      const same = now ? kind.parse(now) : null;
      return !!now && !!same && kind.same(same, latest) && (await storeRenewedCredentials(tx, holder, now.credentials, sealed, lease));
    };
    if (!(await store())) {
      await releaseCredentialLease(tx, holder, lease);
      return false;
    }
    if (kind.spends) {
      // Any refusal of the credential this renewal replaced was of the token it spent.
      const resumed = await resumeRefusedConnections(tx, holder);
      for (const id of resumed) await resolveAlert(tx, 'connection_credentials_invalid', id, new Date());
      if (resumed.length > 0) deps.logger.warn({ connection_ids: resumed, kind: kind.label }, 'a refusal of the credential this renewal spent is undone: connections back to their status before it');
    }
    return true;
  }));
  if (!stored) throw new Transient(REPLACED(kind.label));
  return { secret: next };
}

/** A credential whose token the platform obtains itself and caches (sealed) in its envelope. */
interface CachedToken {
  token: string | null;
  expires_at: string | null;
}

/** A token just obtained: its expiry and, when the kind records it, when it was obtained (its lifetime judges its margin). */
interface ObtainedToken {
  token: string;
  expires_at: string | null;
  obtained_at?: string;
  secrets: string[];
}

/** How one kind of cached-token credential is read, judged and renewed. */
interface CachedTokenKind<S extends CachedToken> {
  /** Names the kind in messages and logs. */
  label: string;
  parse(opened: Record<string, unknown> | null): S | null;
  /** Whether a new token is needed at `nowMs` (none cached, or within its margin). */
  due(secret: S, nowMs: number): boolean;
  /**
   * Obtains a new token for `latest`: throws `Refusal` when the provider refuses the credential,
   * `RateLimited` when it rate-limits the token request.
   */
  obtain(deps: Deps, latest: S, row: CredentialForRefresh): Promise<ObtainedToken>;
  /** Whether `a` and `b` are the same credential (a token of one may be stored over the other). */
  same(a: S, b: S): boolean;
  /** What the credential's shared rate budget is keyed by, for a connection of `config`. */
  budgetKey(secret: S, config: Record<string, unknown> | null): Record<string, unknown>;
  /** The long-lived secrets of the credential (key, client secret). */
  secrets(secret: S): string[];
  /** What to do about a refused credential, appended to the reason. */
  remedy: string;
  /** The log message of a token obtained. */
  obtained: string;
}

const GITHUB_APP: CachedTokenKind<GitHubAppSecret> = {
  label: 'github_app',
  parse: githubAppSecretOf,
  due: installationTokenDue,
  async obtain(deps, latest, row) {
    // The JWT goes only to the connection's own GitHub, an allowed provider host.
    const apiBase = parseGitHubConfig(row.config ?? {}).base_url;
    const problem = providerUrlProblem(apiBase, deps.providers);
    if (problem) throw new Permanent(`github_app: base_url ${problem}`);
    try {
      const minted = await mintInstallationToken(
        { appId: latest.app_id, installationId: latest.installation_id, privateKey: latest.private_key, apiBase },
        { allowPrivate: deps.providers.allowPrivate, timeoutMs: deps.providers.timeoutMs, maxResponseBytes: deps.providers.maxResponseBytes },
      );
      return { token: minted.token, expires_at: minted.expires_at, obtained_at: minted.obtained_at, secrets: minted.jwts };
    } catch (err) {
      if (err instanceof InstallationRefused) throw new Refusal(err.message);
      // GitHub's wait, waited out by the job as a listing's rate limit is (durably, no breaker count).
      if (err instanceof MintRateLimited) throw new RateLimited(`github_app: ${err.message}`, err.retryAfterSeconds);
      throw err;
    }
  },
  same: sameInstallation,
  // GitHub limits an installation's requests, whoever holds its tokens; on its own host: another
  // GitHub (Enterprise) numbers its apps and installations from 1 too, and limits them itself.
  budgetKey: (secret, config) => ({ github_app: String(secret.app_id), installation_id: secret.installation_id, api: apiOrigin(config) }),
  secrets: (secret) => [secret.private_key],
  remedy: "PATCH the connection's credentials",
  obtained: 'github_app installation token minted',
};

const CLIENT_CREDENTIALS: CachedTokenKind<ClientCredentialsSecret> = {
  label: 'oauth2 client credentials',
  parse: clientCredentialsSecretOf,
  due: clientTokenDue,
  async obtain(deps, latest) {
    // The token endpoint is aimed by the caller: an allowed provider host, like a base_url.
    const problem = providerUrlProblem(latest.token_url, deps.providers);
    if (problem) throw new Permanent(`oauth2 client credentials: token_url ${problem}`);
    try {
      const answer = await clientCredentialsToken(
        { clientId: latest.client_id, clientSecret: latest.client_secret, tokenUrl: latest.token_url },
        latest.scopes,
        { allowPrivate: deps.providers.allowPrivate, timeoutMs: deps.providers.timeoutMs, maxResponseBytes: deps.providers.maxResponseBytes },
      );
      const at = Date.now();
      const expires_at = expiryOf(at, answer.expires_in);
      return { token: answer.access_token, expires_at, obtained_at: new Date(at).toISOString(), secrets: [] };
    } catch (err) {
      if (err instanceof GrantRefused) throw new Refusal(err.message);
      if (err instanceof TokenRequestRateLimited) throw new RateLimited(`oauth2 client credentials: ${err.message}`, err.retryAfterSeconds);
      throw err;
    }
  },
  same: (a, b) => a.token_url === b.token_url && a.client_id === b.client_id && a.client_secret === b.client_secret && a.scopes.join(' ') === b.scopes.join(' '),
  budgetKey: (secret) => ({ oauth2_client: secret.client_id, token_url: secret.token_url }),
  secrets: (secret) => [secret.client_secret],
  remedy: "PATCH the connection's credentials",
  obtained: 'oauth2 client credentials token obtained',
};

/** The origin of a github config's API (`base_url`), or null when the config is not one (its pass fails on it anyway). */
function apiOrigin(config: Record<string, unknown> | null): string | null {
  try {
    return new URL(parseGitHubConfig(config ?? {}).base_url).origin;
  } catch {
    return null;
  }
}

/** The provider of a cached-token credential (see the module comment) of a connection of `config`. */
function cachedTokenProvider<S extends CachedToken>(deps: Deps, connectionId: string, config: Record<string, unknown> | null, opened: S, kind: CachedTokenKind<S>): CredentialProvider {
  let secret = opened;
  // The long-lived secrets, every token and every signed assertion this run held: what errors are redacted with.
  const seen = new Set<string>([...kind.secrets(opened), ...(opened.token ? [opened.token] : [])]);
  const renew = async (held: S, force: boolean): Promise<S> => {
    const outcome = await renewCachedToken(deps, connectionId, held, force, kind, (more) => more.forEach((s) => seen.add(s)));
    if ('invalid' in outcome) {
      startDeliveriesSoon(deps, outcome.deliveries);
      throw refusedError(outcome);
    }
    if (outcome.secret.token) seen.add(outcome.secret.token);
    return outcome.secret;
  };
  return {
    budgetKey: kind.budgetKey(opened, config),
    secrets: () => credentialSecrets({ tokens: [...seen] }),
    async current() {
      if (kind.due(secret, Date.now())) secret = await renew(secret, false);
      return { token: secret.token! };
    },
    async renewed(used) {
      if (used?.token !== secret.token) return { token: secret.token! };
      secret = await renew(secret, true);
      return { token: secret.token! };
    },
  };
}

/**
 * Obtains a new token through `renewWithLease`: a token another worker stored meanwhile is used
 * while it is fresh, else one is obtained and stored sealed. `force`: the token `held` was
 * refused; obtain one unless another worker already replaced it.
 */
async function renewCachedToken<S extends CachedToken>(
  deps: Deps,
  connectionId: string,
  held: S,
  force: boolean,
  kind: CachedTokenKind<S>,
  onSecrets: (secrets: string[]) => void,
): Promise<{ secret: S } | Refused> {
  return renewWithLease<S>(deps, connectionId, { table: 'connections', id: connectionId }, {
    label: kind.label,
    parse: (row) => kind.parse(openCredentials(deps.credentials, connectionId, row.credentials)),
    gone: `${kind.label}: the connection's credentials changed while this run used them (it holds no such credentials any more); trying again with them as stored now`,
    needsReauth: `${kind.label}: the connection needs new credentials (the provider refused them); ${kind.remedy}`,
    due: (latest) => kind.due(latest, Date.now()) || (force && latest.token === held.token),
    async obtain(latest, row) {
      let obtained;
      try {
        obtained = await kind.obtain(deps, latest, row);
      } catch (err) {
        if (err instanceof Refusal) throw new Refusal(`${err.message}; ${kind.remedy}`);
        if (err instanceof Permanent || err instanceof RateLimited) throw err;
        if (answersSoEveryTime(err)) throw new Permanent(`${kind.label}: obtaining a token failed: ${(err as Error).message}`);
        throw new Transient(`${kind.label}: obtaining a token failed: ${(err as Error).message}`);
      }
      onSecrets([obtained.token, ...obtained.secrets]);
      deps.logger.info({ connection_id: connectionId, kind: kind.label, expires_at: obtained.expires_at }, kind.obtained);
      return { ...latest, token: obtained.token, expires_at: obtained.expires_at, ...(obtained.obtained_at ? { obtained_at: obtained.obtained_at } : {}) };
    },
    same: kind.same,
  });
}

/**
 * `connector` asking `provider` for the credential of every request: each fetchPage and recheck
 * gets the current one, and a 401 (`Unauthorized`) renews it once and retries once.
 */
export function withCurrentCredential(connector: Connector, provider: CredentialProvider): Connector {
  async function call<I extends { credentials: Record<string, unknown> | null }, R>(input: I, run: (input: I) => Promise<R>): Promise<R> {
    const credentials = await provider.current();
    try {
      return await run({ ...input, credentials });
    } catch (err) {
      if (!(err instanceof Unauthorized)) throw err;
      const renewed = await provider.renewed(credentials);
      if (!renewed) throw err;
      return run({ ...input, credentials: renewed });
    }
  }
  const wrapped: Connector = Object.create(connector) as Connector;
  wrapped.fetchPage = (input: FetchPageInput) => call(input, (i) => connector.fetchPage(i));
  if (connector.recheck) {
    const recheck = connector.recheck.bind(connector);
    wrapped.recheck = (input: RecheckInput) => call(input, recheck);
  }
  return wrapped;
}
