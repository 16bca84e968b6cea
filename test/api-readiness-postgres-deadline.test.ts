// The API's readiness while Postgres stops answering (its processes stopped with SIGSTOP: the
// connections stay open, the kernel still takes new ones, nothing answers). Every probe answers
// 503 with a JSON body naming Postgres unreachable, and however many probes come, the silent
// server holds at most one of their statements: a check whose ping went unanswered sends no
// other, and the ping's own deadline gives its connection up. Before, each period's `select 1`
// stayed waiting on a connection of its own until the pool's no-answer limit (a minute by
// default), so the probes took the whole pool, and a pool with every connection in use read as
// `busy`: the silent server's API answered 200 ready. The freshness count (`details`) likewise:
// one that waits (its table locked) is the one count until it answers, not one more every check,
// which took every connection of the API's pool while the lock lasted.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApp } from '../api/app';
import { createPool, type Pool } from '../db/pool';
import { READINESS_CACHE_MS } from '../infra/readiness';
import { createSyncMetrics } from '../lib/metrics';
import { TEST_KEYRING } from './helpers/deps';
import { capturingLogger } from './helpers/logs';
import { freezeProcessTree, startOwnedPostgres } from './helpers/servers';
import { createDevServerEnv } from './helpers/temporal';

const POOL_MAX = 3;

