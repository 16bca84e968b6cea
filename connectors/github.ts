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
// Paging follows the `Link` header's rel="next" URL exactly as GitHub returns it (GitHub's next
// URLs often have another shape than the first request, e.g. /repositories/<id>/issues?page=2),
// parsed per RFC 8288. Repositories are fetched one after another: the page token is base64url
// JSON { repo: index into `repositories`, url: the next URL, or null for that repository's first
// page }. Link and token URLs must share the origin of `base_url`, so the token is never sent
// elsewhere. The token never appears in an error message either: provider text is redacted
// (the exact token and any `Bearer …`/`token …` value) before it is cut to 500 characters.
//
// Bounds: `since` is the issues endpoint's own parameter. Pulls have none: they are listed newest
// first (`direction=desc`) and the first pull request older than `since` ends that repository's
// paging; a newest-first pass longer than one page then reads the head once more (a catch-up pass
// down to the newest change its first page showed), because items changed while it paged moved
// to the head, out of the pages ahead. `until` (exclusive) has no parameter on either endpoint:
// items changed at or after it are dropped; issues are oldest first, so there the first such item
// ends the repository's paging.
//
// Conditional requests: the ETag of a repository's first page travels in the page tokens and is
// returned (`validators`) with the repository's last page, for the activity to store in the same
// transaction; the next incremental pass sends it as If-None-Match, and a 304 ends that
// repository's part of the pass. Every request goes through `providerGet` (provider-http.ts),
// the connectors' one HTTP path, which asks the shared rate budget first.
import { z } from 'zod';
import { isBareHttpUrl, parseConnectorConfig } from './config-errors';
import { GITHUB_RATE_LIMIT_HEADERS, providerGet, providerText, rateBudgetConfigSchema, type ProviderResponse } from './provider-http';
import {
  type ConnectorError,
  Permanent,
  RateLimited,
  Transient,
  type Connector,
  type ConnectorRecord,
  type FetchPageInput,
  type FetchPageResult,
  sinceOf,
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

/** The github credentials as JSON Schema (for the API's document): `{token}` of TOKEN_SHAPE. */
export const GITHUB_CREDENTIALS_DOC = {
  type: 'object',
  properties: { token: { type: 'string', pattern: TOKEN_SHAPE.source, minLength: 20, maxLength: 255, description: "A GitHub token (20–255 letters, digits, '_', '-' or '.')" } },
  required: ['token'],
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

/** What is wrong with github credentials (`{token}`), naming the key and never echoing the value, or null. */
export function githubCredentialsProblem(credentials: Record<string, unknown> | null): string | null {
  const token = credentials?.token;
  if (typeof token !== 'string' || token.trim() === '') return 'token: a non-empty GitHub token string is required';
  if (!TOKEN_SHAPE.test(token)) return `token: ${TOKEN_RULE}`;
  return null;
}

/** The token of a connection's credentials; throws `Permanent` (never echoing values) otherwise. */
function parseCredentials(credentials: Record<string, unknown> | null): string {
  const problem = githubCredentialsProblem(credentials);
  if (problem) throw new Permanent(`github connector: invalid credentials: ${problem}`);
  return credentials!.token as string;
}

// ---------------------------------------------------------------------------------------------
// Link header (RFC 8288)

/** One link of a `Link` header: its target (resolved against the base, when given) and params. */
export interface ParsedLink {
  url: string;
  /** Relation types, lower-cased (`rel="next last"` gives both). */
  rels: string[];
  /** Every parameter, names lower-cased, first occurrence wins (RFC 8288 §3). */
  params: Record<string, string>;
}

const isWs = (c: string | undefined) => c === ' ' || c === '\t';

/**
 * Parses a `Link` header per RFC 8288: `<URI-Reference>` followed by `; name[=value]` params,
 * values as tokens or quoted-strings (with `\` escapes), links separated by commas — commas and
 * semicolons inside `<…>` or quotes are part of the URL/value. Malformed links are skipped up to
 * the next top-level comma. Relative targets are resolved against `base` when given.
 */
export function parseLinkHeader(header: string | null | undefined, base?: string): ParsedLink[] {
  const links: ParsedLink[] = [];
  if (!header) return links;
  const s = header;
  let i = 0;

  /** Skips to just after the next top-level comma (error recovery). */
  const skipLink = () => {
    let quoted = false;
    let bracketed = false;
    for (; i < s.length; i++) {
      const c = s[i];
      if (quoted) {
        if (c === '\\') i++;
        else if (c === '"') quoted = false;
      } else if (bracketed) {
        if (c === '>') bracketed = false;
      } else if (c === '"') quoted = true;
      else if (c === '<') bracketed = true;
      else if (c === ',') {
        i++;
        return;
      }
    }
  };

  while (i < s.length) {
    while (i < s.length && (isWs(s[i]) || s[i] === ',')) i++;
    if (i >= s.length) break;
    if (s[i] !== '<') {
      skipLink();
      continue;
    }
    const end = s.indexOf('>', i + 1);
    if (end < 0) break;
    const target = s.slice(i + 1, end).trim();
    i = end + 1;
    const params: Record<string, string> = {};
    let ok = true;
    for (;;) {
      while (isWs(s[i])) i++;
      if (i >= s.length || s[i] === ',') break;
      if (s[i] !== ';') {
        ok = false;
        break;
      }
      i++;
      while (isWs(s[i])) i++;
      let name = '';
      while (i < s.length && !isWs(s[i]) && s[i] !== '=' && s[i] !== ';' && s[i] !== ',') name += s[i++];
      while (isWs(s[i])) i++;
      let value = '';
      if (s[i] === '=') {
        i++;
        while (isWs(s[i])) i++;
        if (s[i] === '"') {
          i++;
          let closed = false;
          while (i < s.length) {
            const c = s[i++];
            if (c === '\\' && i < s.length) value += s[i++];
            else if (c === '"') {
              closed = true;
              break;
            } else value += c;
          }
          if (!closed) ok = false;
        } else {
          while (i < s.length && !isWs(s[i]) && s[i] !== ';' && s[i] !== ',') value += s[i++];
        }
      }
      name = name.toLowerCase();
      if (name && !(name in params)) params[name] = value;
      if (!ok) break;
    }
    if (!ok) {
      skipLink();
      continue;
    }
    let url: string;
    try {
      url = base === undefined ? new URL(target).href : new URL(target, base).href;
    } catch {
      continue; // not a usable URL: ignore this link, keep the others
    }
    const rels = (params.rel ?? '').toLowerCase().split(/[ \t]+/).filter(Boolean);
    links.push({ url, rels, params });
  }
  return links;
}

/** The rel="next" target of a `Link` header, or null. */
export function nextLink(header: string | null | undefined, base?: string): string | null {
  return parseLinkHeader(header, base).find((link) => link.rels.includes('next'))?.url ?? null;
}

// ---------------------------------------------------------------------------------------------
// Page tokens

const tokenSchema = z.object({
  repo: z.number().int().min(0),
  url: z.string().nullable(),
  validator: z.object({ url: z.string(), etag: z.string() }).nullable().optional(),
  catchup: z.boolean().optional(),
  head: z.string().nullable().optional(),
});

/**
 * A decoded page token: which repository, the exact URL to fetch (null: its first page), and the
 * ETag of that repository's first page, carried to the repository's last page to be stored there.
 */
export interface GitHubPageToken {
  repo: number;
  url: string | null;
  validator?: { url: string; etag: string } | null;
  /** A newest-first listing's catch-up pass: its head again, down to `head` (see fetchPage). */
  catchup?: boolean;
  /** The newest `updated_at` the main pass's first page showed. */
  head?: string | null;
}

/** Encodes a page token (base64url JSON); only the fields set are written. */
export function encodeGitHubPageToken(token: GitHubPageToken): string {
  const body: GitHubPageToken = { repo: token.repo, url: token.url };
  if (token.validator) body.validator = token.validator;
  if (token.catchup) body.catchup = true;
  if (token.head) body.head = token.head;
  return Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
}

function decodePageToken(token: string, cfg: GitHubConfig): GitHubPageToken {
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    body = undefined;
  }
  const parsed = tokenSchema.safeParse(body);
  if (!parsed.success) throw new Permanent(`github connector: invalid page token '${token}'`);
  const { repo, url, validator, catchup, head } = parsed.data;
  if (repo >= cfg.repositories.length) {
    throw new Permanent(
      `github connector: page token names repository #${repo}, but only ${cfg.repositories.length} are configured`,
    );
  }
  if (url !== null) assertSameOrigin(url, cfg, 'page token');
  return { repo, url, validator: validator ?? null, catchup: catchup === true, head: head ?? null };
}

/** Refuses URLs outside `base_url`'s origin: we would be sending the token there. */
function assertSameOrigin(url: string, cfg: GitHubConfig, what: string): void {
  let origin: string;
  try {
    origin = new URL(url).origin;
  } catch {
    throw new Permanent(`github connector: invalid URL in ${what}: '${url}'`);
  }
  if (origin !== new URL(cfg.base_url).origin) {
    throw new Permanent(`github connector: refusing to follow ${what} URL '${url}' outside ${cfg.base_url}`);
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP

/** Seconds to wait per a `Retry-After` value (delta-seconds or an HTTP-date), or undefined. */
export function parseRetryAfter(value: string | null, nowMs: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - nowMs) / 1000));
}

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
  if (resource === 'issues' && since !== null) url.searchParams.set('since', since.toISOString());
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
  if (status === 401) return new Permanent('GitHub rejected the credentials (401)');
  if (status === 404) {
    return new Permanent(`github connector: repository '${repository}' not found (404), or the token cannot see it`);
  }
  if (status === 403 || status === 429) {
    const retryAfter = parseRetryAfter(headers.get('retry-after'));
    if (retryAfter !== undefined) {
      return new RateLimited(`github connector: secondary rate limit on '${repository}' (${status}), retry after ${retryAfter}s${detail}`, retryAfter);
    }
    if (headers.get('x-ratelimit-remaining')?.trim() === '0') {
      const resetHeader = headers.get('x-ratelimit-reset')?.trim() ?? '';
      const wait = /^\d+$/.test(resetHeader) ? Math.max(0, Math.ceil(Number(resetHeader) - Date.now() / 1000)) : undefined;
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

  partitions(config) {
    return [...parseGitHubConfig(config).repositories];
  },

  pageKey(token) {
    const body = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { repo?: unknown; url?: unknown; catchup?: unknown };
    const page = typeof body.url === 'string' ? body.url : `first page of repository #${String(body.repo)}`;
    return body.catchup === true ? `${page} (catch-up pass)` : page;
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

    const position: GitHubPageToken = pageToken === null ? { repo: 0, url: null } : decodePageToken(pageToken, cfg);
    const catchup = position.catchup === true;
    const repository = cfg.repositories[position.repo]!; // decodePageToken checked the index
    // Each repository is a partition with its own cursor.
    const since = sinceOf(input, repository);
    if (since !== null && (!(since instanceof Date) || Number.isNaN(since.getTime()))) {
      throw new Permanent(`github connector: invalid since ${String(since)}`);
    }
    const firstPage = position.url === null;
    const url = position.url ?? firstUrl(cfg, kind, repository, since);
    const nextRepository = () =>
      position.repo + 1 < cfg.repositories.length ? encodeGitHubPageToken({ repo: position.repo + 1, url: null }) : null;
    // Conditional requests only where an unchanged first page proves nothing is left to fetch: an
    // incremental pass without an upper bound (a full pass must see every record), and a catch-up
    // pass, against the ETag its own main pass saw.
    const etag = !firstPage
      ? undefined
      : catchup
        ? (position.validator?.etag ?? undefined)
        : since !== null && until == null
          ? validators?.get(url)?.etag
          : undefined;

    const answer: ProviderResponse = await providerGet(url, {
      headers: {
        Authorization: `Bearer ${token}`,
        Accept: 'application/vnd.github+json',
        'X-GitHub-Api-Version': API_VERSION,
        'User-Agent': USER_AGENT,
        ...(etag !== undefined && { 'If-None-Match': etag }),
      },
      secrets: [token],
      context: `github connector: fetching '${repository}'`,
      ...(policy ? { policy } : {}),
      ...(signal ? { signal } : {}),
      ...(budget ? { budget } : {}),
      rateLimitHeaders: GITHUB_RATE_LIMIT_HEADERS,
    });

    // Unchanged since the pass that stored the ETag (or, catching up, since this pass began):
    // nothing new in this repository.
    if (answer.status === 304 && etag !== undefined) {
      const keep = catchup && position.validator ? { validators: [{ ...position.validator, next: null }] } : {};
      return { records: [], nextPageToken: nextRepository(), notModified: true, completedPartitions: [repository], ...keep };
    }
    if (answer.status < 200 || answer.status >= 300) throw errorFor(answer.status, answer.headers, answer.text, repository, redact);

    let body: unknown;
    try {
      body = JSON.parse(answer.text);
    } catch {
      // A truncated body or a proxy's HTML page: worth another try.
      throw new Transient(`github connector: unreadable JSON from GitHub for '${repository}' (${answer.status})`);
    }
    if (!Array.isArray(body) || !body.every(isItem)) {
      throw new Permanent(`github connector: unexpected response for '${repository}' ${resource}: expected an array of items with a number`);
    }

    // A catch-up pass reads down to the main pass's head: everything changed since it began.
    const headMs = catchup && position.head ? Date.parse(position.head) : null;
    const sinceMs = headMs !== null && !Number.isNaN(headMs) ? Math.max(headMs, since?.getTime() ?? -Infinity) : since === null ? null : since.getTime();
    const untilMs = until == null ? null : until.getTime();
    // The order is the URL's own (a task resumed from a token of an older version keeps its order).
    // Oldest first (issues): items before `since` are skipped (the issues endpoint already leaves
    // them out), and once one item is at or after `until` every later one is too: the repository
    // has nothing more to serve. Newest first (pulls): items at or after `until` are skipped, and
    // the first item older than `since` ends the repository's paging.
    const descending = new URL(url).searchParams.get('direction') === 'desc';
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

    const next = ended ? null : nextLink(answer.headers.get('link'), answer.url);
    if (next !== null) assertSameOrigin(next, cfg, 'Link header');
    // The first page's ETag travels with the page tokens and is stored with the repository's last
    // page, so a 304 can only ever skip what an earlier pass stored in full. Not for a windowed pass.
    const received = answer.headers.get('etag');
    const validator = firstPage ? (received && until == null ? { url, etag: received } : null) : (position.validator ?? null);
    const head = firstPage && !catchup && descending ? newestUpdatedAt(body) : (position.head ?? null);
    if (next !== null) {
      return { records, nextPageToken: encodeGitHubPageToken({ repo: position.repo, url: next, validator, catchup, head }) };
    }
    // Pages of a newest-first listing shift while we page: an item changed meanwhile moves to the
    // head, out of the pages still ahead, and would be missed (and, in a full pass, deleted as
    // unseen). A pass that took more than one page therefore reads the head once more, down to the
    // newest change its first page showed; with its own ETag, an unchanged head costs one 304.
    if (descending && !catchup && !firstPage && until == null && head !== null) {
      return { records, nextPageToken: encodeGitHubPageToken({ repo: position.repo, url: null, validator, catchup: true, head }) };
    }
    return { records, nextPageToken: nextRepository(), completedPartitions: [repository], ...(validator && { validators: [{ ...validator, next: null }] }) };
  },
};
