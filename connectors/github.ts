// The `github` connector: issues and pull requests of configured repositories, read
// from the real GitHub REST API (or GitHub Enterprise / a test server via `base_url`).
//
// It talks HTTP through `providerGet` (connectors/provider-http.ts: allowed hosts, connect-time
// address checks, same-origin redirects only, byte caps and timeouts) — deliberately NOT Octokit: Octokit's
// retry/throttling plugins (and any client with hidden retries) would retry and sleep on their
// own, while Synctide's central rate-limit policy (activities + workflow) must be in charge of
// every retry. A plain fetch makes exactly one
// request per fetchPage call; every failure is mapped to a typed error and handed back:
// - 401 → Permanent; 404 → Permanent naming the repository; 403 without rate-limit signals →
//   Permanent; other 4xx → Permanent;
// - 403/429 with `Retry-After` (secondary limit) → RateLimited with that hint; 403/429 with
//   `x-ratelimit-remaining: 0` and `x-ratelimit-reset` (primary limit) → RateLimited with
//   reset − now; a 429, or a 403 whose message says "rate limit", without either header →
//   RateLimited (GitHub documents "wait at least one minute" there, so the hint is 60 s);
// - 5xx, network errors, unreadable bodies → Transient; an aborted `signal` → its AbortError.
// A 200 whose `x-ratelimit-remaining` is 0 is a normal page: the next request gets the 403.
//
// Each repository is a partition (connectors/types.ts): its own cursor (`sinceOf`), its records
// name it, and the page that ends it says so. Repositories are fetched one after another: the page
// token is base64url JSON { repo: the repository's 'owner/name', done: the repositories configured
// before it (which the pass read before it), url: the next URL, or null for that repository's first
// page }. A task resumes from its stored token after its connection's config may have changed, so
// the token is checked against the current config (decodePageToken): the pass goes on from it only
// while its repository is configured by that name, every repository configured before it is one
// the pass already read, and its URLs name no other repository; otherwise the pass starts again
// from its first page, so no repository's pages are stored under another's name and none is
// skipped. Tokens written before names were (`repo` a position in `repositories`) are still read:
// the position names the repository, and their URLs must name that one, else the pass starts
// again. Token and Link URLs must share the origin of `base_url`, so the token is never sent
// elsewhere. The token never appears in an error message either: provider text is
// redacted (the exact token and any `Bearer …`/`token …` value) before it is cut to 500 characters.
//
// Issues are read oldest first by keyset: each next page asks `since` = the last item's
// `updated_at` (inclusive; the platform de-duplicates the item served twice), so an issue edited
// mid-pass moves only to pages not yet read and none slides into a page already read. When a whole
// page shares one second, `since` cannot move and the next page is the next page number within
// that second; such a page holds the repository's cursor at that second (`holdCursors`), since an
// edit there can shift the rest. An issue that leaves the second (edited later, deleted, hidden)
// between two such pages shifts the rest back, one onto the page already read, which the next page
// number skips: so each page numbered within a second is followed by the page before it asked again
// with its ETag (a 304 when nothing left), changed served again, walking back while more than a
// page's worth may have left (see `holdsEither`). GitHub's Link header only says whether more pages follow.
// Pulls have no `since`: they are listed newest first (`direction=desc`) following the Link
// header's rel="next" URL exactly as GitHub returns it (often another shape than the first
// request, e.g. /repositories/<id>/pulls?page=2), parsed per RFC 8288; the first pull request older
// than `since` ends that repository's paging; a newest-first pass longer than one page then reads
// the head once more (a catch-up pass down to the newest change its first page showed), because
// items changed while it paged moved to the head, out of the pages ahead. A catch-up of more than
// one page is followed by another, down to the newest change its own first page showed (an item
// changed again while it paged moved behind it in turn), until one takes a single page (or a 304)
// or serves the very items (numbers and change times, in order) the one before it, or the pass,
// served at or after its head; after 5 in a row the task fails as transient (retryLater), its token
// at a new catch-up, deleting nothing (see catchUpAgain). A catch-up's pages are other pages than
// the pass's of the same URLs (`(catch-up pass n)` in their keys); tokens written before catch-ups
// were numbered (`catchup` and `head` alone) read as the first. An item GitHub hides or
// removes while the pass pages moves every later one up a position, one of them onto the page
// already read: so each page after the first is followed by the page before asked again with its
// ETag (a 304 when nothing moved; changed, it is served again); when more than a page's worth was
// hidden at once, so that it no longer reaches back to its oldest item as first read, the pages
// before it are asked again too, walking back until one does (see `bridges`). `until` (exclusive) has
// no parameter on either endpoint: items changed at or after it are dropped; issues are oldest
// first, so there the first such item ends the repository's paging.
//
// Deletion: both listings are consistent (keyset; newest first where a change moves an item only to
// the head, and an item hidden or removed is caught by the page before asked again), and `recheck` GETs a candidate by number:
// 200 alive, 404/410 gone, an item transferred elsewhere or of a repository no longer configured
// gone (an item naming another repository is alive when that is the configured repository renamed,
// as GitHub's answer for the configured name says: asked once a re-check).
//
// Conditional requests: every page's ETag is returned (`validators`) with the page's records, for
// the activity to store in the same transaction, with a note of what follows the page in its
// listing (the next URL, or none; newest first also its oldest and newest change times, and its
// oldest item, which a page asked again after a 304 of it must still reach back to; oldest first
// its first and last items, which such a page within one second must still hold). The next
// incremental pass sends it as If-None-Match for that URL; a 304 skips that page only and goes on
// with the noted next page (ending the repository where the listing ended or, newest first, where
// the page reached `since`). GitHub's ETag covers a page's items, not its Link header, so an oldest-
// first issues page that ended the listing with a whole page of items notes the keyset continuation
// instead (the listing may have grown behind it; see PageNote). Every request goes through `providerGet` (provider-http.ts), the
// connectors' one HTTP path, which asks the shared rate budget first.
import { createHash, createPrivateKey } from 'node:crypto';
import { z } from 'zod';
import { isBareHttpUrl, parseConnectorConfig } from './config-errors';
import { nextLink } from './link-header';
import { redactValues } from '../policy/redact';
import { encodePageToken, pageTokenBody } from './page-token';
import { answeredAtMs } from '../policy/retry-after';
import { GITHUB_RATE_LIMIT_HEADERS, jsonBody, MAX_NEXT_URL_CHARS, parseRetryAfter, providerGet, providerText, rateBudgetConfigSchema, type ProviderResponse } from './provider-http';
import {
  type ConnectorError,
  Permanent,
  RateLimited,
  Transient,
  type Connector,
  type ConnectorRecord,
  type FetchPageInput,
  type FetchPageResult,
  type RecheckInput,
  type RecheckResult,
  sinceOf,
  Unauthorized,
} from './types';

/** The resource types this connector can sync. */
export const GITHUB_RESOURCE_TYPES = ['issues', 'pull_requests'] as const;
/** One of `GITHUB_RESOURCE_TYPES`. */
export type GitHubResourceType = (typeof GITHUB_RESOURCE_TYPES)[number];

const USER_AGENT = 'synctide-github-connector/0.1';
const API_VERSION = '2022-11-28';
/** GitHub: a secondary limit without Retry-After means "wait at least one minute". */
const SECONDARY_LIMIT_DEFAULT_SECONDS = 60;

// ---------------------------------------------------------------------------------------------
// Config and credentials

