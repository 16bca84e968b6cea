// Hostile and broken providers against the one provider HTTP function (connectors/provider-http.ts)
// and the github connector, with real HTTP servers on 127.0.0.1 only (SSRF, redaction,
// bounded responses, paging caps, NULs). No Temporal; Postgres only for the pg-error log test.
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { githubConnector } from '../connectors/github';
import { pagesOf, storableRecords } from '../connectors/pages';
import { DEFAULT_PROVIDER_POLICY, parseRetryAfter, providerGet, providerText, providerUrlProblem, redactSecrets } from '../connectors/provider-http';
import { Permanent, Transient, type Connector, type ProviderPolicy } from '../connectors/types';
import { immediateTaskQueue, loadConfig, providerPolicy } from '../lib/config';
import { pino } from 'pino';
import { serializeError } from '../lib/logger';
import { toActivityFailure } from '../services/connector-failure';
import { useTestDatabase } from './helpers/database';
import { closeFakeServers, gzipBomb, serve, serveRaw, serveTls } from './helpers/fake-server';

const TOKEN = 'ghp_H0stileProviderTestToken_0123456789ab';
/** The opt-in for test servers on 127.0.0.1 (PROVIDER_ALLOW_PRIVATE), otherwise the defaults. */
const TEST_POLICY: ProviderPolicy = { ...DEFAULT_PROVIDER_POLICY, allowPrivate: true };

afterEach(async () => {
  await closeFakeServers();
});

const issue = (number: number, extra: Record<string, unknown> = {}) => ({ id: number, number, title: `Issue ${number}`, updated_at: `2025-01-01T00:00:0${number % 10}Z`, ...extra });

/** One github page fetch with `policy`. */
const page = (base_url: string, policy: ProviderPolicy, opts: { pageToken?: string | null; credentials?: Record<string, unknown> } = {}) =>
  githubConnector.fetchPage({
    resource: 'issues',
    since: null,
    until: null,
    pageToken: opts.pageToken ?? null,
    config: { base_url, repositories: ['octo/hello'], resource_types: ['issues'] },
    credentials: opts.credentials ?? { token: TOKEN },
    policy,
  });

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

