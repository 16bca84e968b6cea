// A small local stand-in for the GitHub REST API (node:http on 127.0.0.1, port 0), covering what
// the github connector uses: GET /repos/{owner}/{repo}/{issues|pulls} and the
// /repositories/{id}/{issues|pulls} form GitHub uses in its Link headers, and one item by number
// (GET /repos/{owner}/{repo}/{issues|pulls}/{number}: 410 Gone for a deleted issue, 404 for a hidden
// item, 301 to its new place for an issue transferred to another repository). Like GitHub it:
// - requires `Authorization: Bearer <token>` (401 "Bad credentials" otherwise);
// - lists pull requests in the issues endpoint too (items with a `pull_request` key);
// - honours state, sort (updated|created), direction, per_page (default 30, max 100), page and,
//   for issues only, since (updated_at ≥ since);
// - answers ABSOLUTE Link URLs whose path differs from the first request
//   (http://127.0.0.1:PORT/repositories/<id>/issues?…&page=2), with rel="prev"/"next"/"last"/"first";
// - finds a repository by its owner and name ignoring letter case (octo/hello is Octo/Hello);
// - sends x-ratelimit-* headers on every answer;
// - sends an ETag with every listing, a digest of its body alone (not its Link header), and answers
//   304 (no body, no rate limit spent, the Link header as it is now) to a request whose
//   If-None-Match matches the page's body as it is now.
// With `app`, it also mints GitHub App installation tokens as GitHub does:
// POST /app/installations/{id}/access_tokens checks the app's JWT (RS256 signature against the
// app's public key, `iss` the app id; by GitHub's clock `iat` not in the future and `exp` in the
// future but at most 10 minutes away, each refused with GitHub's 401 message) and answers 201
// {token, expires_at}; a minted token is then accepted like `token` until it expires.
// Its clock (`setClockOffset`: GitHub's clock ahead of ours, or behind) is what every answer's
// `Date` header states, JWTs are checked against and minted tokens expire by.
// Every request is recorded, and `setFailure` makes the Nth request, or requests to a path,
// answer 401, 404, 403, a secondary or primary rate limit, a 5xx, or hang (for abort tests).
import { createHash, randomBytes, verify, type KeyObject } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { serve } from './fake-server';

/** One item as the fake serves it (the GitHub fields the connector and tests look at). */
export interface FakeGitHubItem extends Record<string, unknown> {
  id: number;
  number: number;
  title: string;
  state: 'open' | 'closed';
  created_at: string;
  updated_at: string;
}

/** A repository: its numeric id (for /repositories/{id}) and its issues and pull requests. */
export interface FakeRepoSpec {
  id?: number;
  /** How many plain issues to generate. */
  issues?: number;
  /** How many pull requests to generate (they share the number space with issues, as on GitHub). */
  pulls?: number;
}

/** Options of `startFakeGitHub`. */
export interface FakeGitHubOptions {
  /** The only token accepted (Bearer). Default 'ghp_fake_token_for_tests'. */
  token?: string;
  /** 'owner/name' → what the repository holds. */
  repos?: Record<string, FakeRepoSpec>;
  /** updated_at of the oldest item; each later one is one minute newer. Default 2025-01-01. */
  baseTime?: string;
  /** x-ratelimit-remaining sent on successful answers (default 4999). */
  rateLimitRemaining?: number;
  /**
   * A primary limit in fixed windows, as GitHub's: `limit` listings per `windowMs` from the first
   * request of a window, counted across every token; past it, 429 with remaining 0 and the reset.
   * x-ratelimit-remaining/-reset then state this window (reset in epoch seconds, rounded up).
   */
  budget?: { limit: number; windowMs: number };
  /** A GitHub App whose installations mint tokens (see the module comment). */
  app?: FakeGitHubApp;
}

/** The GitHub App of a fake: its id (the JWT's `iss`), its public key and its installations. */
export interface FakeGitHubApp {
  id: number | string;
  publicKey: KeyObject | string;
  installations: number[];
  /** Lifetime of a minted token (default 3600 s, as GitHub's). */
  tokenTtlSeconds?: number;
}