// Owner and name: GitHub's characters; a name may start with dots (`.github`) but is never only dots.
const REPOSITORY = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*\/\.{0,2}[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;
/** A repository whose owner or name is `.` or `..` would walk the API's paths (`../user`). */
const DOT_SEGMENT = /(^|\/)\.{1,2}(\/|$)/;
/** Most repositories one connection syncs (each costs requests on every run). */
export const MAX_REPOSITORIES = 100;

/** A GitHub token: ghp_…, github_pat_…, gho_/ghu_/ghs_/ghr_…, or a classic 40-hex token. */
const TOKEN_SHAPE = /^[A-Za-z0-9_.-]{20,255}$/;

/** A GitHub App's client id (`Iv1.…`, `Iv23…`), which GitHub takes as the JWT's issuer like the numeric app id. */
const APP_CLIENT_ID = /^Iv[0-9A-Za-z.]{4,60}$/;
/** Largest private key taken (a 4096-bit RSA key in PEM is about 3.3 KB). */
const MAX_PRIVATE_KEY_CHARS = 8000;

/**
 * The github credentials as JSON Schema (for the API's document): `{token}` of TOKEN_SHAPE, or a
 * GitHub App installation whose installation tokens the platform mints and renews.
 */
export const GITHUB_CREDENTIALS_DOC = {
  oneOf: [
    {
      type: 'object',
      title: 'GitHub token',
      properties: { token: { type: 'string', pattern: TOKEN_SHAPE.source, minLength: 20, maxLength: 255, description: "A GitHub token (20–255 letters, digits, '_', '-' or '.')" } },
      required: ['token'],
    },
    {
      type: 'object',
      title: 'GitHub App installation',
      description:
        "A GitHub App installation: an installation token is minted from the app's JWT at `POST {base_url}/app/installations/{installation_id}/access_tokens` before the first request, cached sealed until 5 minutes before its expiry, and minted once across workers. A 401/403/404 from GitHub refusing the app or the installation (key revoked, app uninstalled) makes the connection `needs_reauth`; a rate limit (with GitHub's wait) or a JWT refused for its times (made again on GitHub's clock) does not.",
      properties: {
        kind: { type: 'string', enum: ['github_app'] },
        app_id: { oneOf: [{ type: 'integer', minimum: 1 }, { type: 'string', pattern: APP_CLIENT_ID.source }], description: "The app's id, or its client id (`Iv…`)" },
        installation_id: { type: 'integer', minimum: 1, description: "The installation's id (in the installation's settings URL)" },
        private_key: { type: 'string', maxLength: MAX_PRIVATE_KEY_CHARS, description: "The app's RSA private key, PEM (PKCS#1 as GitHub issues it, or PKCS#8). Sealed at rest; never shown, logged or sent anywhere but into the JWT's signature" },
      },
      required: ['kind', 'app_id', 'installation_id', 'private_key'],
      additionalProperties: false,
    },
  ],
} as const;
const TOKEN_RULE = "must be a GitHub token (20–255 letters, digits, '_', '-' or '.')";

/**
 * The github connection config. Unknown keys are ignored (a connection's config may carry keys
 * meant for other parts of the platform).
 */
export const githubConfigSchema = z.object({
  base_url: z
    .string({ error: 'must be an http(s) URL such as https://api.github.com' })
    .refine(isBareHttpUrl, 'must be an http(s) URL such as https://api.github.com (no user:password@, query or fragment)')
    .meta({
      format: 'uri',
      maxLength: 2048,
      description:
        'An https URL without user:password@, query or fragment (default https://api.github.com). Its host must be in the deployment\'s PROVIDER_HOSTS (GitHub Enterprise hosts are added there); changing its origin drops stored credentials unless the same request gives them again',
    })
    .max(2048, 'must be at most 2048 characters')
    .transform((value) => value.replace(/\/+$/, ''))
    .default('https://api.github.com'),
  repositories: z
    .array(
      z
        .string({ error: "must contain 'owner/name' strings" })
        .max(201, "must contain 'owner/name' strings")
        .refine((repo) => !DOT_SEGMENT.test(repo), "must not contain '.' or '..' as owner or name")
        .regex(REPOSITORY, "must contain 'owner/name' strings"),
      { error: "must be a non-empty array of 'owner/name' strings" },
    )
    .min(1, "must be a non-empty array of 'owner/name' strings")
    .max(MAX_REPOSITORIES, `must hold at most ${MAX_REPOSITORIES} repositories`)
    .refine((repos) => new Set(repos.map((r) => r.toLowerCase())).size === repos.length, 'must not contain duplicates')
    .meta({ uniqueItems: true, description: "'owner/name' of each repository; no two alike, ignoring case" }),
  resource_types: z
    .array(z.enum(GITHUB_RESOURCE_TYPES, { error: "must contain only 'issues' and 'pull_requests'" }), {
      error: "must be an array of 'issues' and/or 'pull_requests'",
    })
    .min(1, "must name at least one of 'issues', 'pull_requests'")
    .refine((types) => new Set(types).size === types.length, 'must not contain duplicates')
    .meta({ uniqueItems: true })
    .default([...GITHUB_RESOURCE_TYPES]),
  per_page: z
    .number({ error: 'must be an integer between 1 and 100' })
    .int('must be an integer between 1 and 100')
    .min(1, 'must be an integer between 1 and 100')
    .max(100, 'must be an integer between 1 and 100')
    .default(100),
  rate_budget: rateBudgetConfigSchema.optional(),
});

/** A validated github config, defaults applied (`base_url` without a trailing slash). */
export type GitHubConfig = z.output<typeof githubConfigSchema>;

/** Validates a github config and applies defaults; throws `Permanent` naming the offending key. */
export function parseGitHubConfig(config: Record<string, unknown>): GitHubConfig {
  return parseConnectorConfig('github', githubConfigSchema, config);
}

/** What is wrong with a GitHub App credential (naming the key, never echoing a value), or null. */
function githubAppCredentialsProblem(credentials: Record<string, unknown>): string | null {
  const allowed = new Set(['kind', 'app_id', 'installation_id', 'private_key']);
  const extra = Object.keys(credentials).find((key) => !allowed.has(key));
  if (extra !== undefined) return `${extra}: is not a GitHub App credential key (kind, app_id, installation_id, private_key)`;
  const { app_id, installation_id, private_key } = credentials;
  const appIdOk = (typeof app_id === 'number' && Number.isSafeInteger(app_id) && app_id > 0) || (typeof app_id === 'string' && APP_CLIENT_ID.test(app_id));
  if (!appIdOk) return "app_id: must be the app's id (a positive integer) or its client id (Iv…)";
  if (typeof installation_id !== 'number' || !Number.isSafeInteger(installation_id) || installation_id <= 0) return 'installation_id: must be a positive integer';
  if (typeof private_key !== 'string' || private_key.length > MAX_PRIVATE_KEY_CHARS) return `private_key: must be an RSA private key in PEM of at most ${MAX_PRIVATE_KEY_CHARS} characters`;
  try {
    if (createPrivateKey(private_key.replace(/\\n/g, '\n')).asymmetricKeyType !== 'rsa') return 'private_key: must be an RSA key (GitHub Apps sign with RS256)';
  } catch {
    return 'private_key: must be an RSA private key in PEM (PKCS#1 as GitHub issues it, or PKCS#8)';
  }
  return null;
}

/**
 * What is wrong with github credentials (`{token}`, or a GitHub App installation `{kind:
 * 'github_app', …}`), naming the key and never echoing the value, or null.
 */
export function githubCredentialsProblem(credentials: Record<string, unknown> | null): string | null {
  if (credentials && 'kind' in credentials) {
    if (credentials.kind === 'github_app') return githubAppCredentialsProblem(credentials);
    return "kind: must be 'github_app' (or leave kind out and give a token)";
  }
  const token = credentials?.token;
  if (typeof token !== 'string' || token.trim() === '') return 'token: a non-empty GitHub token string is required';
  if (!TOKEN_SHAPE.test(token)) return `token: ${TOKEN_RULE}`;
  return null;
}

/** The token of a connection's credentials; throws `Permanent` (never echoing values) otherwise. */
function parseCredentials(credentials: Record<string, unknown> | null): string {
  // A GitHub App credential reaches the connector as its current installation token (`{token}`).
  const problem = githubCredentialsProblem(credentials && 'kind' in credentials ? { token: undefined } : credentials);
  if (problem) throw new Permanent(`github connector: invalid credentials: ${problem}`);
  return credentials!.token as string;
}

// ---------------------------------------------------------------------------------------------
// Page tokens

const tokenSchema = z.object({
  // A name ('owner/name'), or a position in `repositories` (tokens written before names were).
  repo: z.union([z.string().min(1).max(201), z.number().int().min(0)]),
  done: z.array(z.string()).max(MAX_REPOSITORIES).optional(),
  url: z.string().nullable(),
  validator: z.object({ url: z.string(), etag: z.string() }).nullable().optional(),
  catchup: z.boolean().optional(),
  head: z.string().nullable().optional(),
  upper: z.string().optional(),
  caught: z
    .object({
      n: z.number().int().min(1),
      top: z.string().refine((at) => !Number.isNaN(Date.parse(at))).optional(),
      acc: z.string(),
      upper: z.string(),
      prev: z.string().optional(),
      pages: z.number().int().min(0),
    })
    .optional(),
  first: z.string().optional(),
  repeats: z.number().int().min(1).optional(),
  prev: z.object({ url: z.string(), etag: z.string().nullable(), lead: z.string().optional(), tail: z.string().optional() }).optional(),
  recheck: z
    .object({
      etag: z.string().nullable(),
      next: z.string().nullable(),
      last: z.object({ url: z.string(), etag: z.string().nullable(), lead: z.string().optional(), tail: z.string().optional() }),
      lead: z.string().optional(),
      tail: z.string().optional(),
      back: z.literal(true).optional(),
      first: z.string().optional(),
      repeats: z.number().int().min(1).optional(),
    })
    .optional(),
});

/**
 * A page token: which repository, the exact URL to fetch (null: its first page), and the ETag of
 * that repository's first page (newest first: of the pass's, then of each catch-up's), carried to
 * its catch-up pass.
 */
export interface GitHubPageToken {
  /** The repository, 'owner/name'; a number is a position in `repositories` (tokens written before names were). */
  repo: string | number;
  /** The repositories the pass read before `repo`, in config order (written with a name only). */
  done?: string[];
  url: string | null;
  validator?: { url: string; etag: string } | null;
  /** A newest-first listing's catch-up pass: its head again, down to `head` (see fetchPage). */
  catchup?: boolean;
  /**
   * The newest `updated_at` the main pass's first page showed; on a catch-up pass, the change time
   * it reads down to (the main pass's head, or the newest change the catch-up before it began with).
   */
  head?: string | null;
  /**
   * A newest-first main pass: the digest of the records it served at or after `head` (ids and
   * change times, in order), which its first catch-up compares its own with (see CatchUp). Absent
   * from tokens written before, and once a page of the pass was skipped by a 304 (not served).
   */
  upper?: string;
  /** On a catch-up pass: where it stands (absent: the first, as tokens written before it say). */
  caught?: CatchUp;
  /**
   * Paging by number within one second: the previous page's first item, as `number@updated_at` (a
   * server that ignores `page` serves it first again; an item an edit moved there has a new time).
   */
  first?: string;
  /**
   * Paging by number within one second: how many pages in a row, up to the one before `url`,
   * started with the first item of the page before them (see MAX_REPEATED_PAGES); absent: none.
   */
  repeats?: number;
  /**
   * Newest first, and oldest first on a page numbered within one `since` second: the page read
   * before `url`, as it was read (its ETag), asked again once `url` is read.
   */
  prev?: PageRead;
  /**
   * Newest first, and oldest first after a page numbered within one second: this step asks `url`, a
   * page already read (`etag`: as it was read), again, to see whether the listing shifted while the
   * page after it (`last`) was read; `next` is where the listing goes on after that page (null: it
   * ended there). `tail` (and oldest first `lead`): the last (and first) item of the page asked
   * again as it was first read (see `bridges`, `holdsEither`); `back`: this step asks a page before
   * that one (unconditionally), the listing having shifted by more than a page. Oldest first,
   * `first` and `repeats` are those of the step to `next` (see GitHubPageToken.first).
   */
  recheck?: { etag: string | null; next: string | null; last: PageRead; lead?: string; tail?: string; back?: true; first?: string; repeats?: number };
}

/**
 * Where a catch-up pass of a newest-first listing stands (see catchUpAgain): its number (from 1),
 * the newest change time its first page showed (`top`, the next catch-up's `head`), the digests of
 * the records it served at or after its `head` (`acc`) and at or after `top` (`upper`), the
 * previous catch-up's `upper` (`prev`; for the first, the main pass's, when known), and how many
 * pages it read (a page asked again after the next one was read is none of them).
 */
interface CatchUp {
  n: number;
  top?: string;
  acc: string;
  upper: string;
  prev?: string;
  pages: number;
}

/** A page of a newest-first listing as it was read: its URL and its ETag (null: GitHub sent none). */
interface PageRead {
  url: string;
  etag: string | null;
  /**
   * Its last item (newest first: its oldest) as `number@updated_at` (newest first, answered 304: the
   * one noted with its ETag); absent when it was empty, answered 304 (oldest first, or to a
   * validator noted without one), and from tokens written before.
   */
  tail?: string;
  /** Oldest first: its first item as `number@updated_at`; absent when it was answered 304 or was empty. */
  lead?: string;
}

/** Where a pass stands in the current config: the position of its repository, and the token's other fields. */
type Position = Omit<GitHubPageToken, 'repo' | 'done'> & { index: number };

/** The first page of a pass: the first repository's first page. */
const PASS_START: Position = { index: 0, url: null };

/** Encodes a page token (base64url JSON); only the fields set are written. */
export function encodeGitHubPageToken(token: GitHubPageToken): string {
  const body: GitHubPageToken = { repo: token.repo, url: token.url };
  if (token.done?.length) body.done = token.done;
  if (token.validator) body.validator = token.validator;
  if (token.catchup) body.catchup = true;
  if (token.head) body.head = token.head;
  if (token.upper !== undefined) body.upper = token.upper;
  if (token.caught) body.caught = token.caught;
  if (token.first !== undefined) body.first = token.first;
  if (token.repeats !== undefined) body.repeats = token.repeats;
  if (token.prev) body.prev = token.prev;
  if (token.recheck) body.recheck = token.recheck;
  return encodePageToken(body);
}

/** The token of `position` in `cfg`: its repository by name, with the repositories configured before it (read by then). */
function tokenAt(cfg: GitHubConfig, position: Position): string {
  const { index, ...rest } = position;
  return encodeGitHubPageToken({ ...rest, repo: cfg.repositories[index]!, done: cfg.repositories.slice(0, index) });
}

/**
 * The repository a GitHub API URL names (`…/repos/{owner}/{name}/issues|pulls`), or null when it
 * names none (GitHub's `/repositories/{id}/…` Link URLs) or is unreadable.
 */
function repositoryOfUrl(url: string): string | null {
  try {
    const match = /\/repos\/([^/]+)\/([^/]+)\/(?:issues|pulls)\/?$/.exec(new URL(url).pathname);
    return match ? `${decodeURIComponent(match[1]!)}/${decodeURIComponent(match[2]!)}` : null;
  } catch {
    return null;
  }
}

/**
 * Where a stored token resumes the pass in the current config, or null when the token cannot be
 * trusted there and the pass must start again from its first page:
 * - its repository is no longer configured (by name, exactly);
 * - a repository now configured before it is not one the pass read before it (added or moved
 *   there since: resuming would skip it, and a full pass would tombstone its records);
 * - its URL (or its validator's) names another repository.
 * A token of the format before names (`repo` a position) resumes at that position only when each
 * URL it holds names that repository (a `/repositories/{id}` URL cannot show it: the pass starts
 * again); a position past the configured repositories fails with `Permanent`, as it did. Throws
 * `Permanent` on text that is no page token, or a URL outside `base_url`'s origin.
 */
function decodePageToken(token: string, cfg: GitHubConfig): Position | null {
  const parsed = tokenSchema.safeParse(pageTokenBody(token));
  if (!parsed.success) throw new Permanent(`github connector: invalid page token '${token}'`);
  const { repo, done, url, validator, catchup, head, upper, caught, first, repeats, prev, recheck } = parsed.data;
  const urls = [url, validator?.url ?? null, prev?.url ?? null, recheck?.next ?? null, recheck?.last.url ?? null].filter((u): u is string => u !== null);
  for (const u of urls) assertSameOrigin(u, cfg, 'page token');
  const names = (repository: string, u: string) => repositoryOfUrl(u)?.toLowerCase() === repository.toLowerCase();
  let index: number;
  if (typeof repo === 'string') {
    index = cfg.repositories.indexOf(repo);
    if (index < 0) return null;
    const read = new Set(done ?? []);
    if (cfg.repositories.slice(0, index).some((r) => !read.has(r))) return null;
    // A URL naming no repository (GitHub's /repositories/{id} links) was written under this name.
    if (urls.some((u) => repositoryOfUrl(u) !== null && !names(repo, u))) return null;
  } else {
    if (repo >= cfg.repositories.length) {
      throw new Permanent(
        `github connector: page token names repository #${repo}, but only ${cfg.repositories.length} are configured`,
      );
    }
    index = repo;
    if (urls.some((u) => !names(cfg.repositories[repo]!, u))) return null;
  }
  return {
    index, url, validator: validator ?? null, catchup: catchup === true, head: head ?? null,
    ...(upper !== undefined && { upper }), ...(caught && { caught }),
    ...(first !== undefined && { first }), ...(repeats !== undefined && { repeats }), ...(prev && { prev }), ...(recheck && url !== null && { recheck }),
  };
}

/**
 * Refuses URLs outside `base_url`'s origin: we would be sending the token there. The URL a refusal
 * quotes is provider text (a Link header, up to a response header's size): quoted through `redact`
 * (default `providerText`), which redacts first, then cuts.
 */
function assertSameOrigin(url: string, cfg: GitHubConfig, what: string, redact: (text: string) => string = providerText): void {
  let origin: string;
  try {
    origin = new URL(url).origin;
  } catch {
    throw new Permanent(`github connector: invalid URL in ${what}: '${redact(url)}'`);
  }
  if (origin !== new URL(cfg.base_url).origin) {
    throw new Permanent(`github connector: refusing to follow ${what} URL '${redact(url)}' outside ${cfg.base_url}`);
  }
}

/**
 * Refuses a next URL from a Link that carries a credential: userinfo (`x-access-token:<token>@`, as
 * git URLs carry one; no provider request may carry it) or the connection's `token` in any URL
 * encoding. The URL becomes the page token, stored with the task's progress and heartbeated to
 * Temporal, where no secret may be; GitHub never writes one there, so it is not followed either.
 * Quoted without its userinfo, through `redact`.
 */
function assertNoCredential(url: string, token: string, redact: (text: string) => string): void {
  const parsed = new URL(url);
  if (!parsed.username && !parsed.password && redactValues(url, [token]) === url) return;
  parsed.username = '';
  parsed.password = '';
  throw new Permanent(`github connector: the next URL from the Link header carries a credential (not stored, not followed): '${redact(redactValues(parsed.href, [token]))}'`);
}

// ---------------------------------------------------------------------------------------------
// HTTP

/** The first URL of `resource` for one repository (later pages come from Link headers). */
function firstUrl(cfg: GitHubConfig, resource: GitHubResourceType, repository: string, since: Date | null): string {
  const [owner = '', name = ''] = repository.split('/');
  const endpoint = resource === 'issues' ? 'issues' : 'pulls';
  const url = new URL(`${cfg.base_url}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}/${endpoint}`);
  url.searchParams.set('state', 'all');
  url.searchParams.set('sort', 'updated');
  // Pulls have no `since`: newest first, so an incremental pass stops at the first older item.
  url.searchParams.set('direction', resource === 'issues' ? 'asc' : 'desc');
  url.searchParams.set('per_page', String(cfg.per_page));
  if (resource === 'issues' && since !== null) url.searchParams.set('since', sinceParam(since));
  return url.href;
}

/** GitHub's `message` from an error body, when it is JSON with one (else the trimmed text; cut later, after redaction). */
function bodyMessage(text: string): string {
  try {
    const body = JSON.parse(text) as unknown;
    if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string') {
      return (body as { message: string }).message;
    }
  } catch {
    // not JSON
  }
  return text.trim();
}

