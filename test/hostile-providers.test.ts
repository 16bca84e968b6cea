// Hostile providers and oversized input through the real API, worker, Postgres and the Temporal
// dev server, with fake providers on 127.0.0.1: credentials bound to the provider origin and the host allowlist, input size caps
// and NULs, a gzip bomb failing its task, a next URL of megabytes failing its job for good, and
// immediate syncs (one per connection, their own task queue and slots, cancellation reaching a
// request in flight).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Worker } from '@temporalio/worker';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PROVIDER_POLICY } from '../connectors/provider-http';
import { openCredentials } from '../lib/credentials';
import { createImmediateWorker } from '../workers/create-worker';
import { DEFAULT_TENANT_LIMITS } from '../policy/tenant-limits';
import { startTestApi, type TestApi } from './helpers/api';
import { TEST_KEYRING, testActivityDeps } from './helpers/deps';
import { closeFakeServers, gzipBomb, serve } from './helpers/fake-server';
import { recordHistory } from './helpers/histories';
import { useWorkerStack } from './helpers/stack';
import { eventually, synctideBundle } from './helpers/worker';

const TASK_QUEUE = 'hardening';
const IMMEDIATE_QUEUE = 'hardening-immediate';
const TOKEN = 'ghp_HardeningStackToken_0123456789abcd';

/** A GitHub issues listing of `items` (one page). */
const listing = (items: string) => (_req: IncomingMessage, res: ServerResponse) =>
  res.writeHead(200, { 'content-type': 'application/json' }).end(items);

