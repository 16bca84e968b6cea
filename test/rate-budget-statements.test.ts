// The shared rate budget's statements against a real Postgres (db/models/rate-budgets.ts through
// services/rate-budget.ts): what a provider states, or leaves out, never wedges a credential.
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { providerGet, readRateLimit } from '../connectors/provider-http';
import { RateLimited } from '../connectors/types';
import { createSyncMetrics } from '../lib/metrics';
import { parseRateBudgetConfig } from '../lib/rate-budget-config';
import { DEFAULT_BUDGET_SETTINGS } from '../policy/rate-budget';
import { credentialFingerprint, requestBudget } from '../services/rate-budget';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING, TEST_PROVIDER_POLICY } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';

describe('shared rate budget statements (real Postgres)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await closeFakeServers();
    await db?.drop();
  });

  const budgetFor = (token: string) =>
    requestBudget({
      pool: db.pool, metrics: createSyncMetrics(new Registry()), keyring: TEST_KEYRING, tenantId: 'acme', settings: DEFAULT_BUDGET_SETTINGS,
      provider: 'http', credentials: { token }, config: {},
    })!;

  /** acquire() settled within 5 s (else it is still waiting: aborted and answered 'still waiting'). */
  async function outcomeOf(budget: ReturnType<typeof budgetFor>): Promise<string> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error('still waiting')), 5000);
    try {
      return await budget.acquire(ac.signal).then(
        () => 'granted',
        (e: unknown) => (e instanceof RateLimited ? 'rate_limited' : `error: ${(e as Error).message}`),
      );
    } finally {
      clearTimeout(timer);
    }
  }

  it('a remaining count stated without a reset holds nothing back: the request goes (it used to wait for ever)', async () => {
    const budget = budgetFor('no-reset');
    await budget.acquire();
    // 3 left, at or under the default reserve, and no (readable) reset.
    await budget.report({ status: 200, remaining: 3, reset: null });
    expect(await outcomeOf(budget)).toBe('granted');
    expect(await outcomeOf(budget)).toBe('granted');
  });

  it('requests sent past a remaining count stated without a reset never count it below zero, nor show a negative count', async () => {
    const registry = new Registry();
    const budget = requestBudget({
      pool: db.pool, metrics: createSyncMetrics(registry), keyring: TEST_KEYRING, tenantId: 'acme', settings: DEFAULT_BUDGET_SETTINGS,
      provider: 'http', credentials: { token: 'no-reset-past-zero' }, config: {},
    })!;
    await budget.acquire();
    await budget.report({ status: 200, remaining: 1, reset: null });
    for (let i = 0; i < 3; i++) await budget.acquire();
    // A 304 states nothing: the count as stored is what the gauge shows.
    await budget.report({ status: 304, remaining: null, reset: null });
    const gauge = (await registry.getSingleMetric('connector_budget_remaining')!.get()).values.map((v) => v.value);
    expect(gauge).toEqual([1]);
  });

  it('a remaining count at the reserve before a stated reset still holds requests back until it', async () => {
    const budget = budgetFor('with-reset');
    await budget.acquire();
    const resetAt = new Date(Date.now() + 10 * 60_000);
    await budget.report({ status: 200, remaining: 3, reset: { at: resetAt } });
    const refused = await budget.acquire().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RateLimited);
    expect((refused as RateLimited).message).toContain(`waiting for the provider's reset at ${resetAt.toISOString()}`);
  });

  it("a late answer from the provider's previous window neither lowers the new window's count nor moves its reset back", async () => {
    const budget = budgetFor('late-old-window-answer');
    const fingerprint = credentialFingerprint(TEST_KEYRING, 'acme', 'http', { token: 'late-old-window-answer' });
    // Two requests in flight across the provider's window boundary (two workers, or parallel tasks).
    await budget.acquire();
    await budget.acquire();
    // The one sent just after the reset answers first: a fresh window, 4999 left, resetting in an hour.
    const newReset = new Date(Date.now() + 3600_000);
    await budget.report({ status: 200, remaining: 4999, reset: { at: newReset } });
    // The one sent just before the reset answers last: the old window's count (0) and its reset,
    // which has already passed. It says nothing about the new window.
    await budget.report({ status: 200, remaining: 0, reset: { at: new Date(Date.now() - 2_000) } });
    const stored = async () =>
      (await db.pool.query<{ remaining: number | null; reset_at: Date | null }>('select remaining, reset_at from rate_budgets where fingerprint = $1', [fingerprint])).rows[0];
    expect(await stored()).toEqual({ remaining: 4999, reset_at: newReset });
    // The credential has ~4999 requests left: the next request goes instead of waiting an hour.
    expect(await outcomeOf(budget)).toBe('granted');
    // An answer of the same window (its reset within a second of the stored one) still lowers the count.
    await budget.report({ status: 200, remaining: 3, reset: { at: new Date(newReset.getTime() - 500) } });
    expect(await stored()).toEqual({ remaining: 3, reset_at: newReset });
    expect(await outcomeOf(budget)).toBe('rate_limited');
  });

  it('a RATE_BUDGETS ceiling or reserve beyond what the budget takes (2147483647) is refused naming the variable, never failing each request with a database error', async () => {
    // per_minute 1e10 ("no real limit"): accepted, every spendBudget failed with "value out of
    // range for type integer", each task failing and counting toward the breaker.
    expect(() => parseRateBudgetConfig({ RATE_BUDGETS: '{"http": {"per_minute": 10000000000}}' }))
      .toThrow(/RATE_BUDGETS: http\.per_minute must be a whole number from 1 to 2147483647/);
    expect(() => parseRateBudgetConfig({ RATE_BUDGETS: '{"http": {"per_second": 2147483648, "reserve": 2147483648}}' }))
      .toThrow(/RATE_BUDGETS: http\.reserve must be a whole number from 0 to 2147483647\n {2}RATE_BUDGETS: http\.per_second must be a whole number from 1 to 2147483647/);
    expect(() => parseRateBudgetConfig({ RATE_BUDGET_RESERVE: '2147483648' }))
      .toThrow(/RATE_BUDGET_RESERVE: must be a whole number from 0 to 2147483647 \(got "2147483648"\)/);
    // The largest accepted, through the budget's statements.
    const settings = parseRateBudgetConfig({ RATE_BUDGET_RESERVE: '2147483647', RATE_BUDGETS: '{"http": {"per_minute": 2147483647}}' });
    const budget = requestBudget({
      pool: db.pool, metrics: createSyncMetrics(new Registry()), keyring: TEST_KEYRING, tenantId: 'acme', settings,
      provider: 'http', credentials: { token: 'huge-ceiling' }, config: { rate_budget: { per_second: 2147483647 } },
    })!;
    expect(await outcomeOf(budget)).toBe('granted');
    await budget.report({ status: 200, remaining: 10, reset: { at: new Date(Date.now() + 60_000) } });
    expect(await outcomeOf(budget)).toBe('rate_limited');
  });

  it("a reset stated in seconds from now (delta_seconds) is counted on the database's clock: a worker whose clock is off by hours still holds requests back until the provider's reset", async () => {
    // A provider with 0 requests left, whose window resets in 600 s.
    const provider = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-rl-remaining': '0', 'x-rl-reset': '600' });
      res.end('[]');
    });
    const names = { remaining: 'x-rl-remaining', reset: 'x-rl-reset', resetFormat: 'delta_seconds' as const };
    const fingerprint = credentialFingerprint(TEST_KEYRING, 'acme', 'http', { token: 'delta-reset' });
    const resetIn = async () => {
      const { rows } = await db.pool.query<{ s: number }>(`select extract(epoch from reset_at - now())::float8 as s from rate_budgets where fingerprint = $1`, [fingerprint]);
      return rows[0]!.s;
    };
    for (const skewMs of [-2 * 3_600_000, 2 * 3_600_000]) {
      await db.pool.query('delete from rate_budgets where fingerprint = $1', [fingerprint]);
      const budget = budgetFor('delta-reset');
      // This worker's clock is two hours behind (then ahead of) the database's.
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + skewMs });
      try {
        const answer = await providerGet(`${provider.url}/items`, { headers: {}, context: 'test', policy: TEST_PROVIDER_POLICY, budget, rateLimitHeaders: names });
        expect(answer.status).toBe(200);
      } finally {
        vi.useRealTimers();
      }
      // The reset is 600 s after the answer by the database's clock, whatever the worker's says.
      expect({ skewMs, resetIn: Math.round((await resetIn()) / 100) * 100 }).toEqual({ skewMs, resetIn: 600 });
      expect(await outcomeOf(budget)).toBe('rate_limited');
    }
  });

  it("a provider's 429 (or 403) with Retry-After holds every request of the credential back until then, though it states no remaining count, or one above the reserve", async () => {
    // A 429 with only Retry-After (most APIs), and GitHub's secondary limit: a 403 with Retry-After
    // while its primary count still has thousands left.
    const answers: Record<string, Record<string, string>> = {
      '/plain-429': { status: '429', 'retry-after': '30' },
      '/secondary-403': { status: '403', 'retry-after': '45', 'x-rl-remaining': '4000', 'x-rl-reset': String(Math.floor(Date.now() / 1000) + 3000) },
    };
    const provider = await serve((req, res) => {
      const { status, ...headers } = answers[req.url!]!;
      res.writeHead(Number(status), { 'content-type': 'application/json', ...headers });
      res.end('{"message":"slow down"}');
    });
    const names = { remaining: 'x-rl-remaining', reset: 'x-rl-reset', resetFormat: 'epoch_seconds' as const };
    for (const [path, seconds] of [['/plain-429', 30], ['/secondary-403', 45]] as const) {
      const token = `retry-after${path}`;
      const answer = await providerGet(`${provider.url}${path}`, { headers: {}, context: 'test', policy: TEST_PROVIDER_POLICY, budget: budgetFor(token), rateLimitHeaders: names });
      expect(answer.status).toBe(path === '/plain-429' ? 429 : 403);
      // Another connection of the same credential (another budget object, as on another worker) waits too.
      const refused = await budgetFor(token).acquire().catch((e: unknown) => e);
      expect({ path, refused: refused instanceof RateLimited }).toEqual({ path, refused: true });
      expect((refused as RateLimited).retryAfterSeconds).toBeGreaterThanOrEqual(seconds - 2);
      expect((refused as RateLimited).retryAfterSeconds).toBeLessThanOrEqual(seconds);
      expect((refused as RateLimited).message).toMatch(/the provider asked to wait/);
    }
  });

  it("a provider's stated remaining count or reset beyond what the budget takes (more than 2147483647 left, a reset past any date) is recorded within bounds, never failing the request with a database error", async () => {
    const names = { remaining: 'x-ratelimit-remaining', reset: 'x-ratelimit-reset', resetFormat: 'epoch_seconds' as const };
    const stated = (remaining: string, reset: string) => readRateLimit(new Headers({ 'x-ratelimit-remaining': remaining, 'x-ratelimit-reset': reset }), names);
    // "Unlimited" plans state counts such as 2^32 - 1; a mapped header may state anything.
    const huge = budgetFor('huge-remaining');
    await huge.acquire();
    await huge.report({ status: 200, ...stated('4294967295', String(Math.floor(Date.now() / 1000) + 600)) });
    expect(await outcomeOf(huge)).toBe('granted');
    // A reset no date can hold (epoch seconds past year 275760): as if no reset were stated, so
    // the count at the reserve holds nothing back.
    const farReset = budgetFor('far-reset');
    await farReset.acquire();
    await farReset.report({ status: 200, ...stated('3', '99999999999999999') });
    expect(await outcomeOf(farReset)).toBe('granted');
    // A count at the reserve before a readable reset still holds back.
    await farReset.report({ status: 200, ...stated('3', String(Math.floor(Date.now() / 1000) + 600)) });
    expect(await outcomeOf(farReset)).toBe('rate_limited');
  });

  it("a 304 answered after a stated count of 2147483647 or more (an 'unlimited' plan) gives its unit back within bounds, never failing the request with a database error", async () => {
    const names = { remaining: 'x-ratelimit-remaining', reset: 'x-ratelimit-reset', resetFormat: 'epoch_seconds' as const };
    const reset = String(Math.floor(Date.now() / 1000) + 600);
    const unlimited = readRateLimit(new Headers({ 'x-ratelimit-remaining': '4294967295', 'x-ratelimit-reset': reset }), names);
    // Two requests in flight; the second's answer (a 200) states the count before the first's (a 304).
    const stating = budgetFor('unlimited-304-stating');
    await stating.acquire();
    await stating.acquire();
    await stating.report({ status: 200, ...unlimited });
    const statedAgain = await stating.report({ status: 304, ...unlimited }).then(() => 'recorded', (e: unknown) => `error: ${(e as Error).message}`);
    // The same, the 304 stating nothing.
    const silent = budgetFor('unlimited-304-silent');
    await silent.acquire();
    await silent.acquire();
    await silent.report({ status: 200, ...unlimited });
    const statedNothing = await silent.report({ status: 304, remaining: null, reset: null }).then(() => 'recorded', (e: unknown) => `error: ${(e as Error).message}`);
    expect({ statedAgain, statedNothing }).toEqual({ statedAgain: 'recorded', statedNothing: 'recorded' });
    const { rows } = await db.pool.query<{ remaining: number }>(
      'select remaining from rate_budgets where fingerprint = any($1) order by remaining',
      [['unlimited-304-stating', 'unlimited-304-silent'].map((token) => credentialFingerprint(TEST_KEYRING, 'acme', 'http', { token }))],
    );
    expect(rows.map((r) => r.remaining)).toEqual([2147483647, 2147483647]);
  });

  it("a per-minute ceiling holds when another connection of the credential has a per-second one, or none: every request counts in both windows", async () => {
    const credentials = { token: 'mixed-ceilings' };
    const budgetOf = (config: Record<string, unknown>) =>
      requestBudget({ pool: db.pool, metrics: createSyncMetrics(new Registry()), keyring: TEST_KEYRING, tenantId: 'acme', settings: DEFAULT_BUDGET_SETTINGS, provider: 'http', credentials, config })!;
    const perMinute = budgetOf({ rate_budget: { per_minute: 4 } });
    const perSecond = budgetOf({ rate_budget: { per_second: 10 } });
    const unbounded = budgetOf({});
    await perMinute.acquire();
    await perMinute.acquire();
    // Two more of the credential's requests, sent by connections with another ceiling or none.
    await unbounded.acquire();
    // A new second: the per-second window starts again (a request of the per-second connection
    // restarted the one shared window, which the per-minute connection counted in too).
    const fingerprint = credentialFingerprint(TEST_KEYRING, 'acme', 'http', credentials);
    const { rows } = await db.pool.query<{ at: Date }>(`select window_started_at + interval '1 second' as at from rate_budgets where fingerprint = $1`, [fingerprint]);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, rows[0]!.at.getTime() - Date.now()) + 50));
    await perSecond.acquire();
    // Four requests of the credential in this minute: the per-minute connection's fifth is refused.
    const refused = await perMinute.acquire().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RateLimited);
    expect((refused as RateLimited).message).toContain("the credential's request ceiling (4 per 60 s) is reached");
  });
});