/** Maps a non-2xx response to the typed error the central policy understands. */
function errorFor(status: number, headers: Headers, text: string, repository: string, redact: (s: string) => string): ConnectorError {
  // Redacted first, then cut: a token split by the cut would leak its prefix.
  const message = redact(bodyMessage(text));
  const detail = message ? `: ${message}` : '';
  if (status === 401) return new Unauthorized('GitHub rejected the credentials (401)');
  if (status === 404) {
    return new Permanent(`github connector: repository '${repository}' not found (404), or the token cannot see it`);
  }
  if (status === 403 || status === 429) {
    // Waits are counted from GitHub's clock (its answer's Date), as its reset and dates are its own.
    const now = answeredAtMs(headers.get('date'), Date.now());
    const retryAfter = parseRetryAfter(headers.get('retry-after'), now);
    if (retryAfter !== undefined) {
      return new RateLimited(`github connector: secondary rate limit on '${repository}' (${status}), retry after ${retryAfter}s${detail}`, retryAfter);
    }
    if (headers.get('x-ratelimit-remaining')?.trim() === '0') {
      const resetHeader = headers.get('x-ratelimit-reset')?.trim() ?? '';
      const wait = /^\d+$/.test(resetHeader) ? Math.max(0, Math.ceil(Number(resetHeader) - now / 1000)) : undefined;
      return new RateLimited(
        `github connector: primary rate limit exhausted (${status})${wait === undefined ? '' : `, resets in ${wait}s`}${detail}`,
        wait,
      );
    }
    if (status === 429 || /rate limit/i.test(message)) {
      return new RateLimited(`github connector: rate limited on '${repository}' (${status})${detail}`, SECONDARY_LIMIT_DEFAULT_SECONDS);
    }
    return new Permanent(`github connector: access to '${repository}' forbidden (403)${detail}`);
  }
  if (status >= 500 || status === 408) return new Transient(`github connector: GitHub answered ${status} for '${repository}'${detail}`);
  return new Permanent(`github connector: GitHub answered ${status} for '${repository}'${detail}`);
}