describe('SSRF: where provider requests may go', () => {
  it('refuses a connector pointed at 127.0.0.1 without the opt-in, before any request leaves', async () => {
    const fake = await serve((_req, res) => res.end('[]'));
    const err = await failure(page(fake.url, DEFAULT_PROVIDER_POLICY));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/refusing the provider URL/);
    // Even with the host allowed, plain http is refused without the opt-in.
    const http = await failure(page(fake.url, { ...DEFAULT_PROVIDER_POLICY, allowedHosts: ['127.0.0.1'] }));
    expect(http.message).toMatch(/must be an https URL/);
    // And over https with the host allowed, the loopback address itself is refused.
    const https = await failure(page(`https://127.0.0.1:${fake.port}`, { ...DEFAULT_PROVIDER_POLICY, allowedHosts: ['127.0.0.1'] }));
    expect(https).toBeInstanceOf(Permanent);
    expect(https.message).toMatch(/refused: url must not point at a loopback, private or link-local address/);
    expect(fake.connections).toBe(0);
    expect(fake.requests).toHaveLength(0);
    // With the opt-in, the same server is reachable.
    await expect(page(fake.url, TEST_POLICY)).resolves.toMatchObject({ records: [] });
    expect(fake.requests).toHaveLength(1);
  });

  it('checks the resolved address at connect time: an allowed name that resolves to a loopback address is refused, nothing connects', async () => {
    const fake = await serve((_req, res) => res.end('[]'));
    const name = hostname().toLowerCase();
    const err = await failure(page(`https://${name}:${fake.port}`, { ...DEFAULT_PROVIDER_POLICY, allowedHosts: [name] }));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/host not found or not allowed/);
    expect(err.message).not.toMatch(/127\.|::1/);
    expect(fake.connections).toBe(0);
  });

  it('the host allowlist, https and no userinfo: what providerUrlProblem refuses', () => {
    expect(providerUrlProblem('https://api.github.com/repos', DEFAULT_PROVIDER_POLICY)).toBeNull();
    expect(providerUrlProblem('https://evil.example/', DEFAULT_PROVIDER_POLICY)).toMatch(/PROVIDER_HOSTS/);
    expect(providerUrlProblem('http://api.github.com/', DEFAULT_PROVIDER_POLICY)).toMatch(/https/);
    expect(providerUrlProblem('https://user:pw@api.github.com/', DEFAULT_PROVIDER_POLICY)).toMatch(/credentials/);
    expect(providerUrlProblem('https://ghe.example.com/api/v3', { ...DEFAULT_PROVIDER_POLICY, allowedHosts: ['api.github.com', 'ghe.example.com'] })).toBeNull();
    for (const url of ['http://10.0.0.5:6379/', 'http://169.254.169.254/', 'http://[::ffff:127.0.0.1]/', 'http://[fd00::1]/']) {
      expect(providerUrlProblem(url, DEFAULT_PROVIDER_POLICY), url).not.toBeNull();
    }
    // The test opt-in admits loopback/private literals, never other public hosts.
    expect(providerUrlProblem('http://127.0.0.1:8080/', TEST_POLICY)).toBeNull();
    expect(providerUrlProblem('https://evil.example/', TEST_POLICY)).toMatch(/PROVIDER_HOSTS/);
  });

  it('refuses a redirect to another origin (which never sees a request) and follows one within the origin', async () => {
    const elsewhere = await serve((_req, res) => res.end('[]'));
    const fake = await serve((req, res) => {
      if (req.url!.startsWith('/repos/octo/hello/issues') && req.headers['x-hop'] === undefined) {
        res.writeHead(302, { location: `${elsewhere.url}/steal` }).end();
      }
    });
    const err = await failure(page(fake.url, TEST_POLICY));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/refusing a redirect \(302\) to another origin/);
    expect(elsewhere.requests).toHaveLength(0);

    // GitHub answers 301 for a renamed repository (keeping the query): followed within the origin,
    // with paging after it (the next page by keyset goes through the redirect again).
    const renamed = await serve((req, res, self) => {
      const query = req.url!.split('?')[1] ?? '';
      if (req.url!.startsWith('/repos/')) return res.writeHead(301, { location: `/repositories/7/issues?${query}` }).end();
      const n = Number(new URL(req.url!, 'http://x').searchParams.get('page') ?? '1');
      const link = n === 1 ? { link: `<${self.url}/repositories/7/issues?page=2>; rel="next"` } : {};
      res.writeHead(200, { 'content-type': 'application/json', ...link }).end(JSON.stringify([issue(n)]));
    });
    const pages = [];
    for await (const p of pagesOf(githubConnector, { resource: 'issues', since: null, until: null, config: { base_url: renamed.url, repositories: ['octo/hello'], resource_types: ['issues'] }, credentials: { token: TOKEN }, policy: TEST_POLICY }, null)) {
      pages.push(p);
    }
    // The first page lies wholly in one second it did not ask for: that second's own first page
    // follows (the same issue again, de-duplicated by the platform), then its page 2, then its first
    // page asked again (this server sends no ETag: served whole).
    expect(pages.map((p) => p.records.map((r) => r.externalId))).toEqual([['octo/hello#1'], ['octo/hello#1'], ['octo/hello#2'], ['octo/hello#1']]);
    const first = 'state=all&sort=updated&direction=asc&per_page=100';
    const second = `${first}&since=2025-01-01T00%3A00%3A01Z`;
    const third = `${second}&page=2`;
    expect(renamed.requests.map((r) => r.url)).toEqual([
      `/repos/octo/hello/issues?${first}`, `/repositories/7/issues?${first}`,
      `/repos/octo/hello/issues?${second}`, `/repositories/7/issues?${second}`,
      `/repos/octo/hello/issues?${third}`, `/repositories/7/issues?${third}`,
      `/repos/octo/hello/issues?${second}`, `/repositories/7/issues?${second}`,
    ]);
  });

  it('a Link to another origin is refused quoting its URL cut to about 500 characters, however long the header', async () => {
    // A Link to localhost (another origin than 127.0.0.1) as long as a response header may be.
    const fake = await serve((_req, res, self) => {
      const far = `${self.url.replace('127.0.0.1', 'localhost')}/steal?${'q=1&'.repeat(3_500)}`;
      res.writeHead(200, { 'content-type': 'application/json', link: `<${far}>; rel="next"` }).end(JSON.stringify([issue(1)]));
    });
    const err = await failure(page(fake.url, TEST_POLICY));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/refusing to follow Link header URL 'http:\/\/localhost:\d+\/steal\?q=1&q=1&/);
    expect(err.message.length).toBeLessThanOrEqual(1000);
  });

  it('a Link growing past 16 KiB (relative, one 12 KiB path segment deeper on each page, from a host taking URLs that long) fails as permanent naming the limit, before it becomes the page token', async () => {
    const fake = await serve(
      (_req, res) => res.writeHead(200, { 'content-type': 'application/json', link: `<${'s'.repeat(12 * 1024)}/>; rel="next"` }).end(JSON.stringify([issue(1)])),
      { maxHeaderSize: 64 * 1024 * 1024 },
    );
    const pulls = (pageToken: string | null) =>
      githubConnector.fetchPage({
        resource: 'pull_requests', since: null, until: null, pageToken, config: { base_url: fake.url, repositories: ['octo/hello'], resource_types: ['pull_requests'] },
        credentials: { token: TOKEN }, policy: TEST_POLICY,
      });
    const first = await pulls(null);
    expect(first.nextPageToken!.length).toBeLessThan(20_000);
    const err = await failure(pulls(first.nextPageToken));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/^github connector: the next URL from the Link header is \d+ characters, more than 16384 \(the longest next URL the connector follows\); not followed: 'http:\/\/127\.0\.0\.1:\d+\/repos\/octo\/hello\/s+/);
    expect(err.message.length).toBeLessThanOrEqual(1000);
    expect(fake.requests).toHaveLength(2);
  });

  it("a response whose header section passes Node's 16 KiB limit (HPE_HEADER_OVERFLOW) fails as permanent, naming the limit and the provider's host, not as a vague network error", async () => {
    // 20 KiB of headers, echoing the token: a provider's front end answering so answers so every time.
    const fake = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'x-padding': `${TOKEN} ${'p'.repeat(20 * 1024)}` }).end('[]'));
    const err = await failure(page(fake.url, TEST_POLICY));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toBe(
      "github connector: fetching 'octo/hello': the provider at '127.0.0.1' answered, but its response headers exceed 16384 bytes (16 KiB), Node's limit on a response's header section (--max-http-header-size)",
    );
    expect(err.message).not.toContain(String(fake.port));
    expect(err.message).not.toContain(TOKEN.slice(0, 8));
    expect(fake.requests).toHaveLength(1);
  });

  it('a provider whose TLS certificate is refused (expired, self-signed, from an untrusted issuer) fails as permanent, naming the host and why with Node\'s code (no port), not as a vague network error', async () => {
    const cases = [
      { certificate: 'expired', words: 'has expired (CERT_HAS_EXPIRED)' },
      { certificate: 'self-signed', words: 'is self-signed, not trusted (DEPTH_ZERO_SELF_SIGNED_CERT)' },
      { certificate: 'valid', words: 'is signed by an issuer that is not trusted (or the server does not send its intermediate certificates) (UNABLE_TO_VERIFY_LEAF_SIGNATURE)' },
    ] as const;
    for (const { certificate, words } of cases) {
      const fake = await serveTls(certificate, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('[]'));
      const err = await failure(page(fake.url, TEST_POLICY));
      expect(err, certificate).toBeInstanceOf(Permanent);
      expect(err.message, certificate).toBe(`github connector: fetching 'octo/hello': refusing the provider's TLS certificate: the certificate of 127.0.0.1 ${words}`);
      expect(err.message, certificate).not.toContain(String(fake.port));
      expect(fake.requests, certificate).toHaveLength(0);
    }
  });

  it('a provider answering malformed HTTP fails as permanent, naming what the parser found wrong and the host (no port, no secret of the URL), not as a vague network error', async () => {
    // Each answer, written byte for byte by a server that is no HTTP server; each comes the same
    // way on every retry.
    const malformed: [string, string][] = [
      ['HTTP/1.1 200 OK\r\nBad Header: x\r\ncontent-length: 2\r\n\r\n[]', 'a header name or value holds a character HTTP does not allow (HPE_INVALID_HEADER_TOKEN)'],
      ['HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n[]\r\n0\r\n\r\n', 'its chunked body has an invalid chunk size (HPE_INVALID_CHUNK_SIZE)'],
      ['SSH-2.0-OpenSSH_9.6\r\n', 'it does not begin with an HTTP/1.x status line: not an HTTP server, or not speaking HTTP/1.x (HPE_INVALID_CONSTANT)'],
      ['HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n[]', 'its Content-Length headers conflict (HPE_UNEXPECTED_CONTENT_LENGTH)'],
      ['HTTP/1.1 2x0 OK\r\ncontent-length: 2\r\n\r\n[]', 'its status line has an invalid status code (HPE_INVALID_STATUS)'],
    ];
    for (const [answer, words] of malformed) {
      const raw = await serveRaw(answer);
      const err = await failure(page(raw.url, TEST_POLICY));
      expect(err, words).toBeInstanceOf(Permanent);
      expect(err.message).toBe(`github connector: fetching 'octo/hello': the provider at '127.0.0.1' answered, but its response is not valid HTTP: ${words}`);
      expect(err.message).not.toContain(String(raw.port));
      // One request: nothing retried it.
      expect(raw.requests).toHaveLength(1);
      // A secret in the URL's path and query (an http connector's query auth) stays out of it.
      const secret = 'sk_live_InTheUrl_0123456789';
      const direct = await failure(providerGet(`${raw.url}/v1/${secret}/items?api_key=${secret}`, { headers: {}, policy: TEST_POLICY, context: 'http connector', secrets: [] }));
      expect(direct).toBeInstanceOf(Permanent);
      expect(direct.message).toBe(`http connector: the provider at '127.0.0.1' answered, but its response is not valid HTTP: ${words}`);
      await raw.close();
    }
  });

  it('an answer read whole (its Content-Length of body) is not failed by bytes the provider sent after it, which Node\'s parser refuses', async () => {
    // Two bytes of body more than Content-Length says, in the same packet: Node's parser reads them
    // as the start of a next answer (HPE_INVALID_CONSTANT) just after the whole first one.
    const raw = await serveRaw('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n[]xx');
    const result = await page(raw.url, TEST_POLICY);
    expect(result.records).toEqual([]);
    expect(raw.requests).toHaveLength(1);
  });

  it('a provider answering in a content coding it was not asked for (zstd, gzip twice) fails as permanent, naming the coding and the host, not as a vague network error', async () => {
    for (const [coding, quoted] of [['zstd', "'zstd'"], ['gzip, gzip', "'gzip, gzip'"], [`x-${TOKEN}`, 'that']] as const) {
      const fake = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': coding }).end('[]'));
      const err = await failure(page(fake.url, TEST_POLICY));
      expect(err, coding).toBeInstanceOf(Permanent);
      expect(err.message).toBe(
        `github connector: fetching 'octo/hello': the provider at '127.0.0.1' answered, but its response is in a content coding ${quoted} Synctide does not read (it asks for gzip, deflate or br)`,
      );
      expect(err.message).not.toContain(TOKEN.slice(0, 8));
      expect(fake.requests).toHaveLength(1);
      await fake.close();
    }
  });

  it('describes network errors in words that name no address or port', async () => {
    const fake = await serve(() => undefined);
    const { url, port } = fake;
    await fake.close();
    const err = await failure(page(url, TEST_POLICY));
    expect(err).toBeInstanceOf(Transient);
    expect(err.message).toBe("github connector: fetching 'octo/hello': network error: connection refused");
    expect(err.message).not.toContain(String(port));
  });

  it("refuses repositories with '.' or '..' segments and a base_url with user:password@", () => {
    for (const repositories of [['../user'], ['octo/..'], ['./x'], ['octo/.']]) {
      expect(() => githubConnector.resourceTypes({ repositories }), repositories[0]).toThrow(/repositories\[0\]: must not contain '\.' or '\.\.'/);
    }
    expect(githubConnector.resourceTypes({ repositories: ['octo/.github', 'octo/a.b'] })).toEqual(['issues', 'pull_requests']);
    expect(() => githubConnector.resourceTypes({ base_url: 'https://user:pw@api.github.com', repositories: ['octo/hello'] })).toThrow(/base_url/);
    expect(() => githubConnector.resourceTypes({ repositories: Array.from({ length: 101 }, (_, i) => `octo/r${i}`) })).toThrow(/at most 100/);
  });
});

