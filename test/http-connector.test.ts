// The declarative http connector against local fake services on 127.0.0.1: one per pagination
// style (Link header, next URL in the body, cursor, page number, offset), each auth scheme, the
// `since` parameter and its formats, rate-limit headers feeding the budget, config errors naming
// the key, and a config against the fake GitHub that yields the same records as the github
// connector, secrets kept out of failures and page tokens, and page numbers and offsets against a
// provider serving fewer records a page than asked for (through the sync activity on a database
// of the file's own). No Temporal.
import { execFile } from 'node:child_process';
import type { IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { configProblem } from '../commands/provider-configs';
import { githubConnector } from '../connectors/github';
import { z } from 'zod';
import { httpConfigSchema, httpConnector, parseHttpConfig, readPath } from '../connectors/http';
import { pagesOf } from '../connectors/pages';
import { getConnector } from '../connectors/registry';
import { Permanent, RateLimited, type Connector, type ConnectorRecord, type RequestBudget } from '../connectors/types';
import type { ProviderAnswer } from '../policy/rate-budget';
import { createHash, randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { toActivityFailure } from '../services/connector-failure';
import { credentialSecrets } from '../connectors/provider-http';
import { sealCredentials } from '../lib/credentials';
import { useTestDatabase } from './helpers/database';
import { TEST_KEYRING, TEST_PROVIDER_POLICY, testActivityDeps } from './helpers/deps';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';
import { startFakeGitHub } from './helpers/fake-github';
import { serve, serveRaw, type FakeHandler, type FakeServer } from './helpers/fake-server';

const TOTAL = 23;
const SIZE = 5;
/** The page size the `capped-*` styles serve at most, whatever was asked for (as real APIs cap per_page). */
const CAP = 3;
const BASE = Date.parse('2025-03-01T00:00:00Z');
const ITEMS = Array.from({ length: TOTAL }, (_, i) => ({
  id: `c${i + 1}`,
  name: `Customer ${i + 1}`,
  updated_at: new Date(BASE + i * 60_000).toISOString(),
}));

interface Seen {
  url: string;
  headers: IncomingHttpHeaders;
}

/** One fake provider serving ITEMS in every pagination style, under /<style>/items. */
function startFakeProvider() {
  const requests: Seen[] = [];
  let failWith: { status: number; headers?: Record<string, string>; body?: unknown } | null = null;
  let server: FakeServer | undefined;
  const handler: FakeHandler = (req, res, self) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    const origin = self.url;
    const url = new URL(req.url ?? '/', origin);
    const rate = { 'x-rl-remaining': String(1000 - requests.length), 'x-rl-reset': '30' };
    if (failWith) {
      res.writeHead(failWith.status, { 'content-type': 'application/json', ...rate, ...failWith.headers });
      res.end(JSON.stringify(failWith.body ?? { error: 'failure' }));
      return;
    }
    const sinceText = url.searchParams.get('updated_since');
    const sinceMs = sinceText === null ? null : /^\d+$/.test(sinceText) ? Number(sinceText) * 1000 : Date.parse(sinceText);
    const items = ITEMS.filter((item) => sinceMs === null || Date.parse(item.updated_at) >= sinceMs);
    const send = (body: unknown, headers: Record<string, string> = {}, status = 200) => {
      res.writeHead(status, { 'content-type': 'application/json', ...rate, ...headers });
      res.end(JSON.stringify(body));
    };
    const style = url.pathname.split('/')[1];
    const q = url.searchParams;
    switch (style) {
      case 'link': {
        const page = Number(q.get('page') ?? 1);
        const slice = items.slice((page - 1) * SIZE, page * SIZE);
        const next = new URL(url);
        next.searchParams.set('page', String(page + 1));
        return send(slice, page * SIZE < items.length ? { link: `<${next.href}>; rel="next"` } : {});
      }
      case 'elsewhere': {
        // A Link to another origin (localhost, not 127.0.0.1) echoing every query parameter, the
        // query-auth secret included.
        const next = new URL(url.pathname + url.search, origin.replace('127.0.0.1', 'localhost'));
        next.searchParams.set('page', '2');
        return send(items.slice(0, SIZE), { link: `<${next.href}>; rel="next"` });
      }
      case 'far': {
        // A next URL in the body to another origin (localhost), long, echoing the query-auth
        // secret all along it.
        const echo = `a=${q.get('api_key')}&`.repeat(20_000);
        return send({ data: items.slice(0, SIZE), next: `${origin.replace('127.0.0.1', 'localhost')}/far/items?${echo}` });
      }
      case 'huge-next': {
        // A same-origin next URL in the body of 3 MiB, echoing the query-auth secret first.
        return send({ data: items.slice(0, SIZE), next: `/huge-next/items?echo=${q.get('api_key')}&page=2&pad=${'p'.repeat(3 * 1024 * 1024)}` });
      }
      case 'huge-cursor':
        // A cursor of 3 MiB (it becomes the next URL's query parameter).
        return send({ items: items.slice(0, SIZE), meta: { next_cursor: 'c'.repeat(3 * 1024 * 1024) } });
      case 'long-link': {
        // Each Link goes one path segment of 12 KiB deeper (relative to the URL that answered):
        // the second page's Link is a URL of over 24 KiB, as a response header may hold.
        const depth = url.pathname.split('/').length - 3;
        return send(items.slice(depth * SIZE, (depth + 1) * SIZE), { link: `<${'s'.repeat(12 * 1024)}/>; rel="next"` });
      }
      case 'deep-404': {
        // A Link to a same-origin path of 12 KiB (under the next URL limit), which answers 404.
        if (url.pathname !== '/deep-404/items') return send({ error: 'not found' }, {}, 404);
        return send(items.slice(0, SIZE), { link: `<items/${'s'.repeat(12 * 1024)}>; rel="next"` });
      }
      case 'long-cycle': {
        // A Link to a same-origin URL of 12 KiB (under the next URL limit), which serves records
        // and links to itself (an empty page linking to itself is the listing's end, no loop).
        const next = new URL('/long-cycle/items', origin);
        next.searchParams.set('pad', 'p'.repeat(12 * 1024));
        return send(url.searchParams.has('pad') ? items.slice(SIZE, 2 * SIZE) : items.slice(0, SIZE), { link: `<${next.href}>; rel="next"` });
      }
      case 'shout': {
        // Echoes each query parameter into its Link URL with its name upper-cased (API_KEY).
        const page = Number(q.get('PAGE') ?? 1);
        const next = new URL('/shout/items', origin);
        for (const [name, value] of q) if (name.toUpperCase() !== 'PAGE') next.searchParams.set(name.toUpperCase(), value);
        next.searchParams.set('PAGE', String(page + 1));
        return send(items.slice((page - 1) * SIZE, page * SIZE), page * SIZE < items.length ? { link: `<${next.href}>; rel="next"` } : {});
      }
      case 'next': {
        const page = Number(q.get('page') ?? 1);
        const more = page * SIZE < items.length;
        return send({ data: items.slice((page - 1) * SIZE, page * SIZE), next: more ? `/next/items?page=${page + 1}${sinceText ? `&updated_since=${sinceText}` : ''}` : null });
      }
      case 'cursor': {
        const offset = q.has('cursor') ? Number(Buffer.from(q.get('cursor')!, 'base64url').toString()) : 0;
        const more = offset + SIZE < items.length;
        return send({ items: items.slice(offset, offset + SIZE), meta: { next_cursor: more ? Buffer.from(String(offset + SIZE)).toString('base64url') : null } });
      }
      case 'page': {
        const page = Number(q.get('p') ?? 1);
        const size = Number(q.get('size') ?? SIZE);
        return send({ results: items.slice((page - 1) * size, page * size) });
      }
      case 'offset': {
        const offset = Number(q.get('offset') ?? 0);
        const limit = Number(q.get('limit') ?? SIZE);
        return send(items.slice(offset, offset + limit));
      }
      case 'capped-page': {
        const page = Number(q.get('p') ?? 1);
        const size = Math.min(Number(q.get('size') ?? SIZE), CAP);
        return send({ results: items.slice((page - 1) * size, page * size) });
      }
      case 'unpaged':
        // Ignores every position: the whole list on every page.
        return send({ results: items });
      case 'capped-offset': {
        const offset = Number(q.get('offset') ?? 0);
        const limit = Math.min(Number(q.get('limit') ?? SIZE), CAP);
        return send(items.slice(offset, offset + limit));
      }
      default:
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error": "not found"}');
    }
  };
  return {
    requests,
    fail(next: typeof failWith) {
      failWith = next;
    },
    async start() {
      server = await serve(handler);
      return server.url;
    },
    close: async () => server?.close(),
  };
}

const fake = startFakeProvider();
let baseUrl = '';
beforeAll(async () => {
  baseUrl = await fake.start();
});
afterAll(() => fake.close());
beforeEach(() => {
  fake.requests.length = 0;
  fake.fail(null);
});

type Config = Record<string, unknown>;
const TOKEN = 'tok_http_secret_987654321';

function config(style: string, pagination: Config, extra: Config = {}): Config {
  return {
    base_url: baseUrl,
    auth: { type: 'bearer' },
    pagination,
    resources: {
      customers: {
        path: `/${style}/items`,
        records: { link: '$', elsewhere: '$', far: 'data', 'huge-next': 'data', 'huge-cursor': 'items', 'long-link': '$', 'deep-404': '$', 'long-cycle': '$', shout: '$', next: 'data', cursor: 'items', page: '$.results', offset: '$', 'capped-page': '$.results', 'capped-offset': '$', unpaged: '$.results' }[style],
        id: 'id',
        updated_at: 'updated_at',
        since: { param: 'updated_since', format: 'iso8601' },
      },
    },
    ...extra,
  };
}

async function pass(connector: Connector, cfg: Config, resource = 'customers', opts: { since?: Date | null; credentials?: Config | null; budget?: RequestBudget } = {}) {
  const records: ConnectorRecord[] = [];
  const tokens: (string | null)[] = [];
  const request = {
    resource,
    since: opts.since ?? null,
    // A `since` is an incremental pass's cursor: the http connector's (its one partition, ''), as
    // such a pass gives it (`since` alone is a backfill's window start, asked one unit earlier).
    ...(opts.since && connector === httpConnector && { cursors: new Map([['', opts.since]]) }),
    until: null,
    config: cfg,
    credentials: opts.credentials === undefined ? { token: TOKEN } : opts.credentials,
    // The fakes listen on 127.0.0.1 over plain http: the tests' opt-in for private addresses.
    policy: TEST_PROVIDER_POLICY,
    ...(opts.budget && { budget: opts.budget }),
  };
  for await (const page of pagesOf(connector, request, null)) {
    records.push(...page.records);
    tokens.push(page.nextPageToken);
  }
  return { records, tokens };
}

// The number of reads: a listing paged by position (page numbers, offsets, without a declared
// change-time order) is read until two reads in a row agree, twice when nothing changes. Then the
// requests a read: 23 records, 5 a page → 5 pages; page numbers and offsets learn the end only from
// an empty page (a short one may be the provider's cap), asked for with the short page, in the same
// page of the task → 6 requests, 5 pages a read.
const STYLES: [string, Config, number, number][] = [
  ['link', { type: 'link_header' }, 1, 5],
  ['next', { type: 'next_url', path: 'next' }, 1, 5],
  ['cursor', { type: 'cursor', path: 'meta.next_cursor', param: 'cursor' }, 1, 5],
  ['page', { type: 'page_number', param: 'p', start: 1, size_param: 'size', size: SIZE }, 2, 6],
  ['offset', { type: 'offset', limit: SIZE }, 2, 6],
];
const times = <T>(list: T[], n: number) => Array.from({ length: n }, () => list).flat();

describe('http connector: pagination', () => {
  it.each(STYLES)('%s: pages through every record once a read, in order, sending the bearer token', async (style, pagination, reads, requests) => {
    const { records, tokens } = await pass(httpConnector, config(style, pagination));
    expect(records.map((r) => r.externalId)).toEqual(times(ITEMS.map((i) => i.id), reads));
    expect(records[4]).toEqual({ externalId: 'c5', updatedAt: ITEMS[4]!.updated_at, data: ITEMS[4] });
    expect(fake.requests).toHaveLength(requests * reads);
    // Pages of the task (what PROVIDER_MAX_PAGES_PER_TASK counts): the empty last page is not one.
    expect(tokens).toHaveLength(5 * reads);
    for (const r of fake.requests) expect(r.headers.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it.each(STYLES)('%s: an incremental fetch sends since and pages only the newer records', async (style, pagination, reads) => {
    const since = new Date(ITEMS[15]!.updated_at);
    const { records } = await pass(httpConnector, config(style, pagination), 'customers', { since });
    expect(records.map((r) => r.externalId)).toEqual(times(ITEMS.slice(15).map((i) => i.id), reads));
    expect(new URL(fake.requests[0]!.url, baseUrl).searchParams.get('updated_since')).toBe(since.toISOString());
  });

  it('formats since as epoch seconds, epoch milliseconds or a date', async () => {
    const since = new Date(ITEMS[10]!.updated_at);
    const cfg = (format: string) => {
      const c = config('offset', { type: 'offset', limit: SIZE });
      (c.resources as Record<string, Config>).customers!.since = { param: 'updated_since', format };
      return c;
    };
    const { records } = await pass(httpConnector, cfg('epoch_seconds'), 'customers', { since });
    expect(new URL(fake.requests[0]!.url, baseUrl).searchParams.get('updated_since')).toBe(String(since.getTime() / 1000));
    expect(records.map((r) => r.externalId)).toEqual(times(ITEMS.slice(10).map((i) => i.id), 2));
    fake.requests.length = 0;
    await pass(httpConnector, cfg('epoch_millis'), 'customers', { since });
    expect(new URL(fake.requests[0]!.url, baseUrl).searchParams.get('updated_since')).toBe(String(since.getTime()));
    fake.requests.length = 0;
    await pass(httpConnector, cfg('date'), 'customers', { since });
    // A date is the UTC day before the cursor's: a provider's own day may begin after midnight UTC.
    expect(new URL(fake.requests[0]!.url, baseUrl).searchParams.get('updated_since')).toBe('2025-02-28');
  });
});

describe('http connector: auth, errors, rate limits', () => {
  it('sends each auth scheme, and never puts a query-parameter secret into a page token', async () => {
    const link = { type: 'link_header' };
    await pass(httpConnector, config('link', link, { auth: { type: 'header', name: 'X-Api-Key' } }));
    expect(fake.requests.every((r) => r.headers['x-api-key'] === TOKEN && r.headers.authorization === undefined)).toBe(true);

    fake.requests.length = 0;
    await pass(httpConnector, config('link', link, { auth: { type: 'basic' } }), 'customers', { credentials: { username: 'ann', password: 'p@ss' } });
    expect(fake.requests[0]!.headers.authorization).toBe(`Basic ${Buffer.from('ann:p@ss').toString('base64')}`);

    fake.requests.length = 0;
    const { tokens } = await pass(httpConnector, config('link', link, { auth: { type: 'query', name: 'api_key' } }));
    // The fake echoes every query parameter into its Link URL, the secret included.
    expect(fake.requests.every((r) => new URL(r.url, baseUrl).searchParams.get('api_key') === TOKEN)).toBe(true);
    for (const token of tokens.filter((t): t is string => t !== null)) {
      expect(Buffer.from(token, 'base64url').toString()).not.toContain(TOKEN);
    }
    const err = await pass(httpConnector, config('link', link, { auth: { type: 'basic' } }), 'customers', { credentials: { username: 'ann' } }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Permanent);
    expect((err as Error).message).toBe("http connector: invalid credentials: password: a non-empty string is required for auth type 'basic'");
  });

  it('maps 401 to Permanent, 429 to RateLimited with the reset, 5xx to Transient, never echoing the secret', async () => {
    const cfg = config('offset', { type: 'offset', limit: SIZE }, { auth: { type: 'query', name: 'key' }, rate_limit: { remaining_header: 'x-rl-remaining', reset_header: 'x-rl-reset', reset_format: 'delta_seconds' } });
    fake.fail({ status: 401, body: { message: `bad key ${TOKEN}` } });
    let err = (await pass(httpConnector, cfg).catch((e: Error) => e)) as Error;
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/rejected the credentials .*\(401\): bad key \[redacted\]/);
    fake.fail({ status: 429, headers: { 'x-rl-remaining': '0', 'x-rl-reset': '42' } });
    err = (await pass(httpConnector, cfg).catch((e: Error) => e)) as Error;
    expect(err).toBeInstanceOf(RateLimited);
    expect((err as RateLimited).retryAfterSeconds).toBeGreaterThanOrEqual(41);
    fake.fail({ status: 503 });
    err = (await pass(httpConnector, cfg).catch((e: Error) => e)) as Error;
    expect(err.name).toBe('Transient');
    expect(err.message).not.toContain(TOKEN);
  });

  it('an error body that is not JSON echoing the secret across where it is cut (200 characters) is quoted redacted first, then cut: no prefix of the secret', async () => {
    // The token 190 characters into a plain-text (here a JSON string) error body.
    fake.fail({ status: 400, body: `${'x'.repeat(189)}${TOKEN} and more` });
    const err = (await pass(httpConnector, config('link', { type: 'link_header' })).catch((e: Error) => e)) as Error;
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/^http connector: the provider answered 400 for 'customers' \(\/link\/items\): "x+\[redacted\]/);
    expect(err.message).not.toContain(TOKEN.slice(0, 6));
  });

  it('hands the configured rate-limit headers to the budget, asking it before every request', async () => {
    const reports: ProviderAnswer[] = [];
    let acquired = 0;
    const budget: RequestBudget = {
      acquire: async () => {
        acquired += 1;
      },
      report: async (answer) => {
        reports.push(answer);
      },
    };
    const cfg = config('cursor', { type: 'cursor', path: 'meta.next_cursor', param: 'cursor' }, {
      rate_limit: { remaining_header: 'x-rl-remaining', reset_header: 'x-rl-reset', reset_format: 'delta_seconds' },
    });
    await pass(httpConnector, cfg, 'customers', { budget });
    expect(acquired).toBe(5);
    expect(reports.map((r) => r.remaining)).toEqual([999, 998, 997, 996, 995]);
    expect(reports[0]!.reset).toEqual({ inSeconds: 30 });
  });
});

describe('http connector: secrets in errors and page tokens', () => {
  const db = useTestDatabase();

  /** A connection of tenant acme with `cfg` and the token (`token`, TOKEN by default) sealed, as the API stores it. */
  async function connection(cfg: Config, token = TOKEN): Promise<string> {
    const id = randomUUID();
    await db.pool.query(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials) values ($1, 'acme', 'http', $2, $3, $4)`,
      [id, `c-${id}`, cfg, JSON.stringify(sealCredentials(TEST_KEYRING, id, { token }))],
    );
    return id;
  }

  it('a cross-origin Link echoing the query secret fails the task with the secret redacted, in the failure, its stack, the task row and the log', async () => {
    const cfg = config('elsewhere', { type: 'link_header' }, { auth: { type: 'query', name: 'api_key' } });
    const { deps, lines } = testActivityDeps({ pool: db.pool });
    const id = await connection(cfg);
    const err = (await runPass(deps, id, 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err.type).toBe('permanent');
    expect(err.message).toMatch(/refusing to follow Link header URL 'http:\/\/localhost:\d+\/elsewhere\/items\?api_key=\[redacted\]/);
    expect(err.message).not.toContain(TOKEN);
    expect(err.stack ?? '').not.toContain(TOKEN);
    const { rows } = await db.pool.query('select t.*, j.last_error from sync_tasks t join sync_jobs j on j.id = t.job_id where j.connection_id = $1', [id]);
    expect(JSON.stringify(rows)).not.toContain(TOKEN);
    expect(JSON.stringify(lines)).not.toContain(TOKEN);
    // The provider did see the secret on the one request made to it (its own origin).
    expect(new URL(fake.requests[0]!.url, baseUrl).searchParams.get('api_key')).toBe(TOKEN);
  });

  it('a cross-origin next URL of over 500,000 characters echoing the query secret all along fails the task quoting it redacted, then cut: no secret, nor a prefix of one', async () => {
    const cfg = config('far', { type: 'next_url', path: 'next' }, { auth: { type: 'query', name: 'api_key' } });
    const { deps } = testActivityDeps({ pool: db.pool });
    const id = await connection(cfg);
    const err = (await runPass(deps, id, 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err.type).toBe('permanent');
    expect(err.message).toMatch(/refusing to follow body 'next' URL 'http:\/\/localhost:\d+\/far\/items\?a=\[redacted\]&a=\[redacted\]&/);
    expect(err.message.length).toBeLessThanOrEqual(1000);
    expect(err.message).not.toContain(TOKEN.slice(0, 6));
  });

  it('a same-origin next URL longer than 16 KiB (body next_url of 3 MiB echoing the query secret, a cursor of 3 MiB, a Link 24 KiB long) fails the task for good, naming the limit, quoting it redacted and cut, before any of it is stored or requested', async () => {
    const cases: [string, Config, string, number][] = [
      ['huge-next', { type: 'next_url', path: 'next' }, "body 'next'", 1],
      ['huge-cursor', { type: 'cursor', path: 'meta.next_cursor', param: 'cursor' }, "cursor at 'meta.next_cursor'", 1],
      // The first Link (12 KiB) is followed; the second page's (over 24 KiB) is not.
      ['long-link', { type: 'link_header' }, 'Link header', 2],
    ];
    for (const [style, pagination, source, requests] of cases) {
      fake.requests.length = 0;
      const cfg = config(style, pagination, { auth: { type: 'query', name: 'api_key' } });
      const { deps } = testActivityDeps({ pool: db.pool });
      const id = await connection(cfg);
      const err = (await runPass(deps, id, 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
      expect(err, style).toBeInstanceOf(ApplicationFailure);
      expect(err.type, style).toBe('permanent');
      expect(err.nonRetryable, style).toBe(true);
      expect(err.message, style).toContain(`http connector: the next URL from the ${source} is `);
      expect(err.message, style).toMatch(/ characters, more than 16384 \(the longest next URL the connector follows\)/);
      expect(err.message.length, style).toBeLessThanOrEqual(1000);
      expect(err.message, style).not.toContain(TOKEN.slice(0, 6));
      if (style === 'huge-next') expect(err.message).toMatch(/'http:\/\/127\.0\.0\.1:\d+\/huge-next\/items\?echo=\[redacted\]&page=2&pad=ppp/);
      // Nothing of it reached the task's progress (its page token), nor the provider.
      const { rows } = await db.pool.query<{ token: number | null }>(
        'select max(length(t.page_token)) as token from sync_tasks t join sync_jobs j on j.id = t.job_id where j.connection_id = $1',
        [id],
      );
      expect(rows[0]!.token ?? 0, style).toBeLessThan(20_000);
      expect(fake.requests, style).toHaveLength(requests);
    }
  });

  it("a page at a path of 12 KiB (a provider's Link) that fails quotes its path cut (about 200 characters) in the failure, as other provider text is", async () => {
    const cfg = config('deep-404', { type: 'link_header' });
    const { deps } = testActivityDeps({ pool: db.pool });
    const err = (await runPass(deps, await connection(cfg), 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err.type).toBe('permanent');
    expect(err.message).toMatch(/^http connector: the provider answered 404 for 'customers' \(\/deep-404\/items\/sss+…\): not found$/);
    expect(err.message.length).toBeLessThanOrEqual(1000);
    // A link answered 404 starts the pass again from its first page, 3 times, before it fails.
    expect(fake.requests).toHaveLength(8);
  });

  it('a paging loop through a URL of 12 KiB (a Link to itself) fails quoting the page cut (about 500 characters), as other provider text is', async () => {
    const cfg = config('long-cycle', { type: 'link_header' });
    const { deps } = testActivityDeps({ pool: db.pool });
    const err = (await runPass(deps, await connection(cfg), 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err.type).toBe('permanent');
    expect(err.message).toMatch(/^http connector: customers: paging loop: page 2 points back to 'http:\/\/127\.0\.0\.1:\d+\/long-cycle\/items\?pad=ppp+…', which this task already fetched/);
    expect(err.message.length).toBeLessThanOrEqual(1000);
    expect(fake.requests).toHaveLength(2);
  });

  it('the paging guards quote a next URL redacted first, then cut: a secret in its path across the cut leaves no fragment (a paging loop, the page cap)', async () => {
    // Page 1 links to a URL whose path carries the token 493 characters in, so that a cut at about
    // 500 characters splits it; that page links to itself. A token of 7 characters: a longer one
    // in a next URL's path fails the page before any guard (it would be stored in the page token).
    const SHORT = 'Sk7_x9q';
    const provider = await serve((req, res, self) => {
      const padding = 'p'.repeat(493 - `${self.url}/loop/`.length - 1);
      const next = `${self.url}/loop/${padding}/${SHORT}/items`;
      expect(next.indexOf(SHORT)).toBe(493);
      // The loop page serves records (an empty page linking to itself is the listing's end, no loop).
      const first = !req.url!.startsWith('/loop/');
      res.writeHead(200, { 'content-type': 'application/json', link: `<${next}>; rel="next"` }).end(JSON.stringify(first ? ITEMS.slice(0, 2) : ITEMS.slice(2, 4)));
    });
    try {
      const cfg = { ...config('link', { type: 'link_header' }), base_url: provider.url };
      const id = await connection(cfg, SHORT);
      const loop = (await runPass(testActivityDeps({ pool: db.pool }).deps, id, 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
      expect(loop).toBeInstanceOf(ApplicationFailure);
      expect(loop.message).toMatch(/^http connector: customers: paging loop: page 2 points back to 'http:\/\/127\.0\.0\.1:\d+\/loop\/p+\/\[redac…', which this task already fetched/);
      expect(loop.message).not.toContain(SHORT.slice(0, 4));
      // One page a task: the cap stops before page 2, quoting it.
      const capped = { ...TEST_PROVIDER_POLICY, maxPagesPerTask: 1 };
      const cap = (await runPass(testActivityDeps({ pool: db.pool, providers: capped }).deps, id, 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
      expect(cap).toBeInstanceOf(ApplicationFailure);
      expect(cap.message).toMatch(/^http connector: customers: more than 1 pages in one task \(PROVIDER_MAX_PAGES_PER_TASK\); stopped before page 'http:\/\/127\.0\.0\.1:\d+\/loop\/p+\/\[redac…'/);
      expect(cap.message).not.toContain(SHORT.slice(0, 4));
    } finally {
      await provider.close();
    }
  });

  it("a response whose header section passes Node's 16 KiB limit (HPE_HEADER_OVERFLOW) fails the task for good, naming the limit and the provider's host, without the secret it echoed", async () => {
    fake.fail({ status: 200, headers: { 'x-echo': `${TOKEN} ${'p'.repeat(20 * 1024)}` }, body: [] });
    const cfg = config('link', { type: 'link_header' }, { auth: { type: 'query', name: 'api_key' } });
    const { deps } = testActivityDeps({ pool: db.pool });
    const id = await connection(cfg);
    const err = (await runPass(deps, id, 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err.message).toMatch(
      /^http connector: fetching 'customers' \(\/link\/items\): the provider at '127\.0\.0\.1' answered, but its response headers exceed 16384 bytes \(16 KiB\), Node's limit on a response's header section \(--max-http-header-size\)$/,
    );
    expect(err.type).toBe('permanent');
    expect(err.nonRetryable).toBe(true);
    expect(err.message).not.toContain(TOKEN.slice(0, 6));
    expect(fake.requests).toHaveLength(1);
  });

  it('a provider answering malformed HTTP (an invalid chunk size after a 200) fails the task for good, naming what was wrong and the host, without the query secret of its URL', async () => {
    const raw = await serveRaw('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n[]\r\n0\r\n\r\n');
    try {
      const cfg = { ...config('link', { type: 'link_header' }, { auth: { type: 'query', name: 'api_key' } }), base_url: raw.url };
      const { deps } = testActivityDeps({ pool: db.pool });
      const id = await connection(cfg);
      const err = (await runPass(deps, id, 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
      expect(err).toBeInstanceOf(ApplicationFailure);
      expect(err.message).toBe(
        "http connector: fetching 'customers' (/link/items): the provider at '127.0.0.1' answered, but its response is not valid HTTP: its chunked body has an invalid chunk size (HPE_INVALID_CHUNK_SIZE)",
      );
      expect(err.type).toBe('permanent');
      expect(err.nonRetryable).toBe(true);
      // The request carried the secret in its query; nothing of the URL but the host is quoted.
      expect(raw.requests[0]!.url).toContain(TOKEN);
      expect(raw.requests).toHaveLength(1);
    } finally {
      await raw.close();
    }
  });

  it('strips the query secret from page tokens whatever the case of the echoed parameter name (API_KEY)', async () => {
    const cfg = config('shout', { type: 'link_header' }, { auth: { type: 'query', name: 'api_key' } });
    const { records, tokens } = await pass(httpConnector, cfg);
    expect(records.map((r) => r.externalId)).toEqual(ITEMS.map((i) => i.id));
    expect(tokens.filter((t) => t !== null)).toHaveLength(4);
    for (const token of tokens.filter((t): t is string => t !== null)) expect(Buffer.from(token, 'base64url').toString()).not.toContain(TOKEN);
    // The secret is sent once per request, under the configured name only.
    for (const r of fake.requests) {
      const q = new URL(r.url, baseUrl).searchParams;
      expect([q.getAll('api_key'), q.getAll('API_KEY')]).toEqual([[TOKEN], []]);
    }
  });

  it('redacts every credential value, in its encoded forms, from any error that becomes an activity failure', () => {
    const credentials = { username: 'ann', password: 'p@ss w/rd+1', token: 'tok_abc' };
    const secrets = credentialSecrets(credentials);
    for (const shown of ['p@ss w/rd+1', encodeURIComponent('p@ss w/rd+1'), 'p%40ss+w%2Frd%2B1', Buffer.from('ann:p@ss w/rd+1').toString('base64'), 'tok_abc']) {
      const failure = toActivityFailure(new Permanent(`http connector: refusing '${shown}'`), secrets) as ApplicationFailure;
      expect(failure.message).toBe("http connector: refusing '[redacted]'");
      const plain = toActivityFailure(new Error(`boom ${shown}`), secrets) as Error;
      expect(plain.message).toBe('boom [redacted]');
      expect(plain.stack).not.toContain(shown);
    }
  });
});

describe('http connector: the shared rate budget of a connection without credentials', () => {
  const db = useTestDatabase();

  it("a connection with no credentials (auth none) still spends a budget of its own: its config.rate_budget ceiling holds its requests back, and a stated count at the reserve waits for the reset", async () => {
    const { deps } = testActivityDeps({ pool: db.pool });
    // Five pages; at most two requests a minute.
    const capped = await createHttpConnection(db.pool, { ...config('link', { type: 'link_header' }), auth: { type: 'none' }, rate_budget: { per_minute: 2 } }, `anon-${randomUUID()}`);
    const before = fake.requests.length;
    const err = (await runPass(deps, capped, 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
    expect({ type: err?.type, sent: fake.requests.length - before }).toEqual({ type: 'rate_limited', sent: 2 });
    expect(err.message).toContain('the credential\'s request ceiling (2 per 60 s) is reached');
    // The provider states fewer than 1000 left until its reset in 30 s, all kept in reserve: the next request waits for it.
    const reserved = await createHttpConnection(db.pool, {
      ...config('link', { type: 'link_header' }), auth: { type: 'none' }, rate_budget: { reserve: 1000 },
      rate_limit: { remaining_header: 'x-rl-remaining', reset_header: 'x-rl-reset', reset_format: 'delta_seconds' },
    }, `anon-${randomUUID()}`);
    const waited = (await runPass(deps, reserved, 'customers', 'full').catch((e: unknown) => e)) as ApplicationFailure;
    expect(waited?.type).toBe('rate_limited');
    expect(waited.message).toContain("the credential's shared rate budget is down to its reserve");
  });
});

describe('http connector: page numbers and offsets against a provider serving fewer records a page than asked for', () => {
  const db = useTestDatabase();
  // Asking for 5 a page from a provider serving at most 3: every page is short, none is the end.
  const CAPPED: [string, Config][] = [
    ['capped-page', { type: 'page_number', param: 'p', start: 1, size_param: 'size', size: SIZE }],
    ['capped-offset', { type: 'offset', limit: SIZE }],
  ];
  const keyset = (cfg: Config): Config => {
    (cfg.resources as Record<string, Config>).customers!.order = 'change_ascending';
    return cfg;
  };

  it.each(CAPPED)('%s: reads every record, going on after short pages and ending at the first empty one, offsets stepping by the records served', async (style, pagination) => {
    const { records, tokens } = await pass(httpConnector, config(style, pagination));
    expect(records.map((r) => r.externalId)).toEqual(times(ITEMS.map((i) => i.id), 2));
    // 23 records, 3 a page: 8 pages, then the empty one; a read twice (nothing changed).
    const read = style === 'capped-page' ? ['1', '2', '3', '4', '5', '6', '7', '8', '9'] : ['0', '3', '6', '9', '12', '15', '18', '21', '23'];
    const positions = fake.requests.map((r) => new URL(r.url, baseUrl).searchParams.get(style === 'capped-page' ? 'p' : 'offset'));
    expect(positions).toEqual([...read, ...read]);
    // A short page and the next position are one page of the task: 5 a read, not 9.
    expect(tokens).toHaveLength(2 * 5);
  });

  it('a provider that ignores the position (the same records on the next page) ends the listing there, as its short page did before', async () => {
    const { records, tokens } = await pass(httpConnector, config('unpaged', { type: 'page_number', param: 'p', start: 1, size_param: 'size', size: 50 }));
    expect(records.map((r) => r.externalId)).toEqual(times(ITEMS.map((i) => i.id), 2));
    const positions = fake.requests.map((r) => new URL(r.url, baseUrl).searchParams.get('p'));
    expect(positions).toEqual(['1', '2', '1', '2']);
    expect(tokens).toHaveLength(2);
  });

  // Without a size asked for, or with the whole list a full page, no page is short: the next page
  // serving the very same records is how the end shows (it paged on to PROVIDER_MAX_PAGES_PER_TASK).
  it.each([
    ['no size', { type: 'page_number', param: 'p', start: 1 }],
    ['a full page', { type: 'page_number', param: 'p', start: 1, size_param: 'size', size: ITEMS.length }],
  ])('a provider that ignores the position ends the listing at the repeated page (%s)', async (_name, pagination) => {
    const { records, tokens } = await pass(httpConnector, config('unpaged', pagination));
    expect(records.map((r) => r.externalId)).toEqual(times(ITEMS.map((i) => i.id), 2));
    const positions = fake.requests.map((r) => new URL(r.url, baseUrl).searchParams.get('p'));
    expect(positions).toEqual(['1', '2', '1', '2']);
    expect(tokens.at(-1)).toBeNull();
  });

  it('by keyset (change_ascending), a short page steps on by change time instead of ending the listing', async () => {
    const { records } = await pass(httpConnector, keyset(config('capped-offset', { type: 'offset', limit: SIZE })));
    expect([...new Set(records.map((r) => r.externalId))].sort()).toEqual(ITEMS.map((i) => i.id).sort());
  });

  const SYNCS: [string, boolean, Config][] = [...CAPPED.map(([style, pagination]): [string, boolean, Config] => [style, false, pagination]), ['capped-offset', true, { type: 'offset', limit: SIZE }]];
  it.each(SYNCS)('%s (by keyset: %s): a full sync stores every record and tombstones nothing the provider still has', async (style, byKeyset, pagination) => {
    const plain = (cfg: Config) => ({ ...(byKeyset ? keyset(cfg) : cfg), auth: { type: 'none' } });
    // First the whole listing, asked for 3 a page (what the provider serves).
    const exact = plain(config(style, style === 'capped-page' ? { ...pagination, size: CAP } : { ...pagination, limit: CAP }));
    const id = await createHttpConnection(db.pool, exact, `capped-${randomUUID()}`);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, id, 'customers', 'full');
    const live = async () => [...(await storedRecords(db.pool, id, 'customers')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
    expect(await live()).toEqual(ITEMS.map((i) => i.id).sort());
    // Then asked for 5 a page: the provider still serves 3.
    await db.pool.query('update connections set config = $2 where id = $1', [id, plain(config(style, pagination))]);
    await runPass(deps, id, 'customers', 'full');
    const tombstoned = [...(await storedRecords(db.pool, id, 'customers')).values()].filter((r) => r.deleted_at !== null).map((r) => r.external_id);
    expect(tombstoned, 'records the provider still has, tombstoned').toEqual([]);
    expect(await live()).toEqual(ITEMS.map((i) => i.id).sort());
  });
});

describe('http connector: config', () => {
  it('is registered and lists its resources', () => {
    expect(getConnector('http')).toBe(httpConnector);
    expect(httpConnector.resourceTypes(config('link', { type: 'link_header' }))).toEqual(['customers']);
  });

  it('a page fetch parses its config once: the listing digest its page tokens carry comes from the config the fetch parsed', async () => {
    const cfg = config('link', { type: 'link_header' });
    // The listing's and its pagination's (every setting, defaults applied, by name).
    const paging = [['stable', true], ['type', 'link_header']];
    const listingDigest = createHash('sha256').update(JSON.stringify([httpConnector.listing!(cfg, 'customers')!, paging])).digest('base64url').slice(0, 16);
    const parses = vi.spyOn(httpConfigSchema, 'safeParse');
    try {
      const fetch = (pageToken: string | null) =>
        httpConnector.fetchPage({ resource: 'customers', since: null, until: null, pageToken, config: cfg, credentials: { token: TOKEN }, policy: TEST_PROVIDER_POLICY });
      const first = await fetch(null);
      expect(parses).toHaveBeenCalledTimes(1);
      parses.mockClear();
      const second = await fetch(first.nextPageToken);
      expect(parses).toHaveBeenCalledTimes(1);
      // The digest is still the listing's and pagination's: a resumed token of it goes on, and the next token carries it.
      expect(second.records.map((r) => r.externalId)).toEqual(ITEMS.slice(SIZE, 2 * SIZE).map((i) => i.id));
      expect(JSON.parse(Buffer.from(second.nextPageToken!, 'base64url').toString('utf8')).listing).toBe(listingDigest);
    } finally {
      parses.mockRestore();
    }
  });

  it('refuses invalid configs with errors naming each key', () => {
    const problem = (cfg: Config) => configProblem('http', cfg);
    expect(problem({ resources: { a: { path: '/a', id: 'id' } } })).toMatch(/^http connector: invalid config: base_url: /);
    expect(problem({ base_url: 'ftp://x', resources: {} })).toMatch(/base_url: must be an http\(s\) URL.*resources: must describe at least one resource/);
    expect(problem({ base_url: baseUrl, resources: { a: { path: 'a', id: 'id' } } })).toContain("resources.a.path: must be a path starting with '/'");
    expect(problem({ base_url: baseUrl, resources: { a: { path: '/a', id: 'not a path!' } } })).toContain('resources.a.id: must be a JSON path');
    expect(problem({ base_url: baseUrl, resources: { a: { path: '/a', id: 'id' } }, pagination: { type: 'scroll' } })).toMatch(/pagination(\.type)?: must be an object whose type is one of 'none', 'link_header'/);
    expect(problem({ base_url: baseUrl, resources: { a: { path: '/a', id: 'id' } }, pagination: { type: 'offset' } })).toContain('pagination.limit');
    expect(problem({ base_url: baseUrl, resources: { a: { path: '/a', id: 'id', since: { param: 's', format: 'rfc' } } } })).toContain('resources.a.since.format');
    expect(problem({ base_url: baseUrl, resources: { a: { path: '/a', id: 'id' } }, typo: 1 })).toMatch(/typo/);
    expect(problem({ base_url: baseUrl, resources: { a: { path: '/a', id: 'id', updated_at: 'u', order: 'change_ascending' } } }))
      .toBe("http connector: invalid config: resources.a.order: 'change_ascending' needs resources.a.since");
    expect(problem({ base_url: baseUrl, resources: { a: { path: '/a', id: 'id', order: 'newest' } } })).toContain("resources.a.order: must be one of 'unspecified', 'change_ascending'");
    expect(problem({ base_url: baseUrl, resources: { a: { path: '/a', id: 'id' } }, pagination: { type: 'offset', limit: 5, max_reads: 0 } }))
      .toContain('pagination.max_reads: must be an integer between 1 and 20');
    expect(problem({ base_url: baseUrl, auth: { type: 'oauth' }, resources: { a: { path: '/a', id: 'id' } } })).toMatch(/auth(\.type)?: must be an object whose type is one of 'none', 'bearer'/);
    expect(problem(config('link', { type: 'link_header' }))).toBeNull();
    expect(parseHttpConfig({ base_url: baseUrl, resources: { a: { path: '/a', id: 'id' } } })).toMatchObject({ auth: { type: 'none' }, pagination: { type: 'none' } });
  });

  it('refuses header names and values no request can carry, naming the key and never the value', () => {
    const problem = (extra: Config) => configProblem('http', { base_url: baseUrl, resources: { a: { path: '/a', id: 'id' } }, ...extra });
    // Rate-limit headers are looked up in every answer: a name that is no HTTP token makes each lookup throw.
    const limits = (remaining: string, reset: string) => ({ rate_limit: { remaining_header: remaining, reset_header: reset } });
    expect(problem(limits('X-RateLimit Remaining', 'x-ratelimit-reset'))).toBe('http connector: invalid config: rate_limit.remaining_header: must be a header name');
    expect(problem(limits('x-ratelimit-remaining', 'reset:at'))).toBe('http connector: invalid config: rate_limit.reset_header: must be a header name');
    expect(problem(limits('X_RateLimit.Remaining', 'x-ratelimit-reset'))).toBeNull();
    // A fixed header's value goes on every request: a line break or a character past Latin-1 makes each one fail.
    const value = 'secret-ish\r\nX-Injected: 1';
    const refused = problem({ headers: { 'X-Client': value } });
    expect(refused).toMatch(/^http connector: invalid config: headers\.X-Client: must be a header value/);
    expect(refused).not.toContain('secret-ish');
    expect(problem({ headers: { 'X-Client': 'caf\u00e9 \u2713' } })).toMatch(/^http connector: invalid config: headers\.X-Client: must be a header value/);
    expect(problem({ headers: { 'X-Client': 'caf\u00e9\tv1' } })).toBeNull();
  });

  it('refuses two roles in one query parameter (a page number, offset, page size, cursor, `since` or query secret overwrote another)', () => {
    const problem = (extra: Config, resource: Config = {}) => configProblem('http', { base_url: baseUrl, resources: { a: { path: '/a', id: 'id', ...resource } }, ...extra });
    // An offset and its limit in one parameter: the first request asked for offset `limit`, the records before it never read.
    expect(problem({ pagination: { type: 'offset', param: 'x', limit_param: 'x', limit: 3 } }))
      .toBe("http connector: invalid config: pagination.limit_param: 'x' is also pagination.param: each must be a query parameter of its own");
    expect(problem({ pagination: { type: 'page_number', size_param: 'page', size: 50 } }))
      .toBe("http connector: invalid config: pagination.size_param: 'page' is also pagination.param: each must be a query parameter of its own");
    expect(problem({ pagination: { type: 'page_number' } }, { since: { param: 'page' } }))
      .toBe("http connector: invalid config: resources.a.since.param: 'page' is also pagination.param: each must be a query parameter of its own");
    expect(problem({}, { since: { param: 'c' }, pagination: { type: 'cursor', path: 'next', param: 'c' } }))
      .toBe("http connector: invalid config: resources.a.since.param: 'c' is also resources.a.pagination.param: each must be a query parameter of its own");
    expect(problem({ auth: { type: 'query', name: 'offset' }, pagination: { type: 'offset', limit: 3 } }))
      .toBe("http connector: invalid config: auth.name: 'offset' is also pagination.param: each must be a query parameter of its own");
    // Query parameter names are case-sensitive.
    expect(problem({ pagination: { type: 'page_number', param: 'page', size_param: 'Page', size: 5 } })).toBeNull();
    expect(problem({ pagination: { type: 'cursor', path: 'next', param: 'since' } }, { since: { param: 'updated_since' } })).toBeNull();
  });

  it('declares which listings are consistent (a full sync may delete what they did not serve), and documents the keys in the schema', () => {
    const consistent = (style: string, pagination: Config, extra: Config = {}) => httpConnector.consistentListing!(config(style, pagination, extra), 'customers');
    expect(consistent('link', { type: 'link_header' })).toBe(true);
    expect(consistent('cursor', { type: 'cursor', path: 'meta.next_cursor', param: 'cursor', stable: false })).toBe(false);
    expect(consistent('page', { type: 'page_number', size: SIZE })).toBe(true);
    expect(consistent('offset', { type: 'offset', limit: SIZE, max_reads: 1 })).toBe(false);
    expect(consistent('link', { type: 'none' })).toBe(true);
    const schema = JSON.stringify(z.toJSONSchema(httpConfigSchema, { io: 'input' }));
    for (const text of ["'change_ascending': by `updated_at` ascending", 'Reads of a listing paged by position', "Whether the provider's next links/cursors are stable", 'One record by id']) {
      expect(schema).toContain(text);
    }
  });

  it('reads dotted JSON paths with indexes', () => {
    const body = { data: { items: [{ id: 1 }, { id: 2 }] }, links: [{ href: '/n' }] };
    expect(readPath(body, '$')).toBe(body);
    expect(readPath(body, 'data.items[1].id')).toBe(2);
    expect(readPath(body, '$.links[0].href')).toBe('/n');
    expect(readPath(body, 'data.missing.deep')).toBeUndefined();
  });
});

describe('http connector: equivalence with the github connector', () => {
  it('a config describing the GitHub API yields the same records as the github connector, for issues and pull requests', async () => {
    const gh = await startFakeGitHub({ repos: { 'octo/hello': { id: 12345, issues: 17, pulls: 12 } } });
    try {
      const credentials = { token: gh.token };
      const github = { base_url: gh.baseUrl, repositories: ['octo/hello'], per_page: 4 };
      const params = (direction: string) => ({ state: 'all', sort: 'updated', direction, per_page: '4' });
      const http = {
        base_url: gh.baseUrl,
        auth: { type: 'bearer' },
        headers: { Accept: 'application/vnd.github+json', 'X-GitHub-Api-Version': '2022-11-28' },
        pagination: { type: 'link_header' },
        resources: {
          issues: {
            path: '/repos/octo/hello/issues', params: params('asc'), id: 'number', id_prefix: 'octo/hello#', updated_at: 'updated_at',
            since: { param: 'since', format: 'iso8601' }, exclude_when_present: ['pull_request'],
          },
          pull_requests: { path: '/repos/octo/hello/pulls', params: params('desc'), id: 'number', id_prefix: 'octo/hello#', updated_at: 'updated_at' },
        },
      };
      // The github connector also names each record's partition (its repository), and pages issues
      // by keyset (serving the item at each page boundary twice); the http one has one partition.
      const sorted = (records: ConnectorRecord[]) =>
        [...new Map(records.map(({ partition: _partition, ...r }) => [r.externalId, r])).values()].sort((a, b) => a.externalId.localeCompare(b.externalId));
      for (const resource of ['issues', 'pull_requests']) {
        const viaGitHub = await pass(githubConnector, github, resource, { credentials });
        const viaHttp = await pass(httpConnector, http, resource, { credentials });
        // Pull requests come newest first: a pass of more than one page ends reading the head again
        // (a catch-up pass: the first page of 4 again, which reaches records older than its head: the end).
        expect(viaHttp.records.length).toBe(resource === 'issues' ? 17 : 12 + 4);
        expect(sorted(viaHttp.records)).toEqual(sorted(viaGitHub.records));
      }
      const since = new Date(Date.parse('2025-01-01T00:00:00Z') + 20 * 60_000);
      const newer = await pass(httpConnector, http, 'issues', { credentials, since });
      expect(sorted(newer.records)).toEqual(sorted((await pass(githubConnector, github, 'issues', { credentials, since })).records));
      expect(newer.records.length).toBeGreaterThan(0);
    } finally {
      await gh.close();
    }
  });
});

describe('http connector: reading a page hostile in its shape', () => {
  /**
   * The ids of the first page `cfg` reads, read by the http connector in a process of its own: the
   * read is synchronous work, which in this process would hold up the test's own timeout with it.
   */
  async function firstPageIds(cfg: Config): Promise<string[]> {
    const script = `
      const { httpConnector } = await import('./connectors/http.ts');
      const { DEFAULT_PROVIDER_POLICY } = await import('./connectors/provider-http.ts');
      const page = await httpConnector.fetchPage({ resource: 'customers', since: null, until: null, pageToken: null, config: JSON.parse(process.argv[1]), credentials: null, policy: { ...DEFAULT_PROVIDER_POLICY, allowPrivate: true } });
      console.log(JSON.stringify(page.records.map((r) => r.externalId)));`;
    // The child is stopped if it hangs (before, it ran for hours), so the test fails instead.
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, JSON.stringify(cfg)], { cwd: join(import.meta.dirname, '..'), timeout: 100_000, killSignal: 'SIGKILL' });
    return JSON.parse(stdout.trim().split('\n').pop()!) as string[];
  }

  it('a page padded with 2 MiB of whitespace before a 19-digit id is read, its id exact (its long integers were found by a pattern whose work grew with the square of the whitespace: hours, the worker blocked)', async () => {
    const page = `[${' '.repeat(2 * 1024 * 1024)}{"id": 1234567890123456789, "n": [1, 9007199254740993]}, {"id":  9223372036854775807 }]`;
    const server = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(page));
    const cfg = { base_url: server.url, auth: { type: 'none' }, pagination: { type: 'none' }, resources: { customers: { path: '/items', records: '$', id: 'id' } } };
    expect(await firstPageIds(cfg)).toEqual(['1234567890123456789', '9223372036854775807']);
  }, 120_000);
});