describe('API readiness while Postgres is silent', () => {
  let env: TestWorkflowEnvironment;
  let postgres: Awaited<ReturnType<typeof startOwnedPostgres>>;
  let pool: Pool;
  beforeAll(async () => {
    [env, postgres] = await Promise.all([createDevServerEnv(), startOwnedPostgres()]);
    // The API's pool as `npm run api` opens it (API_STATEMENT_TIMEOUT_SECONDS' default of 30 s).
    pool = createPool(postgres.url, POOL_MAX, { statementTimeoutMs: 30_000, applicationName: 'synctide-api' });
  });
  afterAll(async () => {
    await pool?.end().catch(() => undefined);
    await env?.teardown();
    await postgres?.remove();
  });

  it('answers 503 with a JSON body at every probe, and the silent server holds at most one probe statement', async () => {
    const registry = new Registry();
    const api = createApp({
      pool, temporal: env.client, registry, metrics: createSyncMetrics(registry), logger: capturingLogger().logger,
      credentials: TEST_KEYRING, taskQueue: 'readiness-postgres', adminApiKey: 'f3a9c1e07b5d48e2a6c9f0d1b7e4a352f3a9c1e07b5d48e2',
      maxIntervalSeconds: 86_400, immediateSyncTimeoutMs: 60_000,
    });
    // Every connection the pool may open is open (and idle) before the server goes silent.
    await Promise.all(Array.from({ length: POOL_MAX }, () => pool.query('select pg_sleep(0.05)')));
    expect(pool.totalCount).toBe(POOL_MAX);
    expect((await api.request('/readyz')).status).toBe(200);

    // Each probe comes after the last answer's reuse period: each is a check of its own.
    const realNow = Date.now.bind(Date);
    let skipped = 0;
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() + skipped);
    const thaw = await freezeProcessTree(postgres.pid());
    try {
      for (let probe = 1; probe <= POOL_MAX + 2; probe++) {
        skipped += READINESS_CACHE_MS + 1;
        const res = await api.request('/readyz');
        const answer = { probe, status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
        expect(answer).toEqual({ probe, status: 503, retryAfter: '5', body: { status: 'unavailable', checks: { postgres: 'unreachable', temporal: 'ok' } } });
        // Statements of this pool the server has not answered (checked out) or that wait for a connection.
        const outstanding = pool.totalCount - pool.idleCount + pool.waitingCount;
        expect(outstanding, `statements outstanding after probe ${probe}`).toBeLessThanOrEqual(1);
      }
      thaw();
      // Postgres answers again: so does readiness, at a later check (a connection the silent
      // server took in is answered once it runs again, or given up after the pool's connect limit).
      const deadline = realNow() + 45_000;
      let last: unknown;
      for (;;) {
        skipped += READINESS_CACHE_MS + 1;
        const res = await api.request('/readyz');
        last = { status: res.status, body: await res.json() };
        if (res.status === 200 || realNow() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(last).toMatchObject({ status: 200, body: { status: 'ok', checks: { postgres: 'ok', temporal: 'ok' } } });
    } finally {
      thaw();
      vi.restoreAllMocks();
    }
  }, 120_000);

  it('answers 503 unreachable, not busy, when requests waiting on the silent server hold every connection of the pool', async () => {
    const held = createPool(postgres.url, POOL_MAX, { statementTimeoutMs: 30_000, applicationName: 'synctide-api' });
    const registry = new Registry();
    const api = createApp({
      pool: held, temporal: env.client, registry, metrics: createSyncMetrics(registry), logger: capturingLogger().logger,
      credentials: TEST_KEYRING, taskQueue: 'readiness-postgres', adminApiKey: 'f3a9c1e07b5d48e2a6c9f0d1b7e4a352f3a9c1e07b5d48e2',
      maxIntervalSeconds: 86_400, immediateSyncTimeoutMs: 60_000,
    });
    await Promise.all(Array.from({ length: POOL_MAX }, () => held.query('select pg_sleep(0.05)')));
    const thaw = await freezeProcessTree(postgres.pid());
    // Requests of the API, each on a connection of its own, waiting for a server that answers nothing.
    const waiting = Array.from({ length: POOL_MAX }, () => held.query('select 1').catch(() => undefined));
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(held.totalCount - held.idleCount).toBe(POOL_MAX);
      const res = await api.request('/readyz');
      expect({ status: res.status, body: await res.json() }).toEqual({ status: 503, body: { status: 'unavailable', checks: { postgres: 'unreachable', temporal: 'ok' } } });
    } finally {
      thaw();
      await Promise.all(waiting);
      await held.end().catch(() => undefined);
    }
  }, 120_000);

  it('stays ready (busy) with every connection in use when Postgres refuses one more for the role\'s connection limit: it answers, it is full', async () => {
    await pool.query(`create role readiness_limited login password 'limited-pw' connection limit 1`);
    const url = new URL(postgres.url);
    url.username = 'readiness_limited';
    url.password = 'limited-pw';
    const limited = createPool(url.toString(), 1, { statementTimeoutMs: 30_000, applicationName: 'synctide-api' });
    const taken = await limited.connect();
    try {
      const registry = new Registry();
      const api = createApp({
        pool: limited, temporal: env.client, registry, metrics: createSyncMetrics(registry), logger: capturingLogger().logger,
        credentials: TEST_KEYRING, taskQueue: 'readiness-postgres', adminApiKey: 'f3a9c1e07b5d48e2a6c9f0d1b7e4a352f3a9c1e07b5d48e2',
        maxIntervalSeconds: 86_400, immediateSyncTimeoutMs: 60_000,
      });
      const res = await api.request('/readyz');
      expect({ status: res.status, body: await res.json() }).toEqual({ status: 200, body: { status: 'ok', checks: { postgres: 'busy', temporal: 'ok' } } });
    } finally {
      taken.release();
      await limited.end().catch(() => undefined);
    }
  }, 120_000);

  it('a freshness count that waits (the connections table locked) holds at most one connection however many probes come', async () => {
    // A pool of its own: every connection open and idle before the table is locked.
    const probed = createPool(postgres.url, POOL_MAX, { statementTimeoutMs: 30_000, applicationName: 'synctide-api' });
    const registry = new Registry();
    const api = createApp({
      pool: probed, temporal: env.client, registry, metrics: createSyncMetrics(registry), logger: capturingLogger().logger,
      credentials: TEST_KEYRING, taskQueue: 'readiness-postgres', adminApiKey: 'f3a9c1e07b5d48e2a6c9f0d1b7e4a352f3a9c1e07b5d48e2',
      maxIntervalSeconds: 86_400, immediateSyncTimeoutMs: 60_000,
    });
    const locker = await pool.connect();
    const realNow = Date.now.bind(Date);
    let skipped = 0;
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() + skipped);
    try {
      await Promise.all(Array.from({ length: POOL_MAX }, () => probed.query('select pg_sleep(0.05)')));
      // What a migration or a VACUUM FULL of the table does: the count waits; `select 1` does not.
      await locker.query('begin');
      await locker.query('lock table connections in access exclusive mode');
      for (let probe = 1; probe <= POOL_MAX + 2; probe++) {
        // Past the reuse of the last answer and of the last count (30 s): each probe counts again.
        skipped += 30_001;
        const res = await api.request('/readyz');
        expect({ probe, status: res.status, body: await res.json() }).toEqual({ probe, status: 200, body: { status: 'ok', checks: { postgres: 'ok', temporal: 'ok' } } });
        const outstanding = probed.totalCount - probed.idleCount + probed.waitingCount;
        expect(outstanding, `statements outstanding after probe ${probe}`).toBeLessThanOrEqual(1);
      }
      await locker.query('rollback');
      // The count answers again once the table is free.
      const deadline = realNow() + 20_000;
      let last: unknown;
      for (;;) {
        skipped += 30_001;
        const res = await api.request('/readyz');
        last = await res.json();
        if ((last as { details?: unknown }).details || realNow() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(last).toEqual({ status: 'ok', checks: { postgres: 'ok', temporal: 'ok' }, details: { stale_connections: 0 } });
    } finally {
      await locker.query('rollback').catch(() => undefined);
      locker.release();
      vi.restoreAllMocks();
      await probed.end().catch(() => undefined);
    }
  }, 120_000);
});