describe('redaction of provider text', () => {
  it('redacts first (exact token, Bearer/token values), then cuts to about 500 characters', async () => {
    // The token straddles character 200, where the old code cut before redacting.
    const message = `${'x'.repeat(190)} ${TOKEN} then Authorization: Bearer other-secret-value-42 and token abcdefgh12345678 ${'y'.repeat(3000)}`;
    const fake = await serve((_req, res) => res.writeHead(422, { 'content-type': 'application/json' }).end(JSON.stringify({ message })));
    const err = await failure(page(fake.url, TEST_POLICY));
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toContain('[redacted]');
    expect(err.message).not.toContain(TOKEN.slice(0, 12));
    expect(err.message).not.toContain('other-secret-value-42');
    expect(err.message).not.toContain('abcdefgh12345678');
    expect(err.message.length).toBeLessThanOrEqual(600);
    // A plain-text body with the token at the old cut (200 characters): no prefix of it survives.
    const plain = await serve((_req, res) => res.writeHead(422).end(`${'x'.repeat(185)} ${TOKEN}`));
    const cut = await failure(page(plain.url, TEST_POLICY));
    expect(cut.message).toMatch(/x \[redacted\]$/);
    expect(cut.message).not.toContain(TOKEN.slice(0, 8));
    expect(redactSecrets('see ghp_abcdefghijklmnopqrstuvwx here')).toBe('see [redacted] here');
    expect(providerText('z'.repeat(2000)).length).toBe(500);
  });

  it('refuses a token of the wrong shape (a 1-character token would garble every message)', async () => {
    const fake = await serve((_req, res) => res.end('[]'));
    for (const token of ['x', 'short-token', 'has spaces in it 0123456789']) {
      const err = await failure(page(fake.url, TEST_POLICY, { credentials: { token } }));
      expect(err).toBeInstanceOf(Permanent);
      expect(err.message).toMatch(/credentials: token: must be a GitHub token/);
      expect(err.message).not.toContain(token);
    }
    expect(fake.requests).toHaveLength(0);
    expect(githubConnector.credentialsProblem!({ token: TOKEN })).toBeNull();
  });
});