type GitHubItem = Record<string, unknown> & { number: number; updated_at?: unknown };

/** The newest `updated_at` of a page (ISO), or null when no item has a readable one. */
function newestUpdatedAt(items: readonly GitHubItem[]): string | null {
  let best: string | null = null;
  let bestMs = -Infinity;
  for (const item of items) {
    const ms = typeof item.updated_at === 'string' ? Date.parse(item.updated_at) : Number.NaN;
    if (ms > bestMs) {
      bestMs = ms;
      best = item.updated_at as string;
    }
  }
  return best;
}

const isItem = (value: unknown): value is GitHubItem =>
  !!value && typeof value === 'object' && !Array.isArray(value) && Number.isInteger((value as { number?: unknown }).number);

/** The request headers of every GitHub call. */
function requestHeaders(token: string): Record<string, string> {
  return { Authorization: `Bearer ${token}`, Accept: 'application/vnd.github+json', 'X-GitHub-Api-Version': API_VERSION, 'User-Agent': USER_AGENT };
}

/** A time as GitHub's `since` takes it: ISO 8601 in whole seconds (rounded down, so nothing is left out). */
function sinceParam(at: Date): string {
  return new Date(Math.floor(at.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/**
 * What a stored validator notes about its page: where a later 304 of the page goes on (null: the
 * listing ends there), newest first its oldest and newest change times, oldest first whether the
 * page was served whole (`full`: as many items as its URL asked for).
 *
 * GitHub's ETag is a digest of a page's body, not of its Link header: a page keeps its ETag while
 * the listing grows behind it. Newest first that cannot hide anything (a change or a new item
 * moves to the head and shifts every page after it), nor oldest first behind a page with room left
 * (a change moves to the end: onto that page). But a last page served whole stays the same while
 * changes pile up after it: its 304 goes on with the keyset continuation (`next`), not to the end.
 */
interface PageNote {
  next: string | null;
  oldest?: string | null;
  newest?: string | null;
  /**
   * The page's last item as `number@updated_at` (newest first: its oldest), so a 304 of the page
   * knows what it held (the ETag vouches for the same body), for the check of the page asked again
   * after the next one (newest first `bridges`; oldest first, within one second, `holdsEither` with
   * `lead`). Absent from an empty page and from notes written before.
   */
  tail?: string;
  /** Oldest first: the page's first item as `number@updated_at` (see `tail`). */
  lead?: string;
  full?: boolean;
}

/** A stored note read back; an unreadable one reads as "the listing goes on nowhere": nothing is skipped beyond the page. */
function parseNote(text: string | null): { next: string | null; oldest: string | null; newest: string | null; tail: string | null; lead: string | null; full: boolean | null } {
  try {
    const note = JSON.parse(text ?? 'null') as PageNote | null;
    const str = (v: unknown) => (typeof v === 'string' ? v : null);
    return { next: str(note?.next), oldest: str(note?.oldest), newest: str(note?.newest), tail: str(note?.tail), lead: str(note?.lead), full: typeof note?.full === 'boolean' ? note.full : null };
  } catch {
    return { next: null, oldest: null, newest: null, tail: null, lead: null, full: null };
  }
}

/**
 * Whether a listing of `kind` (`descending`: newest first) is paged by keyset (`keysetNext`): issues
 * oldest first. Every other listing follows GitHub's Link header.
 */
const pagedByKeyset = (kind: GitHubResourceType, descending: boolean): boolean => !descending && kind === 'issues';

/**
 * Whether a 304 to a stored validator whose note reads `note` may vouch for its page and what the
 * note says follows it. Not a keyset page (`keyset`) noted as the listing's end without saying
 * whether it was served whole (a note written before notes said so, or unreadable): it may be a
 * whole last page the listing has grown behind (see PageNote), so it is asked for unconditionally,
 * and its new note says.
 */
const vouches = (note: ReturnType<typeof parseNote>, keyset: boolean): boolean => !keyset || note.next !== null || note.full !== null;

/** How many items a listing URL asks for a page (its `per_page`; else `fallback`, the config's). */
function askedPerPage(url: string, fallback: number): number {
  const asked = Number(new URL(url).searchParams.get('per_page'));
  return Number.isInteger(asked) && asked > 0 ? asked : fallback;
}

/** The `since` second a page URL numbers its pages within (page 2 or later), or null. */
function heldSecond(url: string): string | null {
  const params = new URL(url).searchParams;
  const since = params.get('since');
  return since !== null && Number(params.get('page') ?? '1') >= 2 ? since : null;
}

/**
 * Most pages in a row, numbered within one `since` second, that may start with the previous page's
 * first item. One such page is a listing that shifted back by a page while the pass read it (issues
 * edited into that second ahead of it); another at once would take a page's worth of edits exactly
 * again. So many in a row is a server that ignores `page`: the task fails for good, not paging forever.
 */
const MAX_REPEATED_PAGES = 3;

/** An item as `number@updated_at`: the same item in the same version. */
const itemKey = (item: GitHubItem): string => `${item.number}@${String(item.updated_at)}`;

/**
 * Whether `body`, a page of a newest-first listing asked again, still reaches back to `tail`, the
 * oldest item of that page as it was first read: it holds that item, or starts with a newer one.
 * Items hidden above the page move the items after them up, and the page asked again catches those
 * that moved onto it; when more than a page's worth moved, it starts after `tail`, and the items
 * between `tail` and its first item (served by no page) are on the pages before it.
 */
function bridges(body: readonly GitHubItem[], tail: string): boolean {
  if (body.some((item) => itemKey(item) === tail)) return true;
  const first = body[0];
  const at = tail.slice(tail.indexOf('@') + 1);
  return first !== undefined && typeof first.updated_at === 'string' && Date.parse(first.updated_at) > Date.parse(at);
}

/**
 * Whether `body`, a page of an oldest-first listing asked again after the page numbered after it
 * within one `since` second was read, still holds the first or the last item it had when first read
 * (`lead`, `tail`, as `number@updated_at`). An issue that leaves the second (edited later, deleted,
 * hidden, transferred) moves the second's later issues back a position, one of them onto the page
 * already read: the next page number skips it. Asked again, the page serves those that moved onto
 * it; still holding an item it had, it holds every one that moved onto it or past it (the issues of
 * a second keep their order among themselves). Holding neither, more than a page's worth may have
 * left: the pages before it are asked again too, walking back, until one holds either, or the
 * second's first page.
 */
function holdsEither(body: readonly GitHubItem[], lead: string | undefined, tail: string | undefined): boolean {
  return body.some((item) => {
    const key = itemKey(item);
    return key === lead || key === tail;
  });
}

/** The URL of the page before `url`'s in its listing (its `page` less one), or null for a first page. */
function pageBefore(url: string): string | null {
  const u = new URL(url);
  const page = Number(u.searchParams.get('page') ?? '1');
  if (!Number.isInteger(page) || page <= 1) return null;
  u.searchParams.set('page', String(page - 1));
  return u.href;
}

/** Whole seconds of an ISO time (NaN when unreadable). */
const secondOf = (iso: unknown) => (typeof iso === 'string' ? Math.floor(Date.parse(iso) / 1000) : Number.NaN);

/**
 * The next page of an oldest-first issues listing after `body` (fetched from `url`), by keyset:
 * `since` = the last item's change time (inclusive: the items of that second are served again, and
 * the platform de-duplicates them), so an item edited mid-pass moves only to pages not yet read
 * and no other item slides into a page already read. When the whole page shares one second,
 * `since` cannot move: the next page is the next page number within that second, counted from the
 * second's first item, so only from a page asked with `since` at that very second. A page wholly in
 * a second its request did not ask for (a first page, or one numbered within an earlier second) is
 * followed by that second's own first page: numbered on from it, an issue of the page edited out of
 * the second before the next request would shift the second's listing back, and the next number
 * would skip an issue there unchanged all along. Null when the page's times are unreadable (the
 * caller follows GitHub's Link then).
 */
function keysetNext(cfg: GitHubConfig, repository: string, url: string, body: readonly GitHubItem[]): string | null {
  const last = secondOf(body.at(-1)?.updated_at);
  const first = secondOf(body[0]?.updated_at);
  if (Number.isNaN(last) || Number.isNaN(first)) return null;
  const next = new URL(firstUrl(cfg, 'issues', repository, new Date(last * 1000)));
  if (first === last) {
    const params = new URL(url).searchParams;
    if (secondOf(params.get('since')) === last) next.searchParams.set('page', String(Number(params.get('page') ?? '1') + 1));
  }
  return next.href;
}

/** The oldest `updated_at` of a page (as GitHub wrote it), or null when no item has a readable one. */
function oldestUpdatedAt(items: readonly GitHubItem[]): string | null {
  let best: string | null = null;
  let bestMs = Infinity;
  for (const item of items) {
    const ms = typeof item.updated_at === 'string' ? Date.parse(item.updated_at) : Number.NaN;
    if (ms < bestMs) {
      bestMs = ms;
      best = item.updated_at as string;
    }
  }
  return best;
}

/**
 * Most catch-up passes one pass of a newest-first listing reads in a row. After a listing changing
 * through every one of them, the task fails as transient, its progress at a catch-up down to the
 * last one's head: the job's retry reads from there, deleting nothing before.
 */
const MAX_CATCHUP_PASSES = 5;

/**
 * What follows a catch-up pass that has just ended (`caught`: where it stood): nothing (`done`),
 * another catch-up down to the newest change its first page showed (`again`), or, after
 * MAX_CATCHUP_PASSES of them, a retry of the task (`retry`).
 *
 * A newest-first pass of more than one page ends by reading its head again, down to the newest
 * change its first page showed: a pull request changed while the pass paged moved to the head,
 * behind the position of the pass's Link URLs. That catch-up pages too, and a pull request changed
 * again while it does, before the catch-up reached it, moves to the head once more, behind the
 * catch-up's position: no page of the pass serves it, and a full pass would take it for deleted.
 * So a catch-up is followed by another, down to the newest change its own first page showed,
 * unless it took a single page (one answer: what changed since the one before it began, all of it;
 * a 304 takes none), or it served the very records (ids and change times, in order) that the one
 * before it (for the first, the main pass) served at or after its head: nothing moved to the head
 * since that one began (a head of pull requests changed in one second over more than a page, say).
 */
function catchUpAgain(caught: CatchUp): 'done' | 'again' | 'retry' {
  if (caught.pages <= 1 || caught.top === undefined || caught.acc === caught.prev) return 'done';
  return caught.n >= MAX_CATCHUP_PASSES ? 'retry' : 'again';
}

/** A running digest `acc` moved on by `records` (ids and change times, in order), one record at a time, however they were paged. */
function servedDigest(acc: string, records: readonly ConnectorRecord[]): string {
  return records.reduce(
    (running, r) => createHash('sha256').update(running).update(JSON.stringify([r.externalId, r.updatedAt])).digest('base64url').slice(0, 24),
    acc,
  );
}

/** The records changed at or after `at` (ISO), and those without a readable change time. */
function atOrAfter(records: readonly ConnectorRecord[], at: string): ConnectorRecord[] {
  const atMs = Date.parse(at);
  return records.filter((r) => r.updatedAt === null || Number.isNaN(Date.parse(r.updatedAt)) || Date.parse(r.updatedAt) >= atMs);
}

// ---------------------------------------------------------------------------------------------
// The connector

/** The github provider: see the module comment and `githubConfigSchema`. */
export const githubConnector: Connector = {
  slug: 'github',

  resourceTypes(config) {
    return [...parseGitHubConfig(config).resource_types];
  },

  endpoint(config) {
    return { key: 'base_url', url: parseGitHubConfig(config).base_url };
  },

  credentialsProblem(credentials) {
    return githubCredentialsProblem(credentials);
  },

  keepSpelling(current, next) {
    // GitHub finds a repository by owner and name ignoring letter case: one configured again in
    // other letters is the same repository, and keeps the spelling its records' ids name.
    const stored = Array.isArray(current.repositories) ? current.repositories.filter((r): r is string => typeof r === 'string') : [];
    if (!Array.isArray(next.repositories) || stored.length === 0) return next;
    const byLower = new Map(stored.map((r) => [r.toLowerCase(), r]));
    const repositories: unknown[] = next.repositories.map((r: unknown) => (typeof r === 'string' ? (byLower.get(r.toLowerCase()) ?? r) : r));
    return { ...next, repositories };
  },

  partitions(config) {
    return [...parseGitHubConfig(config).repositories];
  },

  partitionIdPrefix(partition) {
    // An issue's id is `owner/name#number`; neither owner nor name may hold a '#'.
    return `${partition}#`;
  },

  listing(config, resourceType) {
    const cfg = parseGitHubConfig(config);
    // Repositories are partitions, each with its own cursor; another API host is another listing.
    return (cfg.resource_types as string[]).includes(resourceType) ? cfg.base_url : null;
  },

  pageKey(token) {
    const body = pageTokenBody(token) as { repo?: unknown; done?: unknown; url?: unknown; catchup?: unknown; caught?: { n?: unknown }; recheck?: unknown };
    let page: string;
    if (typeof body.repo === 'string') {
      // The repository and those read before it belong to the page: a token the current config
      // cannot trust starts the pass again, and that pass's tokens for the same URL are other pages.
      const done = Array.isArray(body.done) ? body.done.map(String) : [];
      const before = done.length === 0 ? '' : ` (after ${done.length} repositories, ${createHash('sha256').update(done.join('\n')).digest('hex').slice(0, 12)})`;
      page = `${typeof body.url === 'string' ? body.url : 'first page'} of ${body.repo}${before}`;
    } else {
      page = typeof body.url === 'string' ? body.url : `first page of repository #${String(body.repo)}`;
    }
    // A page asked again after the next one was read is another step of the pass than its first reading.
    if (body.recheck) {
      const back = (body.recheck as { back?: unknown; last?: { url?: unknown } }).back === true;
      // A page before it, asked while walking back after a shift of more than a page: another step
      // for each page read after which the walk began.
      page = back ? `${page} (asked again after ${String((body.recheck as { last?: { url?: unknown } }).last?.url)})` : `${page} (asked again)`;
    }
    // So does a catch-up pass, which asks the pass's URLs (and those of the catch-up before it) again.
    if (body.catchup !== true) return page;
    const n = body.caught?.n;
    return typeof n === 'number' && n > 1 ? `${page} (catch-up pass ${n})` : `${page} (catch-up pass)`;
  },

  async fetchPage(input: FetchPageInput): Promise<FetchPageResult> {
    const { resource, until, pageToken, config, credentials, signal, policy, validators, budget } = input;
    signal?.throwIfAborted();
    const cfg = parseGitHubConfig(config);
    const token = parseCredentials(credentials);
    const redact = (text: string) => providerText(text, [token]);
    if (!(cfg.resource_types as string[]).includes(resource)) {
      throw new Permanent(`github connector: unknown resource '${resource}' (configured: ${cfg.resource_types.join(', ')})`);
    }
    const kind = resource as GitHubResourceType;
    if (until != null && (!(until instanceof Date) || Number.isNaN(until.getTime()))) {
      throw new Permanent(`github connector: invalid until ${String(until)}`);
    }

    // A token the current config cannot trust (decodePageToken) starts the pass again from its first page.
    const position: Position = pageToken === null ? PASS_START : (decodePageToken(pageToken, cfg) ?? PASS_START);
    const catchup = position.catchup === true;
    // Newest first: what the main pass served at or after its head so far (see GitHubPageToken.upper),
    // and where a catch-up pass stands (a token written before catch-ups were numbered: the first).
    let upper = position.upper;
    let caught: CatchUp = position.caught ?? { n: 1, acc: '', upper: '', pages: 0 };
    const repository = cfg.repositories[position.index]!; // decodePageToken checked the index
    // Each repository is a partition with its own cursor.
    const since = sinceOf(input, repository);
    if (since !== null && (!(since instanceof Date) || Number.isNaN(since.getTime()))) {
      throw new Permanent(`github connector: invalid since ${String(since)}`);
    }
    const firstPage = position.url === null;
    const url = position.url ?? firstUrl(cfg, kind, repository, since);
    // The order is the URL's own (a task resumed from a token of an older version keeps its order);
    // a next URL without one keeps the order this connector asks for.
    const direction = new URL(url).searchParams.get('direction');
    const descending = direction === null ? kind === 'pull_requests' : direction === 'desc';
    const keyset = pagedByKeyset(kind, descending);
    const nextRepository = () =>
      position.index + 1 < cfg.repositories.length ? tokenAt(cfg, { index: position.index + 1, url: null }) : null;
    // Conditional requests: a catch-up pass's head against the ETag its main pass (or the catch-up
    // before it) saw on its first page; any other page against the validator an earlier pass stored for that very URL (given only to
    // incremental passes without an upper bound: a full pass must see every record).
    const offered = !catchup && until == null ? validators?.get(url) : undefined;
    const offeredNote = offered === undefined ? null : parseNote(offered.next);
    const stored = offeredNote !== null && vouches(offeredNote, keyset) ? offered : undefined;
    const recheck = descending || keyset ? position.recheck : undefined;
    const etag = recheck ? (recheck.etag ?? undefined) : catchup ? (firstPage ? (position.validator?.etag ?? undefined) : undefined) : stored?.etag;
    // A page numbered within one `since` second can lose an item to an edit that shifts the rest
    // (see keysetNext): the repository's cursor may not pass that second in this pass.
    const held = heldSecond(url);
    const holdCursors = held === null ? {} : { holdCursors: [{ partition: repository, at: held }] };

    const answer: ProviderResponse = await providerGet(url, {
      headers: { ...requestHeaders(token), ...(etag !== undefined && { 'If-None-Match': etag }) },
      secrets: [token],
      context: `github connector: fetching '${repository}'`,
      ...(policy ? { policy } : {}),
      ...(signal ? { signal } : {}),
      ...(budget ? { budget } : {}),
      rateLimitHeaders: GITHUB_RATE_LIMIT_HEADERS,
    });

    /** The page's first item as `number@updated_at` (set once a body was read). */
    let pageFirst: string | undefined = undefined;
    /** Newest first: the page's oldest item as `number@updated_at` (set once a body was read). */
    let pageTail: string | undefined = undefined;
    /** Newest first, a page asked again: the page before it to ask, the listing having shifted by more than a page. */
    let walkBack: string | null = null;
    /** How many pages in a row, this one the last, started with the previous page's first item (0: this one did not). */
    let repeated = 0;
    /** The ETag of this page as read (for a newest-first listing's next check of it). */
    let read: string | null = null;
    /** Where the pass goes after this page: `next` in this repository, a catch-up pass, or the next repository. */
    const after = (records: ConnectorRecord[], next: string | null, head: string | null, validator: Position['validator'], extra: Partial<FetchPageResult>): FetchPageResult => {
      // What every next step of this pass (or of this catch-up pass) carries on.
      const carried = catchup ? { catchup, head, caught } : { head, ...(upper !== undefined && { upper }) };
      // This page as read: its ETag, its last item and, oldest first, its first (what a check of it
      // asked again compares with: `bridges`, `holdsEither`).
      const here: PageRead = { url, etag: read, ...(keyset && pageFirst !== undefined && { lead: pageFirst }), ...(pageTail !== undefined && { tail: pageTail }) };
      // Oldest first, the first item of this page for the repeat check of a next page numbered
      // within the same second (see GitHubPageToken.first).
      const firstFor = (to: string | null) => (to !== null && heldSecond(to) !== null && pageFirst !== undefined ? { first: pageFirst, ...(repeated > 0 && { repeats: repeated }) } : {});
      // Newest first, GitHub's pages are positions: a pull request hidden or removed above a page
      // boundary while the page after it is asked moves the first item of that page up onto the
      // page read before, and no page serves it. So each page after the first is followed by the
      // page before asked again, with the ETag it had (a 304 when nothing moved): changed, it is
      // served again, with whatever moved up onto it (see `recheck` below).
      if (descending && !recheck) {
        if (position.prev) {
          const tail = position.prev.tail !== undefined ? { tail: position.prev.tail } : {};
          return { ...extra, ...holdCursors, records, nextPageToken: tokenAt(cfg, { index: position.index, url: position.prev.url, validator, ...carried, recheck: { etag: position.prev.etag, next, last: here, ...tail } }) };
        }
        if (next !== null) return { ...extra, ...holdCursors, records, nextPageToken: tokenAt(cfg, { index: position.index, url: next, validator, ...carried, prev: here }) };
      }
      // Oldest first, a page numbered within one second (`since` at it, page 2 or later) is followed
      // by the page before it asked again, with the ETag it had (a 304 when nothing moved): an issue
      // that left the second meanwhile moved one of the second's later issues onto that page, which
      // the page number just asked skipped. Changed, the page is served again (see `holdsEither`).
      if (keyset && !recheck && position.prev && heldSecond(url) !== null) {
        const { url: prevUrl, etag: prevEtag, ...ends } = position.prev;
        return {
          ...extra, ...holdCursors, records,
          nextPageToken: tokenAt(cfg, { index: position.index, url: prevUrl, validator, ...carried, recheck: { etag: prevEtag, next, last: here, ...ends, ...firstFor(next) } }),
        };
      }
      // More than a page's worth of items hidden above the page asked again moved some of those
      // after it further up, onto the pages before it: each is asked again, walking back, until
      // one holds what followed the page as it was first read (see `bridges`), or the first page.
      if (recheck && walkBack !== null) {
        return { ...extra, ...holdCursors, records, nextPageToken: tokenAt(cfg, { index: position.index, url: walkBack, validator, ...carried, recheck: { ...recheck, etag: null, back: true } }) };
      }
      if (recheck && recheck.next !== null && keyset) {
        // On with the page after the one read last, which the page read last is asked again after
        // when it too is numbered within one second.
        const within = heldSecond(recheck.next) !== null;
        const first = within && recheck.first !== undefined ? { first: recheck.first, ...(recheck.repeats !== undefined && { repeats: recheck.repeats }) } : {};
        return { ...extra, ...holdCursors, records, nextPageToken: tokenAt(cfg, { index: position.index, url: recheck.next, validator, ...carried, ...first, ...(within && { prev: recheck.last }) }) };
      }
      if (recheck && recheck.next !== null) {
        return { ...extra, ...holdCursors, records, nextPageToken: tokenAt(cfg, { index: position.index, url: recheck.next, validator, ...carried, prev: recheck.last }) };
      }
      if (next !== null && !recheck) {
        // Oldest first, the page read now is asked again once the page numbered after it is read.
        const prev = keyset && heldSecond(next) !== null ? { prev: here } : {};
        return { ...extra, ...holdCursors, records, nextPageToken: tokenAt(cfg, { index: position.index, url: next, validator, ...carried, ...firstFor(next), ...prev }) };
      }
      // Pages of a newest-first listing shift while we page: an item changed meanwhile moves to the
      // head, out of the pages still ahead, and would be missed (and, in a full pass, deleted as
      // unseen). A pass that took more than one page therefore reads the head once more, down to the
      // newest change its first page showed; with its own ETag, an unchanged head costs one 304.
      if (descending && !catchup && !firstPage && until == null && head !== null) {
        const first: CatchUp = { n: 1, acc: '', upper: '', ...(upper !== undefined && { prev: upper }), pages: 0 };
        return { ...extra, ...holdCursors, records, nextPageToken: tokenAt(cfg, { index: position.index, url: null, validator, catchup: true, head, caught: first }) };
      }
      // That catch-up pages too, and an item changed again while it does moves behind its position
      // in turn (see catchUpAgain): another follows, down to the newest change its first page showed.
      const again = catchup ? catchUpAgain(caught) : 'done';
      if (again === 'retry') {
        // Stored, the token starts the catch-up over, down to this one's head: the job's retry reads
        // from there, and the pass deletes nothing before it ends.
        const over: CatchUp = { n: 1, acc: '', upper: '', pages: 0 };
        return {
          ...extra, ...holdCursors, records,
          nextPageToken: tokenAt(cfg, { index: position.index, url: null, validator: null, catchup: true, head, caught: over }),
          retryLater:
            `github connector: '${repository}' ${resource}: the listing changed during each of ${caught.n} reads of its head (catch-up passes of a newest-first listing, ` +
            'each down to the newest change the one before it began with), so a pull request changed meanwhile may have been missed; retrying later',
        };
      }
      if (again === 'again') {
        const next: CatchUp = { n: caught.n + 1, acc: '', upper: '', prev: caught.upper, pages: 0 };
        return { ...extra, ...holdCursors, records, nextPageToken: tokenAt(cfg, { index: position.index, url: null, validator, catchup: true, head: caught.top!, caught: next }) };
      }
      return { ...extra, ...holdCursors, records, nextPageToken: nextRepository(), completedPartitions: [repository] };
    };

    if (answer.status === 304 && etag !== undefined) {
      // A page asked again is as it was read: nothing moved up onto it.
      if (recheck) return after([], null, position.head ?? null, position.validator ?? null, { notModified: true });
      // A catch-up pass's head is unchanged since the pass (or the catch-up before it) began: nothing
      // moved there, and nothing moved behind that one's position.
      if (catchup) return after([], null, null, null, { notModified: true });
      // This page is as an earlier pass stored it (its records with it): skip it, and go on with
      // what that pass noted follows it.
      const note = offeredNote ?? parseNote(null);
      const ended = note.next === null || (descending && since !== null && note.oldest !== null && Date.parse(note.oldest) < since.getTime());
      const head = firstPage && descending ? note.newest : (position.head ?? null);
      const validator = firstPage && descending ? { url, etag } : (position.validator ?? null);
      // The page's records were not served: what the pass served at or after its head is not known.
      upper = undefined;
      // Newest first, the page's oldest item is the one noted with its ETag (the same body): the
      // page asked again after the next one must still reach back to it, else the walk-back runs.
      if (descending && note.tail !== null) pageTail = note.tail;
      // Oldest first, its first and last items are those noted with its ETag: the page asked again
      // after the next one walks back only when it holds neither (see `holdsEither`).
      if (keyset && note.lead !== null) pageFirst = note.lead;
      if (keyset && note.tail !== null) pageTail = note.tail;
      // Confirmed, the validator is stored again (a pass keeps the validators it visited).
      const confirmed = { url, etag, next: stored?.next ?? null };
      read = etag;
      return after([], ended ? null : note.next, head, validator, { notModified: true, validators: [confirmed] });
    }
    if (answer.status < 200 || answer.status >= 300) throw errorFor(answer.status, answer.headers, answer.text, repository, redact);

    const body = jsonBody(answer, `github connector: unreadable JSON from GitHub for '${repository}'`);
    if (!Array.isArray(body) || !body.every(isItem)) {
      throw new Permanent(`github connector: unexpected response for '${repository}' ${resource}: expected an array of items with a number`);
    }

    // Paged by number within one second, a page that starts with the previous page's first item
    // is that page again: issues edited in that very second while the pass pages join it ahead of
    // the page asked (a page's worth of them shifts the rest back by exactly one page), or the
    // server ignores `page`. The first is no reason to stop (the repository's cursor is held at
    // that second, so the next pass reads it again): the pass goes on with the next page number.
    // The second would page forever: after MAX_REPEATED_PAGES such pages in a row the task fails.
    const firstKey = body[0] ? `${body[0].number}@${String(body[0].updated_at)}` : undefined;
    if (position.first !== undefined && firstKey === position.first) {
      repeated = (position.repeats ?? 0) + 1;
      if (repeated >= MAX_REPEATED_PAGES) {
        throw new Permanent(
          `github connector: '${repository}': ${url} repeats the previous page (${repeated} pages in a row); the server does not page by 'page' within 'since'`,
        );
      }
    }
    pageFirst = firstKey;
    // A catch-up pass reads down to the main pass's head: everything changed since it began.
    const headMs = catchup && position.head ? Date.parse(position.head) : null;
    const sinceMs = headMs !== null && !Number.isNaN(headMs) ? Math.max(headMs, since?.getTime() ?? -Infinity) : since === null ? null : since.getTime();
    const untilMs = until == null ? null : until.getTime();
    // Oldest first (issues): items before `since` are skipped (the issues endpoint already leaves
    // them out), and once one item is at or after `until` every later one is too: the repository
    // has nothing more to serve. Newest first (pulls): items at or after `until` are skipped, and
    // the first item older than `since` ends the repository's paging.
    let ended = false;
    const records: ConnectorRecord[] = [];
    for (const item of body) {
      const updatedAt = typeof item.updated_at === 'string' ? item.updated_at : null;
      const updatedMs = updatedAt === null ? Number.NaN : Date.parse(updatedAt);
      if (sinceMs !== null && updatedMs < sinceMs) {
        if (descending) {
          ended = true;
          break;
        }
        continue;
      }
      if (untilMs !== null) {
        if (updatedMs >= untilMs && !descending) ended = true;
        // A record without a (readable) change time cannot be placed before `until`.
        if (ended || updatedMs >= untilMs || Number.isNaN(updatedMs)) continue;
      }
      // The issues endpoint also lists pull requests (items with a `pull_request` key).
      if (kind === 'issues' && 'pull_request' in item) continue;
      records.push({ externalId: `${repository}#${item.number}`, updatedAt, data: item, partition: repository });
    }

    const linkNext = nextLink(answer.headers.get('link'), answer.url);
    if (linkNext !== null) {
      assertSameOrigin(linkNext, cfg, 'Link header', redact);
      assertNoCredential(linkNext, token, redact);
      // It becomes the page token (MAX_NEXT_URL_CHARS): a relative Link grows on each page.
      if (linkNext.length > MAX_NEXT_URL_CHARS) {
        throw new Permanent(
          `github connector: the next URL from the Link header is ${linkNext.length} characters, more than ${MAX_NEXT_URL_CHARS} (the longest next URL the connector follows); ` +
            `not followed: '${redact(linkNext)}'`,
        );
      }
    }
    // Oldest first by `since`, page numbers only within one second; newest first by GitHub's Link.
    const listingNext = linkNext === null ? null : keyset ? (keysetNext(cfg, repository, url, body) ?? linkNext) : linkNext;
    // The page's validator, stored with its records, notes what follows the page in its listing
    // (and, newest first, its oldest and newest change times), so a 304 skips this page only.
    const received = answer.headers.get('etag');
    // Oldest first, a last page served whole notes the keyset continuation for a later 304 of it
    // (GitHub's ETag does not change when the listing grows behind it: see PageNote).
    const full = !descending && body.length >= askedPerPage(url, cfg.per_page);
    const continuation = listingNext === null && full && keyset ? keysetNext(cfg, repository, url, body) : null;
    const note: PageNote = {
      next: listingNext ?? continuation,
      ...(descending ? { oldest: oldestUpdatedAt(body), newest: newestUpdatedAt(body), ...(body.length > 0 && { tail: itemKey(body.at(-1)!) }) }
        : { full, ...(keyset && body.length > 0 && { lead: itemKey(body[0]!), tail: itemKey(body.at(-1)!) }) }),
    };
    read = received;
    if (descending) {
      pageTail = body.length > 0 ? itemKey(body.at(-1)!) : undefined;
      if (recheck?.tail !== undefined && !bridges(body, recheck.tail)) walkBack = pageBefore(url);
    } else if (keyset) {
      pageTail = body.length > 0 ? itemKey(body.at(-1)!) : undefined;
      if (recheck && !holdsEither(body, recheck.lead, recheck.tail)) walkBack = pageBefore(url);
    }
    const saved = received && until == null && !catchup && !recheck ? { validators: [{ url, etag: received, next: JSON.stringify(note) }] } : {};
    // The first page's ETag travels with a newest-first pass to its catch-up (not for a windowed
    // pass), and a catch-up's first page's ETag to the catch-up after it.
    const validator = firstPage ? (received && until == null ? { url, etag: received } : null) : (position.validator ?? null);
    const head = firstPage && !catchup && descending ? newestUpdatedAt(body) : (position.head ?? null);
    if (descending && catchup) {
      // A page asked again counts no page of the catch-up, but the records it serves are served.
      const top = firstPage ? (newestUpdatedAt(body) ?? undefined) : caught.top;
      caught = {
        ...caught, ...(top !== undefined && { top }),
        acc: servedDigest(caught.acc, records), upper: servedDigest(caught.upper, top === undefined ? [] : atOrAfter(records, top)), pages: caught.pages + (recheck ? 0 : 1),
      };
    } else if (descending && head !== null) {
      const before = firstPage ? '' : upper;
      upper = before === undefined ? undefined : servedDigest(before, atOrAfter(records, head));
    }
    return after(records, ended ? null : listingNext, head, validator, saved);
  },

  consistentListing() {
    // Issues: keyset by `since` (an item unchanged for the whole pass is served; page numbers only
    // within one second, each followed by the page before asked again, which catches a shift). Pull requests: newest
    // first, where a change only moves an item to the head (read again by the catch-up pass), and
    // an item hidden or removed moves one up onto the page before, which is asked again.
    return true;
  },

  async recheck({ resource, externalIds, config, credentials, signal, policy, budget }: RecheckInput): Promise<RecheckResult> {
    const cfg = parseGitHubConfig(config);
    const token = parseCredentials(credentials);
    const redact = (text: string) => providerText(text, [token]);
    const endpoint = resource === 'pull_requests' ? 'pulls' : 'issues';
    const alive: ConnectorRecord[] = [];
    const gone: string[] = [];
    const get = (url: string, what: string) =>
      providerGet(url, {
        headers: requestHeaders(token),
        secrets: [token],
        context: `github connector: re-checking '${what}'`,
        ...(policy ? { policy } : {}),
        ...(signal ? { signal } : {}),
        ...(budget ? { budget } : {}),
        rateLimitHeaders: GITHUB_RATE_LIMIT_HEADERS,
      });
    // A configured repository's API URL as GitHub names it now (lower case), asked at most once a
    // re-check: a repository renamed since it was configured is still served under its old name
    // (GitHub redirects), and its items then name the new one, which is no transfer.
    const currentUrls = new Map<string, string | null>();
    const currentUrl = async (repository: string): Promise<string | null> => {
      if (!currentUrls.has(repository)) {
        const [owner = '', name = ''] = repository.split('/');
        const answer = await get(`${cfg.base_url}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`, repository);
        if (answer.status !== 404 && (answer.status < 200 || answer.status >= 300)) throw errorFor(answer.status, answer.headers, answer.text, repository, redact);
        const body = answer.status === 404 ? null : jsonBody(answer, `github connector: unreadable JSON from GitHub for '${repository}'`);
        const url = body && typeof body === 'object' ? (body as { url?: unknown }).url : undefined;
        currentUrls.set(repository, typeof url === 'string' ? url.toLowerCase() : null);
      }
      return currentUrls.get(repository) ?? null;
    };
    for (const externalId of externalIds) {
      signal?.throwIfAborted();
      const hash = externalId.lastIndexOf('#');
      const repository = externalId.slice(0, hash);
      const number = externalId.slice(hash + 1);
      // A repository no longer configured is not this connection's any more.
      if (hash < 0 || !cfg.repositories.includes(repository) || !/^\d+$/.test(number)) {
        gone.push(externalId);
        continue;
      }
      const [owner = '', name = ''] = repository.split('/');
      const url = `${cfg.base_url}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}/${endpoint}/${number}`;
      const answer = await get(url, externalId);
      if (answer.status === 404 || answer.status === 410) {
        gone.push(externalId);
        continue;
      }
      if (answer.status < 200 || answer.status >= 300) throw errorFor(answer.status, answer.headers, answer.text, repository, redact);
      const item = jsonBody(answer, `github connector: unreadable JSON from GitHub for '${externalId}'`);
      if (!isItem(item)) {
        throw new Permanent(`github connector: unexpected response for '${externalId}': expected the item with that number`);
      }
      // Transferred to another repository: GitHub redirects to the issue there, which has its
      // number there (another, as a rule): gone from this one. An item naming another repository
      // that is the configured one renamed is no transfer.
      const home = typeof item.repository_url === 'string' ? item.repository_url.toLowerCase() : null;
      const elsewhere = home !== null && !home.endsWith(`/repos/${repository.toLowerCase()}`) && home !== (await currentUrl(repository));
      if (elsewhere || (resource === 'issues' && 'pull_request' in item)) {
        gone.push(externalId);
        continue;
      }
      if (String(item.number) !== number) {
        // Redirected to another number of the same repository (an issue transferred away and back
        // has a new number there; GitHub sends the old one to it): the item lives on under that
        // number, which the listing serves, and this one is gone. Not redirected, it is a wrong answer.
        if (answer.url !== url) {
          gone.push(externalId);
          continue;
        }
        throw new Permanent(`github connector: unexpected response for '${externalId}': expected the item with that number`);
      }
      const updatedAt = typeof item.updated_at === 'string' ? item.updated_at : null;
      alive.push({ externalId, updatedAt, data: item, partition: repository });
    }
    return { alive, gone };
  },
};