/** One installation token the fake minted. */
export interface FakeGitHubMint {
  installationId: number;
  token: string;
  expiresAt: string;
  /** The verified JWT's claims. */
  claims: { iss: unknown; iat: number; exp: number };
}

/** A recorded request. `url` is the path and query exactly as received. */
export interface FakeGitHubRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

/** What an injected failure answers. */
export type FakeGitHubFailure =
  | { kind: 'unauthorized' }
  | { kind: 'not_found' }
  /** 403 without any rate-limit signal. */
  | { kind: 'forbidden' }
  /** Secondary limit: `status` (default 403) with `Retry-After` (seconds or HTTP-date) when given. */
  | { kind: 'secondary'; status?: 403 | 429; retryAfter?: string | number }
  /** Primary limit: `status` (default 403), x-ratelimit-remaining 0 and x-ratelimit-reset `reset`. */
  | { kind: 'primary'; status?: 403 | 429; reset: number }
  | { kind: 'server_error'; status?: number }
  /** Never answers (until the client goes away or the server closes). */
  | { kind: 'hang' };

/** Which requests a failure applies to: the `nth` request (1-based, counting all), or a path. */
export interface FakeGitHubFailureMatch {
  nth?: number;
  /** A string matches a pathname prefix; a RegExp is tested against path + query. */
  path?: string | RegExp;
  /** How many matching requests fail (default: all of them). */
  times?: number;
}

/** A running fake. */
export interface FakeGitHub {
  /** e.g. http://127.0.0.1:PORT — use as the connector's `base_url`. */
  baseUrl: string;
  /** The accepted token. */
  token: string;
  /** Every request received, in order. */
  requests: FakeGitHubRequest[];
  /** 'owner/name' → { id, items } — what the fake serves (items in number order). */
  repos: Map<string, { id: number; items: FakeGitHubItem[] }>;
  /** Sets the injected failure (replacing any previous one); null clears it. */
  setFailure(failure: (FakeGitHubFailure & FakeGitHubFailureMatch) | null): void;
  /** Sets x-ratelimit-remaining on successful answers (e.g. 0: a fine page, but the last one). */
  setRateLimitRemaining(remaining: number): void;
  /**
   * Changes item `number` of `repo` as an edit on GitHub would: a new title and `updated_at`
   * (default: one minute after the newest item). Returns the item.
   */
  touch(repo: string, number: number, updatedAt?: string): FakeGitHubItem;
  /** Deletes issue `number` of `repo` (GitHub cannot delete pull requests): listings leave it out, GET by number answers 410. */
  remove(repo: string, number: number): void;
  /**
   * Hides item `number` of `repo` as GitHub hides a spam account's issues and pull requests, or
   * those a change of access takes out of sight: listings leave it out at once (every later item
   * moves up one position), and GET by number answers 404.
   */
  hide(repo: string, number: number): void;
  /** Adds an item to `repo` (the next number) changed at `updatedAt`; a pull request when `pull`. */
  create(repo: string, updatedAt: string, pull?: boolean): FakeGitHubItem;
  /**
   * Transfers issue `number` of `from` to `to` as GitHub does: it leaves `from`'s listings, takes the
   * next number of `to` (changed at `updatedAt`, naming `to` in its `repository_url`), and GET of
   * the old number answers 301 to it. Returns the item as it is now.
   */
  transfer(from: string, number: number, to: string, updatedAt: string): FakeGitHubItem;
  /** Adds an empty repository (for a config that names it later). */
  addRepo(fullName: string, id: number): void;
  /** Called after each listing answered (200 or 304) with the request's 1-based number and URL. */
  afterServe: ((n: number, url: URL) => void) | null;
  /** Awaited before each request is answered (or counted), with its URL: to change things while a request is in flight. */
  beforeServe: ((url: URL) => Promise<void> | void) | null;
  /** With `app`: every installation token minted, in order. */
  mints: FakeGitHubMint[];
  /** With `app`: token requests refused (bad JWT: signature, issuer or expiry; unknown installation). */
  refusedMints: number;
  /** With `app`: while set, a token request waits for it before minting (to hold a mint in flight). */
  mintGate: Promise<void> | null;
  /** With `app`: changes a minted token's lifetime from now on (e.g. to make the next one expire within the margin). */
  setTokenTtl(seconds: number): void;
  /** Sets how far GitHub's clock is ahead of ours (negative: behind); 0 at start. */
  setClockOffset(ms: number): void;
  /** With `budget`: how many requests were answered 429 because the window's budget was spent. */
  readonly tooMany: number;
  /** With `budget`: how many windows were opened so far. */
  readonly windows: number;
  close(): Promise<void>;
}

