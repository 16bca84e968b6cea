// Tests of the github connector against a local fake GitHub (test/helpers/fake-github.ts)
// on 127.0.0.1: paging by Link, PRs in the issues endpoint, `since`, several repositories, and the
// mapping of 401/403/404/429/5xx/network failures and aborts to the typed connector errors. No
// database or Temporal (the shared globalSetup still starts Postgres; these tests ignore it).
import type { ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { encodeGitHubPageToken, githubConnector } from '../connectors/github';
import { nextLink, parseLinkHeader } from '../connectors/link-header';
import { parseRetryAfter } from '../connectors/provider-http';
import { getConnector } from '../connectors/registry';
import { ConnectorError, Permanent, RateLimited, Transient, type FetchPageResult } from '../connectors/types';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { serve } from './helpers/fake-server';

const TOKEN = 'ghp_S3cr3tT0kenValue_1234567890abcdef';

type Config = Record<string, unknown>;

let gh: FakeGitHub;

beforeEach(async () => {
  gh = await startFakeGitHub({
    token: TOKEN,
    repos: {
      'octo/hello': { id: 12345, issues: 7, pulls: 3 },
      'octo/world': { id: 67890, issues: 2, pulls: 2 },
    },
  });
});

afterEach(async () => {
  await gh.close();
});

const cfg = (extra: Config = {}): Config => ({ base_url: gh.baseUrl, repositories: ['octo/hello'], per_page: 3, ...extra });

function page(
  config: Config,
  resource: string,
  pageToken: string | null = null,
  since: Date | null = null,
  opts: { signal?: AbortSignal; credentials?: Record<string, unknown> | null; until?: Date | null } = {},
): Promise<FetchPageResult> {
  return githubConnector.fetchPage({
    resource,
    since,
    until: opts.until ?? null,
    pageToken,
    config,
    credentials: opts.credentials === undefined ? { token: TOKEN } : opts.credentials,
    ...(opts.signal ? { signal: opts.signal } : {}),
    // The opt-in for this file's fake GitHub on 127.0.0.1 (PROVIDER_ALLOW_PRIVATE).
    policy: TEST_PROVIDER_POLICY,
  });
}

/** Pages through one resource; returns every page, in order. */
async function pass(config: Config, resource: string, since: Date | null = null, until: Date | null = null): Promise<FetchPageResult[]> {
  const pages: FetchPageResult[] = [];
  let token: string | null = null;
  do {
    const result: FetchPageResult = await page(config, resource, token, since, { until });
    pages.push(result);
    token = result.nextPageToken;
  } while (token !== null && pages.length < 100);
  return pages;
}

/** The error `promise` rejects with (fails the test if it resolves). */
async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

const pathOf = (url: string) => new URL(url, 'http://x').pathname;
const queryOf = (url: string) => new URL(url, 'http://x').searchParams;
/** Ids in order of first appearance (keyset paging serves the item at each page boundary twice). */
const unique = (ids: string[]) => [...new Set(ids)];

/** What GitHub holds for `repo`, as the fake serves it: items sorted by updated_at ascending. */
function expected(repo: string, kind: 'issues' | 'pulls', sinceMs: number | null = null, untilMs: number | null = null) {
  return gh.repos
    .get(repo)!
    .items.filter((item) => ('pull_request' in item) === (kind === 'pulls'))
    .filter((item) => sinceMs === null || Date.parse(item.updated_at) >= sinceMs)
    .filter((item) => untilMs === null || Date.parse(item.updated_at) < untilMs)
    .sort((a, b) => Date.parse(a.updated_at) - Date.parse(b.updated_at))
    .map((item) => `${repo}#${item.number}`);
}

// ---------------------------------------------------------------------------------------------

describe('github connector: paging', () => {
  it('pages issues by keyset: each next page starts at the last change time served (inclusive)', async () => {
    const pages = await pass(cfg(), 'issues');
    // 7 issues + 3 PRs on the issues endpoint at distinct minutes, 3 per page: each page after the
    // first starts at the previous page's last item, so five pages serve the ten items.
    expect(pages).toHaveLength(5);
    expect(gh.requests).toHaveLength(5);
    const [first, ...rest] = gh.requests;
    expect(pathOf(first!.url)).toBe('/repos/octo/hello/issues');
    expect(Object.fromEntries(queryOf(first!.url))).toEqual({ state: 'all', sort: 'updated', direction: 'asc', per_page: '3' });
    const byTime = [...gh.repos.get('octo/hello')!.items].sort((a, b) => Date.parse(a.updated_at) - Date.parse(b.updated_at));
    // Page k + 1 asks from the updated_at of the last item of page k (items 3k − 1 in time order, 0-based: 2, 4, 6, 8).
    expect(rest.map((r) => queryOf(r.url).get('since'))).toEqual([2, 4, 6, 8].map((i) => byTime[i]!.updated_at.replace('.000Z', 'Z')));
    expect(rest.every((r) => pathOf(r.url) === '/repos/octo/hello/issues' && !queryOf(r.url).has('page'))).toBe(true);

    for (const request of gh.requests) {
      expect(request.method).toBe('GET');
      expect(request.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(request.headers.accept).toBe('application/vnd.github+json');
      expect(request.headers['x-github-api-version']).toBe('2022-11-28');
      expect(request.headers['user-agent']).toMatch(/synctide/);
    }

    const ids = unique(pages.flatMap((p) => p.records.map((r) => r.externalId)));
    expect(ids).toEqual(expected('octo/hello', 'issues'));
    expect(ids).toHaveLength(7);
    expect(pages.at(-1)!.nextPageToken).toBeNull();
    expect(pages.at(-1)!.completedPartitions).toEqual(['octo/hello']);
    expect(pages.flatMap((p) => p.records).every((r) => r.partition === 'octo/hello')).toBe(true);
  });

  it('pages by number within one second when a whole page shares it, and holds the cursor at that second', async () => {
    for (const n of [1, 3, 5, 7, 8]) gh.touch('octo/hello', n, '2025-02-01T00:00:00Z');
    const pages = await pass(cfg(), 'issues', new Date('2025-02-01T00:00:00Z'));
    // Page 2 within the second is followed by page 1 asked again with its ETag (an issue that left
    // the second meanwhile would have shifted one onto it): unchanged, a 304.
    expect(gh.requests.map((r) => [queryOf(r.url).get('since'), queryOf(r.url).get('page')])).toEqual([
      ['2025-02-01T00:00:00Z', null],
      ['2025-02-01T00:00:00Z', '2'],
      ['2025-02-01T00:00:00Z', null],
    ]);
    expect(gh.requests[2]!.headers['if-none-match']).toBeDefined();
    expect(pages[2]!.notModified).toBe(true);
    expect(unique(pages.flatMap((p) => p.records.map((r) => r.externalId))).sort()).toEqual(['octo/hello#1', 'octo/hello#3', 'octo/hello#5', 'octo/hello#7', 'octo/hello#8']);
    expect(pages[1]!.holdCursors).toEqual([{ partition: 'octo/hello', at: '2025-02-01T00:00:00Z' }]);
    expect(pages[0]!.holdCursors).toBeUndefined();
  });

  it('fails with Permanent instead of paging forever when a server repeats a page numbered within one second, page after page', async () => {
    for (const n of [1, 3, 5, 7, 8]) gh.touch('octo/hello', n, '2025-02-01T00:00:00Z');
    gh.setFailure(null);
    const since = new Date('2025-02-01T00:00:00Z');
    const first = await page(cfg(), 'issues', null, since);
    let next = first.nextPageToken!;
    expect(queryOf(JSON.parse(Buffer.from(next, 'base64url').toString('utf8')).url).get('page')).toBe('2');
    // Each next page answered as the first again, as a server ignoring `page` would serve it: one
    // such page may be a listing that shifted back by a page (issues edited into that second ahead
    // of it), so the pass goes on; three in a row fail the task.
    let repeatedPages = 0;
    let err: Error | undefined;
    while (err === undefined && repeatedPages < 10) {
      const token = JSON.parse(Buffer.from(next, 'base64url').toString('utf8'));
      const again = encodeGitHubPageToken({ ...token, url: token.url.replace(/([?&])page=\d+/, '$1page=1') });
      repeatedPages += 1;
      try {
        next = (await page(cfg(), 'issues', again, since)).nextPageToken!;
      } catch (e) {
        err = e as Error;
      }
    }
    expect(repeatedPages).toBe(3);
    expect(err).toBeInstanceOf(Permanent);
    expect(err!.message).toMatch(/repeats the previous page \(3 pages in a row\)/);
  });

  it('follows Link rel="next" of pull requests exactly, across pages whose URLs differ in shape from the first', async () => {
    await pass(cfg({ per_page: 1 }), 'pull_requests');
    // (Leaving out the conditional requests: the page before asked again, and the head once more.)
    const [first, second, third] = gh.requests.filter((r) => r.headers['if-none-match'] === undefined);
    expect(pathOf(first!.url)).toBe('/repos/octo/hello/pulls');
    // The next pages are GitHub's /repositories/{id}/… URLs, fetched as given.
    expect([second, third].map((r) => `${pathOf(r!.url)}?page=${queryOf(r!.url).get('page')}`)).toEqual([
      '/repositories/12345/pulls?page=2',
      '/repositories/12345/pulls?page=3',
    ]);
  });

  it('excludes pull requests from issues and keeps the whole item as data', async () => {
    const records = (await pass(cfg(), 'issues')).flatMap((p) => p.records);
    expect(unique(records.map((r) => r.externalId)).length).toBe(7);
    for (const record of records) {
      expect(record.data).not.toHaveProperty('pull_request');
      expect(record.data.title).toMatch(/^Issue /);
      expect(record.updatedAt).toBe(record.data.updated_at);
      expect(record.externalId).toBe(`octo/hello#${String(record.data.number)}`);
    }
    // Some page held only PRs or a mix: the PRs were dropped, not the page.
    expect(gh.requests.length).toBe(5);
  });

  it('serves pull_requests from the pulls endpoint, newest first', async () => {
    const pages = await pass(cfg({ per_page: 2 }), 'pull_requests');
    // Two pages, page 1 asked again once page 2 was read (nothing moved up onto it: a 304 to its
    // ETag), then the head once more (the catch-up of a multi-page newest-first pass), unchanged: a 304.
    expect(gh.requests.map((r) => pathOf(r.url))).toEqual(['/repos/octo/hello/pulls', '/repositories/12345/pulls', '/repos/octo/hello/pulls', '/repos/octo/hello/pulls']);
    expect(gh.requests[2]!.headers['if-none-match']).toMatch(/^W\/"/);
    expect(gh.requests[3]!.headers['if-none-match']).toMatch(/^W\/"/);
    expect(pages.at(-1)).toMatchObject({ records: [], nextPageToken: null, notModified: true });
    expect(queryOf(gh.requests[1]!.url).get('per_page')).toBe('2');
    expect(queryOf(gh.requests[0]!.url).get('state')).toBe('all');
    expect(queryOf(gh.requests[0]!.url).get('sort')).toBe('updated');
    expect(queryOf(gh.requests[0]!.url).get('direction')).toBe('desc');
    const records = pages.flatMap((p) => p.records);
    expect(records.map((r) => r.externalId)).toEqual(expected('octo/hello', 'pulls').reverse());
    expect(records.every((r) => String(r.data.title).startsWith('PR '))).toBe(true);
  });

  it('pages two repositories in one pass, moving on when a repository has no next link', async () => {
    const config = cfg({ repositories: ['octo/hello', 'octo/world'] });
    const pages = await pass(config, 'issues');
    const ids = unique(pages.flatMap((p) => p.records.map((r) => r.externalId)));
    expect(ids).toEqual([...expected('octo/hello', 'issues'), ...expected('octo/world', 'issues')]);
    // octo/hello takes five pages (see above), octo/world's four items two.
    expect(gh.requests.map((r) => pathOf(r.url))).toEqual([...Array(5).fill('/repos/octo/hello/issues'), ...Array(2).fill('/repos/octo/world/issues')]);
    // The page token says where we are: the repository by name, those read before it, and the exact next URL.
    const afterHello = JSON.parse(Buffer.from(pages[4]!.nextPageToken!, 'base64url').toString('utf8'));
    expect(afterHello).toEqual({ repo: 'octo/world', done: ['octo/hello'], url: null });
    expect(pages[4]!.completedPartitions).toEqual(['octo/hello']);
    const inWorld = JSON.parse(Buffer.from(pages[5]!.nextPageToken!, 'base64url').toString('utf8'));
    expect(inWorld).toMatchObject({ repo: 'octo/world', done: ['octo/hello'] });
    expect(inWorld.url).toMatch(new RegExp(`^${gh.baseUrl}/repos/octo/world/issues\\?.*since=`));
    expect(pages.at(-1)!.nextPageToken).toBeNull();
  });

  it('resumes from a stored page token with the same URL', async () => {
    const first = await page(cfg(), 'issues');
    const again = await page(cfg(), 'issues', first.nextPageToken);
    const resumed = await page(cfg(), 'issues', first.nextPageToken);
    expect(resumed).toEqual(again);
    expect(gh.requests[2]!.url).toBe(gh.requests[1]!.url);
  });

  it('sends since on incremental issues fetches, and stops paging pull requests at the first one older than since', async () => {
    // Items are one minute apart from 2025-01-01T00:00Z; keep the newest 4 minutes.
    const newest = Math.max(...gh.repos.get('octo/hello')!.items.map((i) => Date.parse(i.updated_at)));
    const since = new Date(newest - 3 * 60_000);
    const issuePages = await pass(cfg(), 'issues', since);
    expect(queryOf(gh.requests[0]!.url).get('since')).toBe(since.toISOString().replace('.000Z', 'Z'));
    expect(unique(issuePages.flatMap((p) => p.records.map((r) => r.externalId)))).toEqual(expected('octo/hello', 'issues', since.getTime()));

    gh.requests.length = 0;
    const prPages = await pass(cfg({ per_page: 1 }), 'pull_requests', since);
    expect(queryOf(gh.requests[0]!.url).has('since')).toBe(false); // the pulls endpoint has none
    const prIds = prPages.flatMap((p) => p.records.map((r) => r.externalId));
    expect(prIds).toEqual(expected('octo/hello', 'pulls', since.getTime()).reverse());
    expect(prIds.length).toBeLessThan(expected('octo/hello', 'pulls').length);
    // One page per newer PR, the page that showed an older one ended the pass, after each page but
    // the first the page before asked again (304), and the head once more, unchanged (304).
    expect(gh.requests).toHaveLength(2 * prIds.length + 2);
    expect(prPages.at(-1)!.notModified).toBe(true);
  });

  it('drops items updated at or after until (issues and pulls), and stops paging a repository once past it', async () => {
    // octo/hello: #n is updated at 2025-01-01T00:00Z + (10 − n) min; PRs are #2, #4, #6.
    const base = Date.parse('2025-01-01T00:00:00Z');
    const until = new Date(base + 5 * 60_000); // #5 is updated exactly at `until`: out
    const config = cfg({ repositories: ['octo/hello', 'octo/world'] });
    const issueIds = unique((await pass(config, 'issues', null, until)).flatMap((p) => p.records.map((r) => r.externalId)));
    expect(issueIds).toEqual(['octo/hello#10', 'octo/hello#9', 'octo/hello#8', 'octo/hello#7', ...expected('octo/world', 'issues')]);
    expect(issueIds).toEqual([...expected('octo/hello', 'issues', null, until.getTime()), ...expected('octo/world', 'issues', null, until.getTime())]);
    // Sorted by updated_at ascending: the third page of octo/hello reached `until`, so no later one
    // was requested and paging moved on to octo/world.
    const minute = (m: number) => new Date(base + m * 60_000).toISOString().replace('.000Z', 'Z');
    expect(gh.requests.map((r) => `${pathOf(r.url)}?since=${queryOf(r.url).get('since')}`)).toEqual([
      '/repos/octo/hello/issues?since=null',
      `/repos/octo/hello/issues?since=${minute(2)}`,
      `/repos/octo/hello/issues?since=${minute(4)}`,
      '/repos/octo/world/issues?since=null',
      `/repos/octo/world/issues?since=${minute(2)}`,
    ]);

    const prIds = (await pass(cfg(), 'pull_requests', null, until)).flatMap((p) => p.records.map((r) => r.externalId));
    expect(prIds).toEqual(['octo/hello#6']);
    // With since as well: the window [base + 2 min, base + 5 min) holds #6, #7 and #8.
    const since = new Date(base + 2 * 60_000);
    const windowIssues = unique((await pass(cfg(), 'issues', since, until)).flatMap((p) => p.records.map((r) => r.externalId)));
    expect(windowIssues).toEqual(['octo/hello#8', 'octo/hello#7']);
    const windowPulls = (await pass(cfg(), 'pull_requests', since, until)).flatMap((p) => p.records.map((r) => r.externalId));
    expect(windowPulls).toEqual(['octo/hello#6']);
  });

  it('rejects an invalid until with Permanent', async () => {
    const err = await failure(page(cfg(), 'issues', null, null, { until: new Date(Number.NaN) }));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/invalid until/);
    expect(gh.requests).toHaveLength(0);
  });

  it('returns the page of a 200 whose x-ratelimit-remaining is 0', async () => {
    gh.setRateLimitRemaining(0);
    const result = await page(cfg(), 'issues');
    expect(result.records.length).toBeGreaterThan(0);
    expect(result.nextPageToken).not.toBeNull();
  });

  it('lists the configured resource types and is registered', () => {
    expect(githubConnector.resourceTypes(cfg())).toEqual(['issues', 'pull_requests']);
    expect(githubConnector.resourceTypes(cfg({ resource_types: ['pull_requests'] }))).toEqual(['pull_requests']);
    expect(getConnector('github')).toBe(githubConnector);
  });
});

// ---------------------------------------------------------------------------------------------

describe('github connector: errors', () => {
  it('maps a secondary limit with Retry-After seconds to RateLimited with that hint', async () => {
    gh.setFailure({ kind: 'secondary', status: 403, retryAfter: 120, nth: 2 });
    const first = await page(cfg(), 'issues');
    const err = await failure(page(cfg(), 'issues', first.nextPageToken));
    expect(err).toBeInstanceOf(RateLimited);
    expect((err as RateLimited).retryAfterSeconds).toBe(120);
  });

  it('maps a 429 with an HTTP-date Retry-After to seconds from now', async () => {
    gh.setFailure({ kind: 'secondary', status: 429, retryAfter: new Date(Date.now() + 90_000).toUTCString() });
    const err = await failure(page(cfg(), 'issues'));
    expect(err).toBeInstanceOf(RateLimited);
    const hint = (err as RateLimited).retryAfterSeconds!;
    expect(hint).toBeGreaterThanOrEqual(88);
    expect(hint).toBeLessThanOrEqual(91);
  });

  it("counts a primary limit's reset and an HTTP-date Retry-After from the answer's Date (GitHub's clock), so a worker whose clock is off waits as long as GitHub asks", async () => {
    const githubNow = Date.now();
    const answers: Record<string, string>[] = [
      { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.floor(githubNow / 1000) + 60) },
      { 'retry-after': new Date(githubNow + 90_000).toUTCString() },
    ];
    let n = 0;
    const github = await serve((_req, res) => {
      res.writeHead(403, { 'content-type': 'application/json', date: new Date(githubNow).toUTCString(), ...answers[n++] });
      res.end('{"message": "API rate limit exceeded"}');
    });
    // This worker's clock is two hours behind GitHub's.
    vi.useFakeTimers({ toFake: ['Date'], now: githubNow - 2 * 3_600_000 });
    const hints: (number | undefined)[] = [];
    try {
      for (let i = 0; i < answers.length; i++) hints.push(((await failure(page(cfg({ base_url: github.url }), 'issues'))) as RateLimited).retryAfterSeconds);
    } finally {
      vi.useRealTimers();
      await github.close();
    }
    expect(hints).toEqual([60, 90]);
  });

  it('maps a Retry-After date in the past to 0', async () => {
    gh.setFailure({ kind: 'secondary', retryAfter: new Date(Date.now() - 60_000).toUTCString() });
    const err = await failure(page(cfg(), 'issues'));
    expect((err as RateLimited).retryAfterSeconds).toBe(0);
  });

  it('maps a secondary-limit 403 without Retry-After to RateLimited (GitHub: wait a minute)', async () => {
    gh.setFailure({ kind: 'secondary' });
    const err = await failure(page(cfg(), 'issues'));
    expect(err).toBeInstanceOf(RateLimited);
    expect((err as RateLimited).retryAfterSeconds).toBe(60);
  });

  it('maps the primary limit (remaining 0, reset) to RateLimited with reset − now', async () => {
    const reset = Math.floor(Date.now() / 1000) + 300;
    gh.setFailure({ kind: 'primary', reset });
    const err = await failure(page(cfg(), 'issues'));
    expect(err).toBeInstanceOf(RateLimited);
    const hint = (err as RateLimited).retryAfterSeconds!;
    expect(hint).toBeGreaterThanOrEqual(298);
    expect(hint).toBeLessThanOrEqual(300);

    gh.setFailure({ kind: 'primary', status: 429, reset: Math.floor(Date.now() / 1000) - 10 });
    const past = await failure(page(cfg(), 'issues'));
    expect(past).toBeInstanceOf(RateLimited);
    expect((past as RateLimited).retryAfterSeconds).toBe(0);
  });

  it('maps 401 to Permanent without ever revealing the token', async () => {
    const wrong = 'ghp_WrongButSecret_0987654321';
    const err = await failure(page(cfg(), 'issues', null, null, { credentials: { token: wrong } }));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toBe('GitHub rejected the credentials (401)');
    for (const text of [err.message, err.stack ?? '', String(err), JSON.stringify(err)]) expect(text).not.toContain(wrong);
    expect(gh.requests[0]!.headers.authorization).toBe(`Bearer ${wrong}`); // it was sent, only not echoed

    gh.setFailure({ kind: 'unauthorized' });
    const injected = await failure(page(cfg(), 'issues'));
    expect(injected).toBeInstanceOf(Permanent);
    for (const text of [injected.message, injected.stack ?? '', String(injected), JSON.stringify(injected)]) {
      expect(text).not.toContain(TOKEN);
    }
  });

  it('never reveals the token in any error, whatever the failure', async () => {
    const failures = [
      { kind: 'not_found' },
      { kind: 'forbidden' },
      { kind: 'server_error' },
      { kind: 'secondary', retryAfter: 5 },
      { kind: 'primary', reset: 0 },
    ] as const;
    for (const f of failures) {
      gh.setFailure(f);
      const err = await failure(page(cfg(), 'issues'));
      expect(err).toBeInstanceOf(ConnectorError);
      expect(`${err.message}\n${err.stack}`).not.toContain(TOKEN);
    }
  });

  it('maps 404 to Permanent naming the repository', async () => {
    const err = await failure(page(cfg({ repositories: ['octo/missing'] }), 'issues'));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toContain("'octo/missing'");
    expect(err.message).toContain('404');
  });

  it('maps a 403 without rate-limit signals to Permanent', async () => {
    gh.setFailure({ kind: 'forbidden' });
    const err = await failure(page(cfg(), 'issues'));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/forbidden \(403\)/);
  });

  it('maps 5xx to Transient, for the Nth request or a path', async () => {
    gh.setFailure({ kind: 'server_error', nth: 1 });
    expect(await failure(page(cfg(), 'issues'))).toBeInstanceOf(Transient);
    gh.setFailure({ kind: 'server_error', status: 502, path: /since=/ });
    const first = await page(cfg(), 'issues');
    const err = await failure(page(cfg(), 'issues', first.nextPageToken));
    expect(err).toBeInstanceOf(Transient);
    expect(err.message).toContain('502');
  });

  it('maps network errors to Transient', async () => {
    const url = gh.baseUrl;
    await gh.close();
    gh = await startFakeGitHub({ token: TOKEN }); // afterEach closes this one
    const err = await failure(page({ base_url: url, repositories: ['octo/hello'] }, 'issues'));
    expect(err).toBeInstanceOf(Transient);
    expect(err.message).toMatch(/network error/);
  });

  it('rejects an invalid config with Permanent naming the key', async () => {
    const cases: Array<[Config, string]> = [
      [{ base_url: gh.baseUrl }, 'repositories'],
      [cfg({ repositories: [] }), 'repositories'],
      [cfg({ repositories: ['no-slash'] }), 'repositories[0]'],
      [cfg({ resource_types: ['commits'] }), 'resource_types[0]'],
      [cfg({ per_page: 101 }), 'per_page'],
      [cfg({ per_page: 0 }), 'per_page'],
      [cfg({ base_url: 'not a url' }), 'base_url'],
    ];
    for (const [config, key] of cases) {
      const err = await failure(page(config, 'issues'));
      expect(err).toBeInstanceOf(Permanent);
      expect(err.message).toContain(`invalid config: ${key}:`);
      expect(() => githubConnector.resourceTypes(config)).toThrow(Permanent);
    }
    expect(gh.requests).toHaveLength(0);
  });

  it('rejects missing credentials, an unconfigured resource and bad page tokens with Permanent', async () => {
    for (const credentials of [null, {}, { token: '' }, { token: 42 }]) {
      const err = await failure(page(cfg(), 'issues', null, null, { credentials }));
      expect(err).toBeInstanceOf(Permanent);
      expect(err.message).toMatch(/credentials: token/);
    }
    expect(await failure(page(cfg({ resource_types: ['issues'] }), 'pull_requests'))).toBeInstanceOf(Permanent);
    expect(await failure(page(cfg(), 'issues', 'not-a-token'))).toBeInstanceOf(Permanent);
    expect(await failure(page(cfg(), 'issues', encodeGitHubPageToken({ repo: 1, url: null })))).toBeInstanceOf(Permanent);
    // A token pointing elsewhere would send the credentials there: refused.
    const foreign = encodeGitHubPageToken({ repo: 0, url: 'https://evil.example/repositories/1/issues?page=2' });
    const err = await failure(page(cfg(), 'issues', foreign));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/refusing/);
    expect(gh.requests).toHaveLength(0);
  });

  it('rethrows the AbortError when the signal aborts (before or during a request)', async () => {
    const before = new AbortController();
    before.abort();
    const early = await failure(page(cfg(), 'issues', null, null, { signal: before.signal }));
    expect(early.name).toBe('AbortError');
    expect(early).not.toBeInstanceOf(ConnectorError);
    expect(gh.requests).toHaveLength(0);

    gh.setFailure({ kind: 'hang' });
    const during = new AbortController();
    const pending = failure(page(cfg(), 'issues', null, null, { signal: during.signal }));
    while (gh.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
    during.abort();
    const err = await pending;
    expect(err.name).toBe('AbortError');
    expect(err).not.toBeInstanceOf(ConnectorError);
  });
});

// ---------------------------------------------------------------------------------------------

describe('Link header parsing (RFC 8288)', () => {
  it('parses GitHub-style headers', () => {
    const header =
      '<https://api.github.com/repositories/1/issues?page=1>; rel="prev", <https://api.github.com/repositories/1/issues?page=3>; rel="next", ' +
      '<https://api.github.com/repositories/1/issues?page=9>; rel="last"';
    expect(nextLink(header)).toBe('https://api.github.com/repositories/1/issues?page=3');
    expect(parseLinkHeader(header).map((l) => l.rels)).toEqual([['prev'], ['next'], ['last']]);
  });

  it('keeps commas and semicolons inside <…> and quoted values, and handles several rels', () => {
    const header =
      '<https://h.test/a?x=1,2;y=3>; title="a, b; \\"c\\""; rel="last", ' +
      '<https://h.test/b?list=a,b>;REL="prev NEXT";anchor="#x" ,<https://h.test/c>; rel=first';
    const links = parseLinkHeader(header);
    expect(links.map((l) => l.url)).toEqual(['https://h.test/a?x=1,2;y=3', 'https://h.test/b?list=a,b', 'https://h.test/c']);
    expect(links[0]!.params.title).toBe('a, b; "c"');
    expect(links[1]!.rels).toEqual(['prev', 'next']);
    expect(links[2]!.rels).toEqual(['first']);
    expect(nextLink(header)).toBe('https://h.test/b?list=a,b');
  });

  it('resolves relative targets, ignores later rel params and skips malformed links', () => {
    expect(nextLink('</repositories/1/issues?page=2>; rel="next"', 'https://ghe.test/api/v3/repos/o/r/issues')).toBe(
      'https://ghe.test/repositories/1/issues?page=2',
    );
    expect(nextLink('<https://h.test/1>; rel="last"; rel="next"')).toBeNull();
    expect(nextLink('garbage; rel="next", <https://h.test/2>; rel="next"')).toBe('https://h.test/2');
    expect(nextLink('<https://h.test/1> junk, <https://h.test/3>; rel=next')).toBe('https://h.test/3');
    expect(nextLink('')).toBeNull();
    expect(nextLink(null)).toBeNull();
    expect(nextLink('<https://h.test/1>; rel="last"')).toBeNull();
  });

  it('parses Retry-After values', () => {
    const now = Date.parse('2025-06-01T12:00:00Z');
    expect(parseRetryAfter('30', now)).toBe(30);
    expect(parseRetryAfter('Sun, 01 Jun 2025 12:01:30 GMT', now)).toBe(90);
    expect(parseRetryAfter('Sun, 01 Jun 2025 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});

describe('github connector: re-checking deletion candidates', () => {
  /** GitHub for these tests: issue #5 of octo/hello moved away, answered as `moved` says. */
  async function github(moved: (res: ServerResponse, base: string) => void) {
    return serve((req, res, fake) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (path === '/repos/octo/hello/issues/5') return moved(res, fake.url);
      if (path === '/repos/octo/hello/issues/8') return res.writeHead(301, { location: `${fake.url}/repositories/123/issues/8` }).end();
      if (path === '/repos/octo/hello/issues/6') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ number: 6, updated_at: '2024-01-01T00:00:00Z', repository_url: `${fake.url}/repos/octo/hello` }));
      }
      // octo/hello was renamed octo/renamed (GitHub redirects its old name to its id).
      if (path === '/repos/octo/hello') return res.writeHead(301, { location: `${fake.url}/repositories/123` }).end();
      if (path === '/repositories/123') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ id: 123, full_name: 'octo/renamed', url: `${fake.url}/repos/octo/renamed` }));
      }
      const renamed = /^\/repositories\/123\/issues\/(\d+)$/.exec(path);
      if (renamed) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ number: Number(renamed[1]), updated_at: '2024-01-01T00:00:00Z', repository_url: `${fake.url}/repos/octo/renamed` }));
      }
      const transferred = /^\/repositories\/999\/issues\/(\d+)$/.exec(path);
      if (transferred) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ number: Number(transferred[1]), updated_at: '2024-01-01T00:00:00Z', repository_url: `${fake.url}/repos/octo/elsewhere` }));
      }
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"Not Found"}');
    });
  }
  const recheck = (base: string, externalIds: string[]) =>
    githubConnector.recheck!({
      resource: 'issues', externalIds, config: { base_url: base, repositories: ['octo/hello'] }, credentials: { token: TOKEN }, policy: TEST_PROVIDER_POLICY,
    });

  it('takes an issue transferred to another repository (GitHub redirects to it there, under its number there) as gone, the others as they are', async () => {
    const fake = await github((res, base) => res.writeHead(301, { location: `${base}/repositories/999/issues/12` }).end());
    const answer = await recheck(fake.url, ['octo/hello#5', 'octo/hello#6', 'octo/hello#7']);
    expect(answer.gone.sort()).toEqual(['octo/hello#5', 'octo/hello#7']);
    expect(answer.alive.map((r) => r.externalId)).toEqual(['octo/hello#6']);
  });

  it('takes an issue transferred away and back (GitHub redirects its old number to its new one in the same repository) as gone, not as a wrong answer', async () => {
    // octo/hello#5 went elsewhere and came back as octo/hello#6: its old number redirects there.
    const fake = await github((res, base) => res.writeHead(301, { location: `${base}/repos/octo/hello/issues/6` }).end());
    const answer = await recheck(fake.url, ['octo/hello#5', 'octo/hello#6']);
    expect(answer.gone).toEqual(['octo/hello#5']);
    expect(answer.alive.map((r) => r.externalId)).toEqual(['octo/hello#6']);
  });

  it('takes an issue of a repository renamed since it was configured (GitHub redirects the old name) as alive, a transferred one as gone', async () => {
    const fake = await github((res, base) => res.writeHead(301, { location: `${base}/repositories/999/issues/12` }).end());
    const answer = await recheck(fake.url, ['octo/hello#8', 'octo/hello#5']);
    expect(answer.alive.map((r) => r.externalId)).toEqual(['octo/hello#8']);
    expect(answer.gone).toEqual(['octo/hello#5']);
  });
});