describe('bounded responses', () => {
  it('a gzip bomb fails with a clear error at the byte cap and the RSS stays under cap + 100 MiB', async () => {
    // 64 MiB of one byte compresses to ~64 KiB; sent as 16 gzip members it expands to 1 GiB.
    const { member, handler } = gzipBomb();
    const fake = await serve(handler);
    expect(member.length).toBeLessThan(1024 * 1024);
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    try {
      const err = await failure(page(fake.url, TEST_POLICY));
      expect(err).toBeInstanceOf(Permanent);
      expect(err.message).toBe(`github connector: fetching 'octo/hello': the response body exceeds ${10 * 1024 * 1024} bytes (PROVIDER_MAX_RESPONSE_BYTES)`);
    } finally {
      clearInterval(sample);
    }
    peak = Math.max(peak, process.memoryUsage().rss);
    expect(peak - before).toBeLessThan(DEFAULT_PROVIDER_POLICY.maxResponseBytes + 100 * 1024 * 1024);
  });

  it('a provider that never answers is cut off by the per-request timeout', async () => {
    const fake = await serve(() => undefined);
    const err = await failure(providerGet(`${fake.url}/slow`, { headers: {}, context: 'test', policy: { ...TEST_POLICY, timeoutMs: 300 } }));
    expect(err).toBeInstanceOf(Transient);
    expect(err.message).toBe('test: timed out after 0.3 s (PROVIDER_REQUEST_TIMEOUT_SECONDS)');
    expect(fake.requests).toHaveLength(1);
  });

  it('caps pages and records per task and the size of one record, and strips NULs from provider data', async () => {
    const endless: Connector = {
      slug: 'endless',
      resourceTypes: () => ['items'],
      fetchPage: async ({ pageToken }) => {
        const n = Number(pageToken ?? 0);
        return { records: [{ externalId: `i${n}\u0000`, updatedAt: null, data: { n, ['ke\u0000y']: ['a\u0000b', { c: 'd\u0000' }] } }], nextPageToken: String(n + 1) };
      },
    };
    const request = { resource: 'items', since: null, until: null, config: {}, credentials: null };
    const collect = async (policy: ProviderPolicy, done = { pages: 0, records: 0 }) => {
      const seen = [];
      try {
        for await (const p of pagesOf(endless, { ...request, policy }, null, done)) seen.push(p);
      } catch (err) {
        return { seen, err: err as Error };
      }
      return { seen, err: null };
    };
    const pages = await collect({ ...DEFAULT_PROVIDER_POLICY, maxPagesPerTask: 3 });
    expect(pages.seen).toHaveLength(3);
    expect(pages.err).toBeInstanceOf(Permanent);
    expect(pages.err!.message).toMatch(/more than 3 pages in one task \(PROVIDER_MAX_PAGES_PER_TASK\)/);
    expect(pages.seen[0]!.records[0]).toEqual({ externalId: 'i0', updatedAt: null, data: { n: 0, key: ['ab', { c: 'd' }] } });
    // A resumed task counts what its earlier runs fetched.
    const resumed = await collect({ ...DEFAULT_PROVIDER_POLICY, maxPagesPerTask: 3 }, { pages: 2, records: 2 });
    expect(resumed.seen).toHaveLength(1);
    const records = await collect({ ...DEFAULT_PROVIDER_POLICY, maxRecordsPerTask: 4 });
    expect(records.seen).toHaveLength(4);
    expect(records.err!.message).toMatch(/more than 4 records in one task \(PROVIDER_MAX_RECORDS_PER_TASK\)/);
    const big = await collect({ ...DEFAULT_PROVIDER_POLICY, maxRecordBytes: 10 });
    expect(big.seen).toHaveLength(0);
    expect(big.err).toBeInstanceOf(Permanent);
    expect(big.err!.message).toMatch(/exceeds 10 bytes \(PROVIDER_MAX_RECORD_BYTES\)/);
  });

  it('refuses a record nested too deeply to be written or served again (Permanent, naming it), and stores one just within the bound', async () => {
    const nested = (depth: number) => {
      let data: unknown = 'leaf';
      for (let i = 0; i < depth; i++) data = [data];
      return data as Record<string, unknown>;
    };
    const deep = (depth: number): Connector => ({
      slug: 'deep',
      resourceTypes: () => ['items'],
      fetchPage: async () => ({ records: [{ externalId: `d${depth}`, updatedAt: null, data: nested(depth) }], nextPageToken: null }),
    });
    const request = { resource: 'items', since: null, until: null, config: {}, credentials: null, policy: DEFAULT_PROVIDER_POLICY };
    const outcome = async (depth: number) => {
      try {
        for await (const p of pagesOf(deep(depth), request, null)) return p.records.length;
      } catch (err) {
        return err as Error;
      }
      return 0;
    };
    // Deeper than JSON.stringify can go: the retry would fetch it again, so it fails for good.
    const tooDeep = await outcome(20_000);
    expect(tooDeep).toBeInstanceOf(Permanent);
    expect((tooDeep as Error).message).toBe("record 'd20000' of 'items' is nested too deeply to store (more than about 4,000 levels of arrays and objects)");
    expect(await outcome(1_000)).toBe(1);
  });

  it('a record too large or nested too deeply is named redacted first, then cut: a secret across the cut of its id leaves no prefix (listing pages and re-checked records)', async () => {
    // Not a known token shape: only the exact value of the connection's credentials redacts it.
    const secret = 'tok_record_secret_987654321';
    const id = `${'r'.repeat(190)}${secret}`;
    const nested = (depth: number) => {
      let data: unknown = 'leaf';
      for (let i = 0; i < depth; i++) data = [data];
      return data as Record<string, unknown>;
    };
    const records = { large: [{ externalId: id, updatedAt: null, data: { padding: 'x'.repeat(100) } }], deep: [{ externalId: id, updatedAt: null, data: nested(20_000) }] };
    const policy = { ...DEFAULT_PROVIDER_POLICY, maxRecordBytes: 50 };
    for (const [kind, page] of Object.entries(records)) {
      const one: Connector = { slug: 'one', resourceTypes: () => ['items'], fetchPage: async () => ({ records: page, nextPageToken: null }) };
      const request = { resource: 'items', since: null, until: null, config: {}, credentials: null, policy };
      let listed: unknown = null;
      try {
        for await (const p of pagesOf(one, request, null, undefined, () => [secret])) void p;
      } catch (err) {
        listed = err;
      }
      let rechecked: unknown = null;
      try {
        storableRecords(page, policy.maxRecordBytes, 'items', () => [secret]);
      } catch (err) {
        rechecked = err;
      }
      for (const err of [listed, rechecked]) {
        expect(err, kind).toBeInstanceOf(Permanent);
        // What leaves the activity, redacted once more with the exact values.
        const message = (toActivityFailure(err, [secret]) as Error).message;
        expect(message, kind).toMatch(/^record 'r+\[redacted\]' of 'items' (exceeds 50 bytes|is nested too deeply)/);
        expect(message, kind).not.toContain(secret.slice(0, 4));
      }
    }
  });

  it('cuts a provider error body to about 500 characters at the connector', async () => {
    const fake = await serve((_req, res) => res.writeHead(503).end('z'.repeat(100_000)));
    const err = await failure(page(fake.url, TEST_POLICY));
    expect(err).toBeInstanceOf(Transient);
    expect(err.message).toMatch(/GitHub answered 503/);
    expect(err.message.length).toBeLessThanOrEqual(600);
  });
});