const MINUTE_MS = 60_000;

/** Generates a repository's items: issues and PRs interleaved, numbered 1…n. */
function generateItems(fullName: string, repoId: number, spec: FakeRepoSpec, baseMs: number): FakeGitHubItem[] {
  let issues = spec.issues ?? 0;
  let pulls = spec.pulls ?? 0;
  const items: FakeGitHubItem[] = [];
  const total = issues + pulls;
  for (let number = 1; number <= total; number++) {
    // Alternate while both remain, so PRs are spread over the pages of the issues endpoint.
    const isPull = pulls > 0 && (issues === 0 || number % 2 === 0);
    if (isPull) pulls--;
    else issues--;
    // updated_at order differs from number order (newest numbers were updated first), so a
    // client relying on number order would notice.
    const updatedMs = baseMs + (total - number) * MINUTE_MS;
    const item: FakeGitHubItem = {
      id: repoId * 10_000 + number,
      number,
      title: `${isPull ? 'PR' : 'Issue'} ${number} of ${fullName}`,
      state: number % 3 === 0 ? 'closed' : 'open',
      created_at: new Date(baseMs - number * MINUTE_MS).toISOString(),
      updated_at: new Date(updatedMs).toISOString(),
      html_url: `https://github.com/${fullName}/${isPull ? 'pull' : 'issues'}/${number}`,
    };
    if (isPull) item.pull_request = { url: `https://api.github.com/repos/${fullName}/pulls/${number}` };
    items.push(item);
  }
  return items;
}