describe('hostile providers and oversized input', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let api: TestApi;
  let strict: TestApi;
  let impatient: TestApi;
  let immediateWorker: Worker;
  let immediateRunning: Promise<void>;

  beforeAll(async () => {
    // The API as tests deploy it (fake providers on 127.0.0.1 allowed), immediate syncs on their own queue.
    // Its tenant may run more immediate syncs at once than the one slot: the flood below is about the slots.
    api = await startTestApi(stack, TASK_QUEUE, { immediateTaskQueue: IMMEDIATE_QUEUE, tenantLimits: { ...DEFAULT_TENANT_LIMITS, immediateSyncs: 10 } });
    // As in production: api.github.com only, https only.
    strict = await startTestApi(stack, TASK_QUEUE, { providers: DEFAULT_PROVIDER_POLICY });
    impatient = await startTestApi(stack, TASK_QUEUE, { immediateTaskQueue: IMMEDIATE_QUEUE, immediateSyncTimeoutMs: 2000 });
    // One slot for immediate syncs: a flood of them queues here, not on the scheduled work's queue.
    const { deps } = testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue: TASK_QUEUE });
    immediateWorker = await createImmediateWorker({
      connection: stack.env.nativeConnection,
      namespace: 'default',
      shutdownGraceSeconds: 5,
      taskQueue: IMMEDIATE_QUEUE,
      slots: 1,
      workflowBundle: await synctideBundle(),
      activities: deps,
      pool: stack.db.pool,
    });
    immediateRunning = immediateWorker.run();
  });
  afterEach(async () => {
    await closeFakeServers();
  });
  afterAll(async () => {
    if (immediateWorker?.getState() === 'RUNNING') immediateWorker.shutdown();
    await immediateRunning;
    await Promise.all([api, strict, impatient].map((a) => a?.server.close()));
  });

  let seq = 0;
  /** Creates a connection through `target`; answers as the API did. */
  const create = (target: TestApi, body: Record<string, unknown>) =>
    target.call('POST', '/connections', { tenant_id: 'acme', app_key: `c${++seq}`, schedule: { interval_seconds: 86_400 }, ...body });

  /** The first finished job of a connection (its bootstrap run). */
  const finishedJob = (connectionId: string) =>
    eventually(async () => {
      const res = await api.call('GET', `/jobs?connection_id=${connectionId}`);
      const job = res.body.items?.find((j: any) => ['completed', 'failed', 'cancelled'].includes(j.status));
      return job ? (await api.call('GET', `/jobs/${job.id}?include_tasks=true`)).body : undefined;
    });

  it('binds credentials to the provider origin: moving base_url clears them unless given again', async () => {
    const first = await serve(listing('[]'));
    const second = await serve(listing('[]'));
    const config = { base_url: first.url, repositories: ['octo/hello'] };
    const created = await create(api, { provider: 'github', status: 'paused', config, credentials: { token: TOKEN } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id;
    // Stored sealed: opened with the tests' key to compare.
    const stored = async () => openCredentials(TEST_KEYRING, id, (await stack.db.pool.query('select credentials from connections where id = $1', [id])).rows[0].credentials);

    // Same origin (another setting): the token stays.
    const same = await api.call('PATCH', `/connections/${id}`, { config: { ...config, per_page: 50 } });
    expect(same.status, JSON.stringify(same.body)).toBe(200);
    expect(same.body.has_credentials).toBe(true);

    // Another origin without credentials: cleared, so the token can never be sent there.
    const moved = await api.call('PATCH', `/connections/${id}`, { config: { ...config, base_url: second.url } });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect(moved.body.has_credentials).toBe(false);
    expect(await stored()).toBeNull();

    // Another origin with credentials in the same request: kept.
    const back = await api.call('PATCH', `/connections/${id}`, { config, credentials: { token: TOKEN } });
    expect(back.body.has_credentials).toBe(true);
    expect(await stored()).toEqual({ token: TOKEN });
    expect(first.requests).toHaveLength(0);
    expect(second.requests).toHaveLength(0);
  });

  it('refuses hop-by-hop, framing, host-routing and cookie headers in an http config, and an auth-scheme change clears credentials', async () => {
    const provider = await serve(listing('[]'));
    const config = (extra: Record<string, unknown>) => ({ base_url: provider.url, resources: { items: { path: '/items', id: 'id' } }, ...extra });
    const cases: [Record<string, unknown>, string, string][] = [
      [{ headers: { Host: 'internal.example' } }, 'headers.Host', 'Host'],
      [{ headers: { Accept: 'application/json', 'Transfer-Encoding': 'chunked' } }, 'headers.Transfer-Encoding', 'Transfer-Encoding'],
      [{ headers: { cookie: 'session=1' } }, 'headers.cookie', 'cookie'],
      [{ headers: { 'Content-Length': '0' } }, 'headers.Content-Length', 'Content-Length'],
      [{ headers: { 'X-Forwarded-Host': 'admin.internal' } }, 'headers.X-Forwarded-Host', 'X-Forwarded-Host'],
      [{ auth: { type: 'header', name: 'Host' } }, 'auth.name', 'Host'],
      [{ auth: { type: 'header', name: 'Connection' } }, 'auth.name', 'Connection'],
    ];
    for (const [extra, key, name] of cases) {
      const res = await create(api, { provider: 'http', status: 'paused', config: config(extra), credentials: { token: TOKEN } });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(JSON.stringify(res.body)).toContain(`${key}: '${name}' may not be set by a connection`);
    }

    const header = config({ auth: { type: 'header', name: 'X-Api-Key' }, headers: { 'X-Client': 'synctide' } });
    const created = await create(api, { provider: 'http', status: 'paused', config: header, credentials: { token: TOKEN } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id;
    const stored = async () => openCredentials(TEST_KEYRING, id, (await stack.db.pool.query('select credentials from connections where id = $1', [id])).rows[0].credentials);
    // The same scheme and header (its name in another case), another setting: the token stays.
    const same = await api.call('PATCH', `/connections/${id}`, { config: { ...header, auth: { type: 'header', name: 'x-api-key' }, headers: {} } });
    expect(same.status, JSON.stringify(same.body)).toBe(200);
    expect(same.body.has_credentials).toBe(true);
    // Another header name: cleared, as an origin move clears them.
    const renamed = await api.call('PATCH', `/connections/${id}`, { config: { ...header, auth: { type: 'header', name: 'X-Other-Key' } } });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(renamed.body.has_credentials).toBe(false);
    expect(await stored()).toBeNull();
    // Header → query with credentials in the same request: kept; then query → bearer without: cleared.
    const query = await api.call('PATCH', `/connections/${id}`, { config: { ...header, auth: { type: 'query', name: 'api_key' } }, credentials: { token: TOKEN } });
    expect(query.body.has_credentials).toBe(true);
    expect(await stored()).toEqual({ token: TOKEN });
    const bearer = await api.call('PATCH', `/connections/${id}`, { config: { ...header, auth: { type: 'bearer' } } });
    expect(bearer.status, JSON.stringify(bearer.body)).toBe(200);
    expect(bearer.body.has_credentials).toBe(false);
    expect(provider.requests).toHaveLength(0);
  });

  it('allows only PROVIDER_HOSTS over https, and refuses tokens of the wrong shape, naming the field', async () => {
    for (const [base_url, rule] of [
      ['https://evil.example', /config\.base_url: host 'evil\.example' is not an allowed provider host \(PROVIDER_HOSTS\)/],
      ['http://api.github.com', /config\.base_url: must be an https URL/],
      ['http://127.0.0.1:9', /config\.base_url/],
      ['https://user:secret@api.github.com', /base_url/],
    ] as const) {
      const res = await create(strict, { provider: 'github', status: 'paused', config: { base_url, repositories: ['octo/hello'] } });
      expect(res.status, base_url).toBe(400);
      expect(res.body.error.message).toMatch(rule);
    }
    // The default host passes (paused: nothing is fetched from the real GitHub).
    const ok = await create(strict, { provider: 'github', status: 'paused', config: { repositories: ['octo/hello'] }, credentials: { token: TOKEN } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);

    const short = await create(api, { provider: 'github', status: 'paused', config: { repositories: ['octo/hello'] }, credentials: { token: 'x' } });
    expect(short.status).toBe(400);
    expect(short.body.error.message).toMatch(/credentials.*token: must be a GitHub token/);
    const patched = await api.call('PATCH', `/connections/${ok.body.id}`, { credentials: { token: 'x' } });
    expect(patched.status).toBe(400);
    expect(patched.body.error.message).toMatch(/credentials\.token: must be a GitHub token/);
    const dots = await create(api, { provider: 'github', status: 'paused', config: { repositories: ['../user'] } });
    expect(dots.status).toBe(400);
    expect(dots.body.error.message).toMatch(/repositories/);
  });

  it('caps config, credentials, payload and arrays, and refuses NUL characters with 400', async () => {
    const before = Number((await stack.db.pool.query('select count(*) from connections')).rows[0].count);
    const big = await create(api, { provider: 'demo', config: { seed: 'x'.repeat(70_000) } });
    expect(big.status).toBe(400);
    expect(big.body.error.message).toMatch(/config: must be at most 64 KiB as JSON/);
    const secrets = await create(api, { provider: 'demo', credentials: { blob: 'x'.repeat(17_000) } });
    expect(secrets.status).toBe(400);
    expect(secrets.body.error.message).toMatch(/credentials: must be at most 16 KiB as JSON/);
    const repos = await create(api, { provider: 'github', status: 'paused', config: { repositories: Array.from({ length: 101 }, (_, i) => `octo/r${i}`) } });
    expect(repos.status).toBe(400);
    expect(repos.body.error.message).toMatch(/at most 100 repositories/);
    const payload = await api.call('POST', '/jobs/schedule', {
      pairId: '00000000-0000-4000-8000-000000000000',
      window: { start: '2025-01-01T00:00:00Z', end: '2025-01-02T00:00:00Z' },
      payload: { note: 'x'.repeat(70_000) },
    });
    expect(payload.status).toBe(400);
    expect(payload.body.error.message).toMatch(/payload: must be at most 64 KiB as JSON/);
    const types = await api.call('POST', '/sync', { tenant_id: 'acme', app_key: 'whatever', resource_types: Array.from({ length: 51 }, (_, i) => `t${i}`) });
    expect(types.status).toBe(400);

    const nul = await create(api, { provider: 'github', status: 'paused', config: { repositories: ['octo/hello'] }, credentials: { token: `${TOKEN}\u0000` } });
    expect(nul.status).toBe(400);
    expect(nul.body.error).toEqual({ code: 'invalid_request', message: 'body: must not contain NUL (\\u0000) characters' });
    expect(JSON.stringify(nul.body)).not.toContain(TOKEN);
    const query = await api.call('GET', '/connections?tenant_id=a%00b');
    expect(query.status).toBe(400);
    expect(Number((await stack.db.pool.query('select count(*) from connections')).rows[0].count)).toBe(before);
  });

  it('strips NULs from provider data before storing it', async () => {
    const fake = await serve(listing('[{"number": 1, "title": "a\\u0000b", "updated_at": "2025-01-01T00:00:00Z", "lab\\u0000el": ["x\\u0000"]}]'));
    const created = await create(api, { provider: 'github', config: { base_url: fake.url, repositories: ['octo/hello'], resource_types: ['issues'] }, credentials: { token: TOKEN } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const job = await finishedJob(created.body.id);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    const { rows } = await stack.db.pool.query('select external_id, data from records where connection_id = $1', [created.body.id]);
    expect(rows).toEqual([{ external_id: 'octo/hello#1', data: { number: 1, title: 'ab', updated_at: '2025-01-01T00:00:00Z', label: ['x'] } }]);
  });

  it('stores provider strings holding a UTF-16 surrogate without its pair with U+FFFD in its place (Postgres refuses the lone surrogate)', async () => {
    // A provider that cut a string between the two halves of an emoji, in a value and in a key.
    const fake = await serve(listing('[{"number": 1, "title": "cut \\ud83d", "updated_at": "2025-01-01T00:00:00Z", "x\\ude00y": ["\\ud83d\\ude00 whole", "\\udc00\\ud800"]}]'));
    const created = await create(api, { provider: 'github', config: { base_url: fake.url, repositories: ['octo/hello'], resource_types: ['issues'] }, credentials: { token: TOKEN } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const job = await finishedJob(created.body.id);
    expect(job.status, JSON.stringify(job)).toBe('completed');
    const { rows } = await stack.db.pool.query('select external_id, data from records where connection_id = $1', [created.body.id]);
    expect(rows).toEqual([{ external_id: 'octo/hello#1', data: { number: 1, title: 'cut \uFFFD', updated_at: '2025-01-01T00:00:00Z', 'x\uFFFDy': ['😀 whole', '\uFFFD\uFFFD'] } }]);
  });

  it('a gzip bomb fails its task with a clear error, and the worker RSS stays under the cap + 100 MiB', async () => {
    // ~64 KiB of gzip expanding to 64 MiB, sent 16 times: 1 GiB once decompressed.
    const fake = await serve(gzipBomb().handler);
    const before = process.memoryUsage().rss;
    let peak = before;
    const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    try {
      const created = await create(api, { provider: 'github', config: { base_url: fake.url, repositories: ['octo/hello'], resource_types: ['issues'] }, credentials: { token: TOKEN } });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const job = await finishedJob(created.body.id);
      expect(job.status).toBe('failed');
      expect(job.tasks[0].status).toBe('failed');
      expect(job.tasks[0].error_message).toContain(`the response body exceeds ${10 * 1024 * 1024} bytes (PROVIDER_MAX_RESPONSE_BYTES)`);
    } finally {
      clearInterval(sample);
    }
    expect(fake.requests.length).toBeGreaterThanOrEqual(1);
    // The worker runs in this process: its RSS is this process's.
    expect(Math.max(peak, process.memoryUsage().rss) - before).toBeLessThan(DEFAULT_PROVIDER_POLICY.maxResponseBytes + 100 * 1024 * 1024);
  });

  it('a provider answering a next URL of 3 MiB (and taking URLs that long) fails the job for good at once, naming the limit; nothing of it is stored, heartbeated or requested', async () => {
    const HUGE = 3 * 1024 * 1024;
    const fake = await serve(
      (req, res) => {
        const n = Number(new URL(req.url ?? '/', 'http://fake').searchParams.get('n') ?? 0);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ data: [{ id: `i${n}` }], next: n >= 3 ? null : `/items?n=${n + 1}&c=${'x'.repeat(HUGE)}` }));
      },
      { maxHeaderSize: 64 * 1024 * 1024 },
    );
    const config = { base_url: fake.url, resources: { items: { path: '/items', id: 'id', records: 'data' } }, pagination: { type: 'next_url', path: 'next' } };
    const created = await create(api, { provider: 'http', config });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // Its first job once it stopped running: ended, or waiting to retry.
    const job = await eventually(async () => {
      const res = await api.call('GET', `/jobs?connection_id=${created.body.id}`);
      const found = res.body.items?.find((j: any) => ['completed', 'failed', 'cancelled', 'retrying'].includes(j.status));
      return found ? (await api.call('GET', `/jobs/${found.id}?include_tasks=true`)).body : undefined;
    });
    expect(job.status, JSON.stringify(job)).toBe('failed');
    expect(job.retry_count).toBe(0);
    expect(job.tasks[0].error_message).toMatch(/the next URL from the body 'next' is \d+ characters, more than 16384 \(the longest next URL the connector follows\)/);
    expect(job.tasks[0].error_message.length).toBeLessThanOrEqual(1000);
    const { rows } = await stack.db.pool.query<{ token: number | null }>(
      'select max(length(t.page_token)) as token from sync_tasks t join sync_jobs j on j.id = t.job_id where j.connection_id = $1',
      [created.body.id],
    );
    expect(rows[0]!.token ?? 0).toBeLessThan(20_000);
    expect(fake.requests).toHaveLength(1);
  });

  it("a provider answering response headers past Node's 16 KiB limit fails the job for good at once (github and http), naming the limit and the provider's host; no token in the error", async () => {
    // 20 KiB of headers echoing the token: a front end answering so answers so on every retry.
    const fake = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'x-padding': `${TOKEN} ${'p'.repeat(20 * 1024)}` }).end('[]'));
    const configs: [string, Record<string, unknown>][] = [
      ['github', { base_url: fake.url, repositories: ['octo/hello'], resource_types: ['issues'] }],
      ['http', { base_url: fake.url, auth: { type: 'bearer' }, resources: { items: { path: '/items', id: 'id' } } }],
    ];
    for (const [provider, config] of configs) {
      fake.requests.length = 0;
      const created = await create(api, { provider, config, credentials: { token: TOKEN } });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      // Its first job once it stopped running: ended, or waiting to retry.
      const job = await eventually(async () => {
        const res = await api.call('GET', `/jobs?connection_id=${created.body.id}`);
        const found = res.body.items?.find((j: any) => ['completed', 'failed', 'cancelled', 'retrying'].includes(j.status));
        return found ? (await api.call('GET', `/jobs/${found.id}?include_tasks=true`)).body : undefined;
      });
      expect(job.status, `${provider}: ${JSON.stringify(job)}`).toBe('failed');
      expect(job.retry_count, provider).toBe(0);
      expect(job.tasks[0].error_message, provider).toMatch(
        /(github|http) connector: fetching '[^']+'( \(\/items\))?: the provider at '127\.0\.0\.1' answered, but its response headers exceed 16384 bytes \(16 KiB\), Node's limit on a response's header section \(--max-http-header-size\)$/,
      );
      expect(JSON.stringify(job), provider).not.toContain(TOKEN.slice(0, 8));
      // One request: no quick activity retries, no job retries.
      expect(fake.requests, provider).toHaveLength(1);
    }
  });

  it('runs one immediate sync per connection at a time; a second one is refused with 409', async () => {
    const created = await create(api, { provider: 'demo', config: { resource_types: ['items'], records_per_resource: 3, page_size: 1, latency_ms: 700 } });
    expect(created.status).toBe(201);
    const appKey = `c${seq}`;
    const first = api.call('POST', '/sync', { tenant_id: 'acme', app_key: appKey, mode: 'full', immediate: true });
    await eventually(async () => {
      const description = await stack.env.client.workflow.getHandle(`immediate-sync:${created.body.id}`).describe().catch(() => null);
      return description?.status.name === 'RUNNING' ? true : undefined;
    });
    const second = await api.call('POST', '/sync', { tenant_id: 'acme', app_key: appKey, immediate: true });
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('immediate_sync_running');
    const answer = await first;
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.total_entities).toBe(3);
    await recordHistory(stack.env.client, 'immediate-sync-own-queue', `immediate-sync:${created.body.id}`);
    // Finished: the next one runs.
    expect((await api.call('POST', '/sync', { tenant_id: 'acme', app_key: appKey, immediate: true })).status).toBe(200);
  });

  it('a flood of immediate syncs waits for its own slots and does not hold up scheduled work', async () => {
    const slow = { resource_types: ['items'], records_per_resource: 3, page_size: 1, latency_ms: 1500 };
    const flood = [];
    for (let i = 0; i < 3; i++) flood.push(await create(api, { provider: 'demo', config: slow }));
    const fast = await create(api, { provider: 'demo', config: { resource_types: ['items'], records_per_resource: 5, page_size: 5 } });
    const answers = flood.map((c, i) => api.call('POST', '/sync', { tenant_id: 'acme', app_key: `c${seq - 3 + i}`, mode: 'full', immediate: true }));
    // All three started; with one slot, at most one activity of them runs.
    const handles = flood.map((c) => stack.env.client.workflow.getHandle(`immediate-sync:${c.body.id}`));
    await eventually(async () => ((await Promise.all(handles.map((h) => h.describe().catch(() => null)))).every((d) => d?.status.name === 'RUNNING') ? true : undefined));

    const requested = await api.call('POST', `/connections/${fast.body.id}/sync`, { mode: 'full' });
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    const job = await eventually(async () => {
      const res = await api.call('GET', `/jobs/${requested.body.job_id}`);
      return ['completed', 'failed'].includes(res.body.status) ? res.body : undefined;
    });
    expect(job.status).toBe('completed');
    // The scheduled-side job finished while immediate syncs still waited for their one slot.
    const pending = await Promise.all(handles.map(async (h) => (await h.describe()).raw.pendingActivities ?? []));
    const states = pending.flat().map((a) => String(a.state));
    const open = (await Promise.all(handles.map((h) => h.describe()))).filter((d) => d.status.name === 'RUNNING').length;
    expect(open).toBeGreaterThanOrEqual(2);
    expect(states.filter((s) => s === 'PENDING_ACTIVITY_STATE_STARTED' || s === '2').length).toBeLessThanOrEqual(1);

    for (const res of await Promise.all(answers)) {
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.total_entities).toBe(3);
    }
  });

  it('answers a failed immediate sync with a network error in words that name no address or port', async () => {
    const gone = await serve(() => undefined);
    const port = new URL(gone.url).port;
    await gone.close();
    const created = await create(api, { provider: 'github', status: 'paused', config: { base_url: gone.url, repositories: ['octo/hello'], resource_types: ['issues'] }, credentials: { token: TOKEN } });
    expect(created.status).toBe(201);
    await stack.db.pool.query(`update connections set status = 'active' where id = $1`, [created.body.id]);
    const res = await api.call('POST', '/sync', { tenant_id: 'acme', app_key: `c${seq}`, immediate: true });
    expect(res.status, JSON.stringify(res.body)).toBe(502);
    expect(res.body.error.code).toBe('sync_failed');
    expect(res.body.error.message).toBe("the sync failed: github connector: fetching 'octo/hello': network error: connection refused");
    expect(JSON.stringify(res.body)).not.toContain(port);
  });

  it("cancels an immediate sync past its deadline and the cancellation aborts the provider request in flight", async () => {
    const fake = await serve(() => undefined); // never answers
    const created = await create(impatient, { provider: 'github', status: 'paused', config: { base_url: fake.url, repositories: ['octo/hello'], resource_types: ['issues'] }, credentials: { token: TOKEN } });
    expect(created.status).toBe(201);
    await stack.db.pool.query(`update connections set status = 'active' where id = $1`, [created.body.id]);
    const res = await impatient.call('POST', '/sync', { tenant_id: 'acme', app_key: `c${seq}`, immediate: true });
    expect(res.status, JSON.stringify(res.body)).toBe(504);
    // The activity heartbeats while the request hangs, learns of the cancellation and aborts the
    // request, long before the provider request's own 30 s timeout.
    await eventually(async () => (fake.abandoned >= 1 ? true : undefined), { timeoutMs: 20_000 });
    expect(fake.requests.length).toBeGreaterThanOrEqual(1);
    const closed = await eventually(async () => {
      const d = await stack.env.client.workflow.getHandle(`immediate-sync:${created.body.id}`).describe();
      return d.status.name !== 'RUNNING' ? d.status.name : undefined;
    });
    expect(closed).toBe('CANCELLED');
  });
});