describe('sizing a record as stored', () => {
  it('takes work in proportion to the record, not to the square of its runs of digits (2 MiB of digit runs just short of the longest number the database holds is sized at once, not after minutes of a blocked worker)', () => {
    const digits = `${'1'.repeat(16_383)}x`.repeat(128);
    const record = { externalId: 'r', updatedAt: null, data: { text: digits, n: 1e21 } };
    expect(storableRecords([record], 4 * 1024 * 1024, 'items')).toEqual([record]);
  });
});

describe('provider configuration', () => {
  it('reads PROVIDER_* and IMMEDIATE_SYNC_* into the policy, with the documented defaults', () => {
    expect(providerPolicy(loadConfig({}))).toEqual(DEFAULT_PROVIDER_POLICY);
    expect(providerPolicy(loadConfig({ PROVIDER_HOSTS: 'api.github.com, GHE.example.com', PROVIDER_MAX_RESPONSE_BYTES: '1024', PROVIDER_ALLOW_PRIVATE: 'true' }))).toEqual({
      ...DEFAULT_PROVIDER_POLICY,
      allowedHosts: ['api.github.com', 'ghe.example.com'],
      maxResponseBytes: 1024,
      allowPrivate: true,
    });
    expect(() => loadConfig({ PROVIDER_HOSTS: 'https://ghe.example.com' })).toThrow(/PROVIDER_HOSTS: must be a comma-separated list of host names/);
    expect(() => loadConfig({ PROVIDER_REQUEST_TIMEOUT_SECONDS: '0' })).toThrow(/PROVIDER_REQUEST_TIMEOUT_SECONDS/);
    expect(immediateTaskQueue(loadConfig({}))).toBe('synctide-immediate');
    expect(immediateTaskQueue(loadConfig({ IMMEDIATE_SYNC_TASK_QUEUE: 'fast-lane' }))).toBe('fast-lane');
    expect(loadConfig({}).IMMEDIATE_SYNC_SLOTS).toBe(4);
  });
});

