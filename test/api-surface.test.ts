// The API's unauthenticated surface and headers: /docs served from the pinned swagger-ui-dist
// package under a CSP, secure headers and `Cache-Control: no-store` on answers, request ids made
// by the server, and /readyz and the queue-depth gauge costing one query however often they are
// hit. Also the demo connector, registered only on request, and its bounded fetch log.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApp } from '../api/app';
import { DOCS_CSP, SWAGGER_UI_VERSION } from '../api/routes/docs';
import { readinessProbe } from '../infra/readiness';
import { demoConnector, demoFetchLog, recordDemoFetches, resetDemoFetchLog } from './helpers/demo';
import { createPool, type Pool } from '../db/pool';
import { createSyncMetrics, registerQueueDepthGauge } from '../lib/metrics';
import { singleFlight } from '../lib/single-flight';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING } from './helpers/deps';
import { capturingLogger } from './helpers/logs';
import { createTimeSkippingEnv } from './helpers/temporal';

const KEY = 'f3a9c1e07b5d48e2a6c9f0d1b7e4a352f3a9c1e07b5d48e2';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let db: TestDatabase;
let env: TestWorkflowEnvironment;
beforeAll(async () => {
  [db, env] = await Promise.all([createTestDatabase(), createTimeSkippingEnv()]);
});
afterAll(async () => {
  await env?.teardown();
  await db?.drop();
});

