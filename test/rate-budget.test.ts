// The shared, proactive rate budget: two connections sharing one GitHub token, synced at once by
// two workers, against a fake GitHub that allows 100 requests per 3-second window and answers 429
// past it. The budget (in Postgres, keyed by the token's fingerprint) holds requests back at the
// reserve until the window resets: the fake never answers 429, both syncs complete, and the waits
// are durable (timers in the job workflows' histories, the jobs' retry_after). Temporal dev server
// (the waits are real time), Postgres, real workers.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { credentialFingerprint, requestBudget } from '../services/rate-budget';
import { RateLimited } from '../connectors/types';
import { createSyncMetrics } from '../lib/metrics';
import { budgetLimits, DEFAULT_BUDGET_SETTINGS } from '../policy/rate-budget';
import { parseRateBudgetConfig } from '../lib/rate-budget-config';
import { syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobResult } from '../temporal/sync-job';
import type { TestDatabase } from './helpers/database';
import { useServers } from './helpers/stack';
import { DEFAULT_RATE_LIMIT_SETTINGS, TEST_KEYRING, sealedTestCredentials } from './helpers/deps';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { createTestWorker, eventually } from './helpers/worker';

// One task queue per worker: the SDK refuses two workers of one process on the same queue. Each
// connection's job runs on its own worker; all they share is the database, and so the budget.
const TASK_QUEUES = ['rate-budget-a', 'rate-budget-b'];
const TOKEN = 'ghp_shared_token_for_two_connections';