describe('Postgres errors in logs', () => {
  const db = useTestDatabase();

  it('logs a failed statement without where, detail or parameters (which quote the neighbouring values)', async () => {
    const err = await db.pool
      .query(`select $1::jsonb`, [`{"token": "${TOKEN}", "bad": "\\u0000"}`])
      .then(() => null, (e: unknown) => e as Error & { where?: string; detail?: string });
    expect(err).not.toBeNull();
    // What Postgres says quotes the statement's neighbouring values (`where`: "JSON data, line 1:
    // ...<the token's tail>"): pino's own serializer would log them.
    const tail = TOKEN.slice(-20);
    expect(JSON.stringify(pino.stdSerializers.err(err!))).toContain(tail);
    const logged = JSON.stringify(serializeError(err));
    expect(logged).toContain(err!.message);
    expect(logged).not.toContain(tail);
    expect(logged).not.toMatch(/"where"|"detail"/);
  });
});

describe('Retry-After (RFC 9110: delay-seconds or an HTTP-date)', () => {
  const now = Date.parse('2025-06-01T12:00:00Z');

  it('reads delay-seconds and the HTTP-date forms (IMF-fixdate; the obsolete RFC 850 and asctime), and ignores anything else, which Date.parse read as some date (a wait of years, or none)', () => {
    expect(parseRetryAfter('120', now)).toBe(120);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Sun, 01 Jun 2025 12:01:30 GMT', now)).toBe(90);
    expect(parseRetryAfter('Sun, 01 Jun 2025 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('Sunday, 01-Jun-25 12:01:30 GMT', now)).toBe(90);
    expect(parseRetryAfter('Sun Jun  1 12:01:30 2025', now)).toBe(90);
    expect(parseRetryAfter('Sun Jun 01 12:01:30 2025', now)).toBe(90);
    // An RFC 850 year more than 50 years ahead is the most recent past year with those digits.
    expect(parseRetryAfter('Thursday, 01-Jun-95 12:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('Monday, 01-Jun-26 12:00:00 GMT', now)).toBe(365 * 86_400);
    for (const garbage of [
      'x 2030', '0.5', '1.5', '-1', '+5', '1e3', 'soon', 'tomorrow 1', '', ' ',
      'Sun, 01 Jun 2030', '2030-06-01T12:00:00Z', 'Sun, 01 Jun 2030 12:00:00 +0000', 'Sun, 01 Jun 2030 12:00:00 UTC',
      'sun, 01 jun 2030 12:00:00 gmt', 'Sun, 1 Jun 2030 12:00:00 GMT', 'Sun, 31 Jun 2030 12:00:00 GMT', 'Sun, 01 Jun 2030 24:00:00 GMT',
      'Sun, 01 Jun 2030 12:00:00 GMT x', 'Sunday, 01-Jun-2030 12:00:00 GMT', 'Sun Jun 1 12:00:00 2030',
    ]) {
      expect(parseRetryAfter(garbage, now), JSON.stringify(garbage)).toBeUndefined();
    }
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});