/** `db.pool` counting its queries. */
function countingPool(): { pool: Pool; queries: () => number } {
  let n = 0;
  const pool = new Proxy(db.pool, {
    get(target, prop) {
      if (prop === 'query') return (...args: Parameters<Pool['query']>) => (n++, (target.query as (...a: unknown[]) => unknown)(...args));
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { pool, queries: () => n };
}

/** env's client with its getSystemInfo calls (the readiness check's Temporal call) counted. */
function countingTemporal(): { temporal: TestWorkflowEnvironment['client']; calls: () => number } {
  let n = 0;
  const service = env.client.connection.workflowService;
  const original = service.getSystemInfo.bind(service);
  service.getSystemInfo = ((request: Parameters<typeof original>[0]) => (n++, original(request))) as typeof service.getSystemInfo;
  return { temporal: env.client, calls: () => n };
}

function app(deps: { pool?: Pool; temporal?: TestWorkflowEnvironment['client'] } = {}) {
  const log = capturingLogger();
  const registry = new Registry();
  const api = createApp({
    pool: deps.pool ?? db.pool,
    temporal: deps.temporal ?? env.client,
    registry,
    metrics: createSyncMetrics(registry),
    logger: log.logger,
    credentials: TEST_KEYRING,
    taskQueue: 'api-surface',
    adminApiKey: KEY,
    maxIntervalSeconds: 86_400,
    immediateSyncTimeoutMs: 60_000,
  });
  return { api, lines: log.lines };
}

describe('/docs', () => {
  it('serves Swagger UI from the pinned package, with a CSP, no CDN and no inline script, without a key', async () => {
    const { api } = app();
    const page = await api.request('/docs');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toBe(DOCS_CSP);
    expect(DOCS_CSP).toContain("script-src 'self'");
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/<script>/); // every script has a src on this origin
    expect(html).toContain('data-url="/openapi.json"');

    const dist = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
    expect(SWAGGER_UI_VERSION).toBe((JSON.parse(readFileSync(path.join(dist, 'package.json'), 'utf8')) as { version: string }).version);
    const srcs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(srcs).toEqual([
      `/docs/swagger-ui.css?v=${SWAGGER_UI_VERSION}`,
      `/docs/swagger-ui-bundle.js?v=${SWAGGER_UI_VERSION}`,
      `/docs/init.js?v=${SWAGGER_UI_VERSION}`,
    ]);
    for (const src of srcs) {
      const res = await api.request(src);
      expect(res.status, src).toBe(200);
      const body = await res.text();
      const file = src.split('?')[0]!.slice('/docs/'.length);
      if (file !== 'init.js') expect(body).toBe(readFileSync(path.join(dist, file), 'utf8'));
      else expect(body).toContain('SwaggerUIBundle(');
    }
  });
});

describe('headers of every answer', () => {
  it('adds the secure headers, a CSP that allows nothing and no-store, on success, 401 and 404 alike', async () => {
    const { api } = app();
    const answers = [
      await api.request('/healthz'),
      await api.request('/jobs'), // 401: no key
      await api.request('/jobs', { headers: { authorization: `Bearer ${KEY}` } }),
      await api.request('/no-such-route', { headers: { authorization: `Bearer ${KEY}` } }),
    ];
    expect(answers.map((r) => r.status)).toEqual([200, 401, 200, 404]);
    for (const res of answers) {
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
      expect(res.headers.get('content-security-policy')).toBe("default-src 'none'; frame-ancestors 'none'");
      expect(res.headers.get('strict-transport-security')).toMatch(/max-age=\d+/);
    }
  });

  it('makes its own request id, ignoring the client one (logged beside it when plain)', async () => {
    const { api, lines } = app();
    const res = await api.request('/healthz', { headers: { 'x-request-id': 'client-chosen-id' } });
    const id = res.headers.get('x-request-id');
    expect(id).toMatch(UUID);
    expect(id).not.toBe('client-chosen-id');
    const line = lines.find((l) => l.msg === 'request' && l.request_id === id);
    expect(line).toMatchObject({ request_id: id, client_request_id: 'client-chosen-id' });

    const odd = await api.request('/healthz', { headers: { 'x-request-id': 'has spaces "and quotes"' } });
    const oddLine = lines.find((l) => l.msg === 'request' && l.request_id === odd.headers.get('x-request-id'));
    expect(oddLine).toBeDefined();
    expect(oddLine).not.toHaveProperty('client_request_id');
    // Two requests, two ids.
    expect(odd.headers.get('x-request-id')).not.toBe(id);
  });
});

describe('probes cost one query however often they come', () => {
  it('answers a burst of /readyz with one Postgres ping, one freshness count and one Temporal call', async () => {
    const { pool, queries } = countingPool();
    const { temporal, calls } = countingTemporal();
    const { api } = app({ pool, temporal });
    const answers = await Promise.all(Array.from({ length: 25 }, () => api.request('/readyz')));
    expect(answers.map((r) => r.status)).toEqual(Array(25).fill(200));
    expect(await answers[0]!.json()).toEqual({ status: 'ok', checks: { postgres: 'ok', temporal: 'ok' }, details: { stale_connections: 0 } });
    expect(queries()).toBe(2);
    expect(calls()).toBe(1);
  });

  it('reuses a readiness answer within its period (here a minute), and checks again after it', async () => {
    const { pool, queries } = countingPool();
    let now = 1_000_000;
    vi.spyOn(Date, 'now').mockImplementation(() => now);
    try {
      const probe = readinessProbe({ pool, temporal: env.client }, 5000);
      await probe();
      const first = queries();
      for (let i = 0; i < 10; i++) await probe();
      expect(queries()).toBe(first);
      now += 5001;
      await probe();
      expect(queries()).toBeGreaterThan(first);
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('stays ready with every pooled connection in use: Postgres answers, the process is busy (a load balancer taking every busy process out would turn load into an outage)', async () => {
    const pool = createPool(db.url, 1);
    const held = await pool.connect();
    try {
      expect(await readinessProbe({ pool, temporal: env.client }, 0)()).toMatchObject({ ready: true, checks: { postgres: 'busy', temporal: 'ok' } });
    } finally {
      held.release();
      await pool.end();
    }
    const down = createPool('postgres://nobody@127.0.0.1:1/none', 1);
    try {
      expect(await readinessProbe({ pool: down, temporal: env.client }, 0)()).toMatchObject({ ready: false, checks: { postgres: 'unreachable' } });
    } finally {
      await down.end();
    }
  });

  it('counts the queue depth once for a burst of scrapes and reuses it within its period', async () => {
    let counts = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const registry = new Registry();
    registerQueueDepthGauge(registry, async () => {
      counts++;
      await gate;
      return new Map([['queued', 2]]);
    }, 60_000);
    const scrapes = Array.from({ length: 10 }, () => registry.metrics());
    release();
    const texts = await Promise.all(scrapes);
    for (const text of texts) expect(text).toContain('sync_jobs_queue_depth{status="queued"} 2');
    await registry.metrics();
    expect(counts).toBe(1);
  });
});

describe('pool limits', () => {
  it('sets statement_timeout, idle_in_transaction_session_timeout and the application name on every connection', async () => {
    const pool = createPool(db.url, 2, { statementTimeoutMs: 300, idleInTransactionTimeoutMs: 500, applicationName: 'synctide-api' });
    try {
      const { rows } = await pool.query(
        `select current_setting('statement_timeout') as st, current_setting('idle_in_transaction_session_timeout') as it, current_setting('application_name') as app`,
      );
      expect(rows[0]).toEqual({ st: '300ms', it: '500ms', app: 'synctide-api' });
      // A runaway statement is cancelled by the server.
      const err = await pool.query('select pg_sleep(5)').then(() => null, (e: { code?: string }) => e);
      expect(err?.code).toBe('57014');
      // A transaction left idle is ended by the server: its next statement fails.
      const client = await pool.connect();
      await client.query('begin');
      await new Promise((r) => setTimeout(r, 1500));
      const ended = await client.query('select 1').then(() => null, (e: Error) => e);
      client.release(true);
      expect(ended).not.toBeNull();
    } finally {
      await pool.end();
    }
  });

  it('sets no limit when none is asked for (migrations run on such a connection of their own)', async () => {
    const pool = createPool(db.url, 1);
    try {
      const { rows } = await pool.query(`select current_setting('statement_timeout') as st`);
      expect(rows[0].st).toBe('0');
    } finally {
      await pool.end();
    }
  });
});

describe('singleFlight', () => {
  it('shares one call between concurrent callers, caches for the period, and never caches a failure', async () => {
    let now = 0;
    let calls = 0;
    let fail = true;
    const read = singleFlight(async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 5));
      if (fail) throw new Error('down');
      return calls;
    }, 1000, () => now);
    const failed = await Promise.allSettled([read(), read(), read()]);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(calls).toBe(1);
    fail = false;
    expect(await read()).toBe(2); // the failure was not cached
    expect(await read()).toBe(2); // cached
    now = 1000;
    expect(await read()).toBe(3); // expired
  });
});

describe('the demo connector', () => {
  it('is not registered unless enabled, so a create with provider demo is refused', async () => {
    vi.resetModules();
    try {
      const registry = await import('../connectors/registry');
      const connections = await import('../commands/connections');
      expect(registry.connectorSlugs()).toEqual(['github', 'http']);
      expect(() => registry.getConnector('demo')).toThrow("unknown provider 'demo'");
      expect(() => connections.checkConfig('demo', {})).toThrow("provider: unknown provider 'demo' (known: github, http)");
      registry.enableDemoConnector();
      expect(registry.connectorSlugs()).toEqual(['demo', 'github', 'http']);
      expect(() => connections.checkConfig('demo', {})).not.toThrow();
    } finally {
      vi.resetModules();
    }
  });

  it('records its fetch log only when told to, and keeps only the latest entries', async () => {
    const config = { records_per_resource: 10, page_size: 1 };
    try {
      recordDemoFetches(false);
      resetDemoFetchLog();
      await demoConnector.fetchPage({ resource: 'issues', since: null, until: null, pageToken: null, config, credentials: {} });
      expect(demoFetchLog).toHaveLength(0);

      recordDemoFetches(true, 3);
      let token: string | null = null;
      const tokens: (string | null)[] = [];
      for (let i = 0; i < 5; i++) {
        tokens.push(token);
        token = (await demoConnector.fetchPage({ resource: 'issues', since: null, until: null, pageToken: token, config, credentials: {} })).nextPageToken;
      }
      expect(demoFetchLog.map((e) => e.pageToken)).toEqual(tokens.slice(2));
    } finally {
      recordDemoFetches(true);
      resetDemoFetchLog();
    }
  });
});