describe('shared rate budget per credential', () => {
  const servers = useServers();
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let gh: FakeGitHub;
  const workers: Worker[] = [];
  const running: Promise<void>[] = [];
  const registries: Registry[] = [];

  beforeAll(async () => {
    ({ env, db } = servers);
    gh = await startFakeGitHub({
      token: TOKEN,
      repos: { 'octo/one': { id: 801, pulls: 600 }, 'octo/two': { id: 802, pulls: 600 } },
      budget: { limit: 100, windowMs: 3000 },
    });
    // Quick rate-limit backoff, so a test waits about as long as the provider's window.
    const rateLimit = { ...DEFAULT_RATE_LIMIT_SETTINGS, defaults: { baseSeconds: 0.5, maxSeconds: 4, jitterFactor: 0.1 } };
    for (let i = 0; i < 2; i++) {
      const { worker, registry } = await createTestWorker({
        connection: env.nativeConnection,
        client: env.client,
        pool: db.pool,
        taskQueue: TASK_QUEUES[i]!,
        rateLimit,
        connectors: { rateBudget: { reserve: 10, providers: {} } },
      });
      workers.push(worker);
      registries.push(registry);
      running.push(worker.run());
    }
  });
  afterAll(async () => {
    for (const worker of workers) worker.shutdown();
    await Promise.all(running);
    await gh?.close();
  });

  async function connection(repo: string) {
    const id = randomUUID();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials, metadata)
       values ($4, 'acme', 'github', $1, $2, $3, '{"sync": {"interval_seconds": 3600}}') returning id`,
      [repo.replace('/', '-'), { base_url: gh.baseUrl, repositories: [repo], resource_types: ['pull_requests'], per_page: 10 }, sealedTestCredentials(id, { token: TOKEN }), id],
    );
    return rows[0]!.id;
  }
  async function startJob(connectionId: string, index: number) {
    const jobId = randomUUID();
    await db.pool.query(`insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', 'full', 'manual')`, [
      jobId,
      connectionId,
    ]);
    const handle = await env.client.workflow.start<(i: { jobId: string; connectionId: string }) => Promise<SyncJobResult>>('syncJobWorkflow', {
      taskQueue: TASK_QUEUES[index]!,
      workflowId: syncJobWorkflowId(jobId),
      args: [{ jobId, connectionId }],
    });
    return { jobId, handle };
  }

  it('two connections sharing one token on two workers never meet a 429, wait durably for the reset, and complete', async () => {
    const ids = [await connection('octo/one'), await connection('octo/two')];
    const jobs = await Promise.all(ids.map((id, i) => startJob(id, i)));

    // While they run, a job shows the wait as `retrying` with the reset as its retry_after.
    const waiting = await eventually(
      async () => {
        const { rows } = await db.pool.query<{ retry_after: Date | null; last_error: string | null }>(
          `select retry_after, last_error from sync_jobs where id = any($1) and status = 'retrying'`,
          [jobs.map((j) => j.jobId)],
        );
        return rows[0];
      },
      { timeoutMs: 30_000 },
    );
    expect(waiting.retry_after).toBeInstanceOf(Date);
    expect(waiting.last_error).toMatch(/rate budget is down to its reserve/);

    const results = await Promise.all(jobs.map((j) => j.handle.result()));
    expect(results.map((r) => r.status)).toEqual(['completed', 'completed']);
    expect(gh.tooMany).toBe(0);
    expect(gh.windows).toBeGreaterThanOrEqual(2); // 2 × 60 pages cannot fit one window of 100
    const { rows: stored } = await db.pool.query<{ n: number }>('select count(*)::int as n from records where deleted_at is null');
    expect(stored[0]!.n).toBe(1200);

    // Durable waits: timers in the job workflows, and rate-limit retries counted on the jobs.
    let timers = 0;
    for (const job of jobs) {
      const history = await job.handle.fetchHistory();
      timers += (history.events ?? []).filter((e) => e.timerStartedEventAttributes).length;
    }
    expect(timers).toBeGreaterThanOrEqual(1);
    const { rows: counts } = await db.pool.query<{ n: number }>(
      'select coalesce(sum(rate_limit_retry_count), 0)::int as n from sync_jobs where id = any($1)',
      [jobs.map((j) => j.jobId)],
    );
    expect(counts[0]!.n).toBeGreaterThanOrEqual(1);

    // The budget row is keyed by the tenant's keyed fingerprint; the token itself is stored nowhere in it.
    const { rows: budgets } = await db.pool.query<Record<string, unknown>>('select * from rate_budgets');
    expect(budgets).toHaveLength(1);
    expect(budgets[0]!.fingerprint).toBe(credentialFingerprint(TEST_KEYRING, 'acme', 'github', { token: TOKEN }));
    expect(JSON.stringify(budgets)).not.toContain(TOKEN);

    // Metrics per provider, no per-credential label.
    const text = (await Promise.all(registries.map((r) => r.metrics()))).join('\n');
    expect(text).toMatch(/connector_requests_total\{provider="github"\} \d+/);
    expect(text).toMatch(/connector_budget_waits_total\{provider="github",reason="reserve"\} \d+/);
    expect(text).toMatch(/connector_budget_remaining\{provider="github"\} \d+/);
    expect(text).not.toContain(credentialFingerprint(TEST_KEYRING, 'acme', 'github', { token: TOKEN }));
  });

  it('a ceiling holds requests back across budgets of one credential: a per-second window in place, a per-minute one durably', async () => {
    const registry = new Registry();
    const metrics = createSyncMetrics(registry);
    const credentials = { token: 'ceiling-token' };
    const budgetOf = (config: Record<string, unknown>) =>
      requestBudget({ pool: db.pool, metrics, keyring: TEST_KEYRING, tenantId: 'acme', settings: DEFAULT_BUDGET_SETTINGS, provider: 'http', credentials, config })!;
    // Two budgets of the same credential (two connections): 12 requests at 5 per second.
    const [a, b] = [budgetOf({ rate_budget: { per_second: 5 } }), budgetOf({ rate_budget: { per_second: 5 } })];
    for (let i = 0; i < 6; i++) await Promise.all([a.acquire(), b.acquire()]);
    const waits = await registry.getSingleMetric('connector_budget_waits_total')!.get();
    expect(waits.values.find((v) => v.labels.reason === 'ceiling')!.value).toBeGreaterThanOrEqual(2);
    const { rows } = await db.pool.query<{ window_count: number }>('select window_count from rate_budgets where fingerprint = $1', [
      credentialFingerprint(TEST_KEYRING, 'acme', 'http', credentials),
    ]);
    expect(rows[0]!.window_count).toBeLessThanOrEqual(5);

    // Per minute: the fourth request of the window is refused with the time to the window's end.
    const perMinute = requestBudget({ pool: db.pool, metrics, keyring: TEST_KEYRING, tenantId: 'acme', settings: DEFAULT_BUDGET_SETTINGS, provider: 'http', credentials: { token: 'minute' }, config: { rate_budget: { per_minute: 3 } } })!;
    for (let i = 0; i < 3; i++) await perMinute.acquire();
    const refused = await perMinute.acquire().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RateLimited);
    expect((refused as RateLimited).retryAfterSeconds).toBeGreaterThan(5);
    expect((refused as RateLimited).retryAfterSeconds).toBeLessThanOrEqual(60);
    expect((refused as Error).message).toMatch(/request ceiling \(3 per 60 s\) is reached/);
  });

  it('budget settings resolve connection > provider > default, and bad settings name the variable', async () => {
    expect(budgetLimits('github', DEFAULT_BUDGET_SETTINGS)).toEqual({ reserve: 5, ceiling: null });
    const settings = { reserve: 5, providers: { github: { reserve: 50, perMinute: 600 } } };
    expect(budgetLimits('github', settings)).toEqual({ reserve: 50, ceiling: { requests: 600, seconds: 60 } });
    expect(budgetLimits('github', settings, { perSecond: 2 })).toEqual({ reserve: 50, ceiling: { requests: 2, seconds: 1 } });
    expect(budgetLimits('http', settings, { reserve: 0 })).toEqual({ reserve: 0, ceiling: null });
    expect(() => parseRateBudgetConfig({ RATE_BUDGETS: '{"github": {"per_sec": 1}}' })).toThrow(/RATE_BUDGETS: github.per_sec is not a known key/);
    expect(() => parseRateBudgetConfig({ RATE_BUDGET_RESERVE: '-1' })).toThrow(/RATE_BUDGET_RESERVE: must be a whole number/);
    expect(parseRateBudgetConfig({ RATE_BUDGETS: '{"github": {"per_second": 10}}' }).providers.github).toMatchObject({ perSecond: 10 });
  });
});