/** Starts the fake on 127.0.0.1 (random port). */
export async function startFakeGitHub(opts: FakeGitHubOptions = {}): Promise<FakeGitHub> {
  const token = opts.token ?? 'ghp_fake_token_for_tests';
  const baseMs = Date.parse(opts.baseTime ?? '2025-01-01T00:00:00Z');
  const repos = new Map<string, { id: number; items: FakeGitHubItem[] }>();
  /** Deleted issues, as 'owner/name#number'. */
  const deleted = new Set<string>();
  /** Hidden items, as 'owner/name#number'. */
  const hidden = new Set<string>();
  /** Transferred issues, 'owner/name#number' → where they are now. */
  const transferred = new Map<string, { repoId: number; number: number }>();
  let nextId = 12345;
  for (const [fullName, spec] of Object.entries(opts.repos ?? {})) {
    const id = spec.id ?? nextId++;
    repos.set(fullName, { id, items: generateItems(fullName, id, spec, baseMs) });
  }
  /** The repository `name` names, as GitHub finds it: its owner and name ignoring letter case. */
  const named = (name: string) => [...repos.keys()].find((key) => key.toLowerCase() === name.toLowerCase()) ?? name;
  const requests: FakeGitHubRequest[] = [];
  let failure: (FakeGitHubFailure & FakeGitHubFailureMatch) | null = null;
  let failuresFired = 0;
  let rateLimitRemaining = opts.rateLimitRemaining ?? 4999;
  const budget = opts.budget;
  let windowEnds = 0;
  let windowCount = 0;
  let windows = 0;
  let tooMany = 0;
  let baseUrl = '';
  const mints: FakeGitHubMint[] = [];
  let refusedMints = 0;
  let tokenTtl = opts.app?.tokenTtlSeconds ?? 3600;
  let clockOffsetMs = 0;
  /** GitHub's clock. */
  const now = () => Date.now() + clockOffsetMs;
  /** Whether `authorization` carries the static token or an unexpired minted one. */
  const authorized = (authorization: string | undefined) => {
    if (authorization === `Bearer ${token}`) return true;
    return mints.some((m) => authorization === `Bearer ${m.token}` && Date.parse(m.expiresAt) > now());
  };
  const NOT_DECODED = 'A JSON web token could not be decoded';
  /** The claims of a JWT signed RS256 by the app's key, or GitHub's message refusing it. */
  const verifiedClaims = (authorization: string | undefined, app: FakeGitHubApp): FakeGitHubMint['claims'] | { refused: string } => {
    const jwt = /^Bearer (.+)$/.exec(authorization ?? '')?.[1];
    const [header, payload, signature] = jwt?.split('.') ?? [];
    if (!header || !payload || !signature) return { refused: NOT_DECODED };
    try {
      if ((JSON.parse(Buffer.from(header, 'base64url').toString()) as { alg?: string }).alg !== 'RS256') return { refused: NOT_DECODED };
      if (!verify('sha256', Buffer.from(`${header}.${payload}`), app.publicKey, Buffer.from(signature, 'base64url'))) return { refused: NOT_DECODED };
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as FakeGitHubMint['claims'];
      const seconds = Math.floor(now() / 1000);
      if (String(claims.iss) !== String(app.id)) return { refused: NOT_DECODED };
      // GitHub's rules and words for the JWT's times, by its own clock.
      if (!(claims.iat <= seconds)) return { refused: "'Issued at' claim ('iat') must be an Integer representing a time in the past" };
      if (!(claims.exp > seconds)) return { refused: "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires" };
      if (claims.exp - seconds > 600) return { refused: "'Expiration time' claim ('exp') is too far in the future" };
      return claims;
    } catch {
      return { refused: NOT_DECODED };
    }
  };

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, {
      date: new Date(now()).toUTCString(),
      'content-type': 'application/json; charset=utf-8',
      'x-github-api-version-selected': '2022-11-28',
      ...headers,
    });
    res.end(JSON.stringify(body));
  };
  const rateHeaders = (remaining: number, reset: number) => ({
    'x-ratelimit-limit': '5000',
    'x-ratelimit-remaining': String(remaining),
    'x-ratelimit-reset': String(reset),
    'x-ratelimit-used': String(5000 - remaining),
    'x-ratelimit-resource': 'core',
  });
  const nowReset = () => Math.floor(now() / 1000) + 3600;

  const matches = (f: FakeGitHubFailureMatch, n: number, pathname: string, pathAndQuery: string) => {
    if (f.times !== undefined && failuresFired >= f.times) return false;
    if (f.nth !== undefined && f.nth !== n) return false;
    if (typeof f.path === 'string' && !pathname.startsWith(f.path)) return false;
    if (f.path instanceof RegExp && !f.path.test(pathAndQuery)) return false;
    return true;
  };

  const answerFailure = (res: ServerResponse, f: FakeGitHubFailure) => {
    const docs = 'https://docs.github.com/rest';
    switch (f.kind) {
      case 'unauthorized':
        return send(res, 401, { message: 'Bad credentials', documentation_url: docs, status: '401' });
      case 'not_found':
        return send(res, 404, { message: 'Not Found', documentation_url: docs, status: '404' });
      case 'forbidden':
        return send(res, 403, { message: 'Resource not accessible by personal access token', documentation_url: docs, status: '403' }, rateHeaders(rateLimitRemaining, nowReset()));
      case 'secondary':
        return send(
          res,
          f.status ?? 403,
          { message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.', documentation_url: docs },
          { ...rateHeaders(rateLimitRemaining, nowReset()), ...(f.retryAfter !== undefined ? { 'retry-after': String(f.retryAfter) } : {}) },
        );
      case 'primary':
        return send(
          res,
          f.status ?? 403,
          { message: 'API rate limit exceeded for user ID 1.', documentation_url: docs },
          rateHeaders(0, f.reset),
        );
      case 'server_error':
        return send(res, f.status ?? 500, { message: 'Server Error' });
      case 'hang':
        return; // the response is left open
    }
  };

  const server = await serve((req, res) => {
    const before = fake.beforeServe;
    if (before === null) return answer(req, res);
    void Promise.resolve(before(new URL(req.url ?? '/', baseUrl))).then(() => answer(req, res));
  });

  function answer(req: IncomingMessage, res: ServerResponse): void {
    const received = req.url ?? '/';
    requests.push({ method: req.method ?? 'GET', url: received, headers: req.headers });
    const n = requests.length;
    const url = new URL(received, baseUrl);

    if (failure && matches(failure, n, url.pathname, received)) {
      failuresFired++;
      return answerFailure(res, failure);
    }
    const mint = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(url.pathname);
    if (mint && req.method === 'POST' && opts.app) {
      const claims = verifiedClaims(req.headers.authorization, opts.app);
      if ('refused' in claims) {
        refusedMints++;
        return send(res, 401, { message: claims.refused, documentation_url: 'https://docs.github.com/rest' });
      }
      const installationId = Number(mint[1]);
      if (!opts.app.installations.includes(installationId)) {
        refusedMints++;
        return send(res, 404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      }
      void (async () => {
        if (fake.mintGate) await fake.mintGate;
        const minted: FakeGitHubMint = {
          installationId,
          token: `ghs_${randomBytes(27).toString('base64url').replace(/[-_]/g, 'x')}`,
          expiresAt: new Date(Math.floor(now() / 1000 + tokenTtl) * 1000).toISOString().replace('.000Z', 'Z'),
          claims,
        };
        mints.push(minted);
        send(res, 201, { token: minted.token, expires_at: minted.expiresAt, permissions: { issues: 'read', pull_requests: 'read' }, repository_selection: 'all' });
      })();
      return;
    }
    if (!authorized(req.headers.authorization)) {
      return send(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest', status: '401' });
    }
    if (req.method !== 'GET') return send(res, 404, { message: 'Not Found' });

    // One item: /repos/{owner}/{name}/{issues|pulls}/{number} or /repositories/{id}/{issues|pulls}/{number}
    const single = /^\/repos\/([^/]+)\/([^/]+)\/(issues|pulls)\/(\d+)$/.exec(url.pathname);
    const singleById = /^\/repositories\/(\d+)\/(issues|pulls)\/(\d+)$/.exec(url.pathname);
    if (single || singleById) {
      const fullName = single
        ? named(`${decodeURIComponent(single[1]!)}/${decodeURIComponent(single[2]!)}`)
        : ([...repos].find(([, r]) => r.id === Number(singleById![1]))?.[0] ?? '');
      const endpoint = single ? single[3]! : singleById![2]!;
      const number = Number(single ? single[4] : singleById![3]);
      const item = repos.get(fullName)?.items.find((i) => i.number === number && (endpoint === 'issues' || 'pull_request' in i));
      const movedTo = transferred.get(`${fullName}#${number}`);
      if (!item && movedTo && endpoint === 'issues') {
        res.writeHead(301, { location: `${baseUrl}/repositories/${movedTo.repoId}/issues/${movedTo.number}`, 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify({ message: 'Moved Permanently' }));
        return;
      }
      if (!item) {
        const gone = deleted.has(`${fullName}#${number}`);
        return send(res, gone ? 410 : 404, { message: gone ? 'This issue was deleted' : 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      }
      const { pull_request: _omit, ...pr } = item;
      return send(res, 200, endpoint === 'issues' ? item : pr, rateHeaders(rateLimitRemaining, nowReset()));
    }

    // /repos/{owner}/{name}/{issues|pulls} or /repositories/{id}/{issues|pulls}
    let repo: { id: number; items: FakeGitHubItem[] } | undefined;
    let endpoint: string | undefined;
    const byName = /^\/repos\/([^/]+)\/([^/]+)\/(issues|pulls)$/.exec(url.pathname);
    const byId = /^\/repositories\/(\d+)\/(issues|pulls)$/.exec(url.pathname);
    if (byName) {
      repo = repos.get(named(`${decodeURIComponent(byName[1]!)}/${decodeURIComponent(byName[2]!)}`));
      endpoint = byName[3];
    } else if (byId) {
      repo = [...repos.values()].find((r) => r.id === Number(byId[1]));
      endpoint = byId[2];
    }
    if (!repo || !endpoint) return send(res, 404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });

    const q = url.searchParams;
    const state = q.get('state') ?? 'open';
    const sort = q.get('sort') ?? 'created';
    const direction = q.get('direction') ?? 'desc';
    const perPage = Math.min(100, Math.max(1, Number(q.get('per_page') ?? 30) || 30));
    const page = Math.max(1, Number(q.get('page') ?? 1) || 1);
    const since = endpoint === 'issues' ? q.get('since') : null;
    const sinceMs = since === null ? null : Date.parse(since);
    if (sinceMs !== null && Number.isNaN(sinceMs)) {
      return send(res, 422, { message: 'Validation Failed', errors: [{ field: 'since', code: 'invalid' }] });
    }

    const field = sort === 'updated' ? 'updated_at' : 'created_at';
    const listed = repo.items
      .filter((item) => endpoint === 'issues' || 'pull_request' in item)
      .filter((item) => state === 'all' || item.state === state)
      .filter((item) => sinceMs === null || Date.parse(item.updated_at) >= sinceMs)
      .sort((a, b) => (Date.parse(a[field]) - Date.parse(b[field])) * (direction === 'asc' ? 1 : -1) || a.number - b.number)
      .map((item) => {
        if (endpoint === 'issues') return item;
        // The pulls endpoint serves PR objects (no `pull_request` key of their own).
        const { pull_request: _omit, ...pr } = item;
        return pr;
      });
    const lastPage = Math.max(1, Math.ceil(listed.length / perPage));
    const body = listed.slice((page - 1) * perPage, page * perPage);

    // GitHub's Link URLs: absolute, /repositories/{id}/… form, the request's params plus page.
    const pageUrl = (p: number) => {
      const u = new URL(`${baseUrl}/repositories/${repo.id}/${endpoint}`);
      for (const [key, value] of q) if (key !== 'page') u.searchParams.append(key, value);
      u.searchParams.set('page', String(p));
      return u.href;
    };
    const links: string[] = [];
    if (page > 1) links.push(`<${pageUrl(page - 1)}>; rel="prev"`);
    if (page < lastPage) links.push(`<${pageUrl(page + 1)}>; rel="next"`, `<${pageUrl(lastPage)}>; rel="last"`);
    if (page > 1) links.push(`<${pageUrl(1)}>; rel="first"`);

    // GitHub's ETag is a digest of the body alone: a page whose items are unchanged keeps its ETag
    // (and answers 304) while its Link header changes, e.g. a last page the listing grew behind.
    const etag = `W/"${createHash('sha1').update(JSON.stringify(body)).digest('hex')}"`;
    const linkHeader: Record<string, string> = links.length > 0 ? { link: links.join(', ') } : {};
    const served = () => fake.afterServe?.(n, url);
    /** With `budget`: the window as it stands now (a new one opened when the last has ended), without spending from it. */
    const currentWindow = () => {
      const at = now();
      if (at >= windowEnds) {
        windowEnds = at + budget!.windowMs;
        windowCount = 0;
        windows += 1;
        rateLimitRemaining = budget!.limit;
      }
      return Math.ceil(windowEnds / 1000);
    };
    if (req.headers['if-none-match'] === etag) {
      // GitHub: a 304 to a conditional request does not count against the rate limit; it carries the
      // Link header as it is now, and the rate-limit headers of the window it was answered in.
      const reset = budget ? currentWindow() : nowReset();
      res.writeHead(304, { date: new Date(now()).toUTCString(), etag, ...linkHeader, ...rateHeaders(rateLimitRemaining, reset) });
      res.end();
      served();
      return;
    }
    let reset = nowReset();
    if (budget) {
      reset = currentWindow();
      if (windowCount >= budget.limit) {
        tooMany += 1;
        send(res, 429, { message: 'API rate limit exceeded', documentation_url: 'https://docs.github.com/rest' }, rateHeaders(0, reset));
        served();
        return;
      }
      windowCount += 1;
      rateLimitRemaining = budget.limit - windowCount;
    } else if (rateLimitRemaining > 0) rateLimitRemaining--;
    send(res, 200, body, {
      ...rateHeaders(rateLimitRemaining, reset),
      etag,
      ...linkHeader,
    });
    served();
  }

  baseUrl = server.url;

  const fake: FakeGitHub = {
    baseUrl,
    token,
    requests,
    repos,
    afterServe: null,
    beforeServe: null,
    mintGate: null,
    mints,
    get refusedMints() {
      return refusedMints;
    },
    setTokenTtl(seconds) {
      tokenTtl = seconds;
    },
    setClockOffset(ms) {
      clockOffsetMs = ms;
    },
    get tooMany() {
      return tooMany;
    },
    get windows() {
      return windows;
    },
    touch(repo, number, updatedAt) {
      const items = repos.get(repo)!.items;
      const item = items.find((i) => i.number === number)!;
      const newest = Math.max(...items.map((i) => Date.parse(i.updated_at)));
      item.updated_at = updatedAt ?? new Date(newest + MINUTE_MS).toISOString();
      item.title = `${item.title} (edited)`;
      return item;
    },
    remove(repo, number) {
      const items = repos.get(repo)!.items;
      const at = items.findIndex((i) => i.number === number);
      if (at < 0 || 'pull_request' in items[at]!) throw new Error(`fake github: ${repo}#${number} is no issue to delete`);
      items.splice(at, 1);
      deleted.add(`${repo}#${number}`);
    },
    hide(repo, number) {
      const items = repos.get(repo)!.items;
      const at = items.findIndex((i) => i.number === number);
      if (at < 0) throw new Error(`fake github: ${repo}#${number} is no item to hide`);
      items.splice(at, 1);
      hidden.add(`${repo}#${number}`);
    },
    create(repo, updatedAt, pull = false) {
      const entry = repos.get(repo)!;
      const number = Math.max(0, ...entry.items.map((i) => i.number), ...[...deleted, ...hidden, ...transferred.keys()].filter((d) => d.startsWith(`${repo}#`)).map((d) => Number(d.slice(repo.length + 1)))) + 1;
      const item: FakeGitHubItem = {
        id: entry.id * 10_000 + number,
        number,
        title: `${pull ? 'PR' : 'Issue'} ${number} of ${repo}`,
        state: 'open',
        created_at: updatedAt,
        updated_at: updatedAt,
        html_url: `https://github.com/${repo}/${pull ? 'pull' : 'issues'}/${number}`,
      };
      if (pull) item.pull_request = { url: `https://api.github.com/repos/${repo}/pulls/${number}` };
      entry.items.push(item);
      return item;
    },
    transfer(from, number, to, updatedAt) {
      const source = repos.get(from)!.items;
      const at = source.findIndex((i) => i.number === number);
      if (at < 0 || 'pull_request' in source[at]!) throw new Error(`fake github: ${from}#${number} is no issue to transfer`);
      const [old] = source.splice(at, 1);
      const moved = fake.create(to, updatedAt);
      Object.assign(moved, { title: old!.title, state: old!.state, created_at: old!.created_at, repository_url: `${baseUrl}/repos/${to}` });
      transferred.set(`${from}#${number}`, { repoId: repos.get(to)!.id, number: moved.number });
      return moved;
    },
    addRepo(fullName, id) {
      repos.set(fullName, { id, items: [] });
    },
    setFailure(next) {
      failure = next;
      failuresFired = 0;
    },
    setRateLimitRemaining(remaining) {
      rateLimitRemaining = remaining;
    },
    close: () => server.close(),
  };
  return fake;
}

/**
 * Runs `change` once, while the first request to `fake` whose path starts with `pathPrefix` (any
 * request: '') is in flight, before it is answered; answers whether it ran.
 */
export function onceBeforeServe(fake: FakeGitHub, pathPrefix: string, change: () => Promise<unknown>): () => boolean {
  let pending: (() => Promise<unknown>) | null = change;
  fake.beforeServe = async (url) => {
    if (!url.pathname.startsWith(pathPrefix)) return;
    const run = pending;
    pending = null;
    await run?.();
  };
  return () => pending === null;
}
