// Unit and property tests of the pure failure policies: rate-limit backoff with the figures of its
// requirement scenarios, the failure retry schedule and the circuit breaker, and the
// rate-limit configuration. No I/O: clocks and random sources are arguments.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../lib/config';
import { parseRateLimitConfig } from '../lib/rate-limit-config';
import { BREAKER_PAUSE_SECONDS, BREAKER_THRESHOLD, isPaused, onFailedAttempt, onSuccess } from '../policy/breaker';
import {
  DEFAULT_RATE_LIMIT_POLICY,
  DEFAULT_RATE_LIMIT_RETRY_CAP,
  policyFor,
  rateLimitBackoff,
  type RateLimitPolicy,
} from '../policy/rate-limit';
import { DEFAULT_MAX_RETRIES, decideFailure, retryDelaySeconds, type FailureDecision } from '../policy/retry';

// ---------------------------------------------------------------------------------------------
// Helpers

const S = 1000;
const NOW = Date.parse('2025-01-01T09:00:00Z');
const fixed = (value: number) => () => value;
/** The bottom of any [0, 1) source: no jitter. */
const LOW = fixed(0);
/** The largest value a [0, 1) source can realistically return: the top of the jitter range. */
const TOP = fixed(0.9999999);

/** A [0, 1) source driven by fast-check, so shrinking finds the smallest failing random value. */
const arbRandom = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

/** Positive policies with max ≥ base, as the configuration guarantees. */
const arbPolicy: fc.Arbitrary<RateLimitPolicy> = fc
  .record({
    baseSeconds: fc.double({ min: 0.001, max: 3600, noNaN: true }),
    extra: fc.double({ min: 0, max: 86400, noNaN: true }),
    jitterFactor: fc.double({ min: 0, max: 1, noNaN: true }),
  })
  .map(({ baseSeconds, extra, jitterFactor }) => ({ baseSeconds, maxSeconds: baseSeconds + extra, jitterFactor }));

// ---------------------------------------------------------------------------------------------
// Rate-limit backoff

describe('rate-limit backoff: requirement scenarios', () => {
  it('uses the provider hint when it is greater: attempts 2, hint 60 → effective 60, retry_after in [now+60, now+66]', () => {
    for (const random of [LOW, fixed(0.5), TOP]) {
      const b = rateLimitBackoff({ attempts: 2, hintSeconds: 60, policy: DEFAULT_RATE_LIMIT_POLICY, random });
      expect(b.exponentialSeconds).toBe(20);
      expect(b.effectiveSeconds).toBe(60);
      expect(b.finalSeconds).toBeGreaterThanOrEqual(60);
      expect(b.finalSeconds).toBeLessThanOrEqual(66);
      const retryAfter = NOW + b.finalSeconds * S;
      expect(retryAfter).toBeGreaterThanOrEqual(NOW + 60 * S);
      expect(retryAfter).toBeLessThanOrEqual(NOW + 66 * S);
    }
    expect(rateLimitBackoff({ attempts: 2, hintSeconds: 60, policy: DEFAULT_RATE_LIMIT_POLICY, random: LOW }).finalSeconds).toBe(60);
    expect(rateLimitBackoff({ attempts: 2, hintSeconds: 60, policy: DEFAULT_RATE_LIMIT_POLICY, random: fixed(0.5) }).finalSeconds).toBe(63);
  });

  it('falls back to the exponential without a hint: the first retry (attempts 0) waits in [5, 5.5)', () => {
    for (const random of [LOW, fixed(0.5), TOP]) {
      const b = rateLimitBackoff({ attempts: 0, policy: DEFAULT_RATE_LIMIT_POLICY, random });
      expect(b.exponentialSeconds).toBe(5);
      expect(b.effectiveSeconds).toBe(5);
      expect(b.finalSeconds).toBeGreaterThanOrEqual(5);
      expect(b.finalSeconds).toBeLessThan(5.5);
    }
  });

  it('a hint smaller than the exponential does not shorten the wait', () => {
    const b = rateLimitBackoff({ attempts: 3, hintSeconds: 10, policy: DEFAULT_RATE_LIMIT_POLICY, random: LOW });
    expect(b).toEqual({ exponentialSeconds: 40, effectiveSeconds: 40, finalSeconds: 40 });
  });

  it('doubles per attempt up to max: 5, 10, 20, …, 640, 900, 900', () => {
    const exps = Array.from({ length: 10 }, (_, attempts) =>
      rateLimitBackoff({ attempts, policy: DEFAULT_RATE_LIMIT_POLICY, random: LOW }).exponentialSeconds,
    );
    expect(exps).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 900, 900]);
  });

  it('treats huge attempt counts (2^attempts overflows) as max', () => {
    for (const attempts of [1023, 1024, 5000, Number.MAX_SAFE_INTEGER, Infinity]) {
      const b = rateLimitBackoff({ attempts, policy: DEFAULT_RATE_LIMIT_POLICY, random: LOW });
      expect(b.exponentialSeconds).toBe(900);
      expect(b.finalSeconds).toBe(900);
    }
  });

  it('ignores an unusable hint (negative, NaN, infinite) instead of producing NaN or Infinity', () => {
    for (const hintSeconds of [-5, Number.NaN, Infinity, 0]) {
      expect(rateLimitBackoff({ attempts: 0, hintSeconds, policy: DEFAULT_RATE_LIMIT_POLICY, random: LOW }).finalSeconds).toBe(5);
    }
  });

  it('keeps a hint above max: retrying before the provider reset only earns another rate limit', () => {
    const b = rateLimitBackoff({ attempts: 0, hintSeconds: 3600, policy: DEFAULT_RATE_LIMIT_POLICY, random: LOW });
    expect(b.effectiveSeconds).toBe(3600);
  });
});

describe('rate-limit policy per provider', () => {
  it('has the defaults (base 5 s, max 900 s, jitter 0.1) and a separate retry cap of 20', () => {
    expect(DEFAULT_RATE_LIMIT_POLICY).toEqual({ baseSeconds: 5, maxSeconds: 900, jitterFactor: 0.1 });
    expect(DEFAULT_RATE_LIMIT_RETRY_CAP).toBe(20);
  });

  it('applies github.base_seconds = 10: the first retry waits exp 10 instead of 5', () => {
    const policy = policyFor('github', { github: { baseSeconds: 10 } });
    expect(policy).toEqual({ baseSeconds: 10, maxSeconds: 900, jitterFactor: 0.1 });
    const b = rateLimitBackoff({ attempts: 0, policy, random: LOW });
    expect(b.exponentialSeconds).toBe(10);
  });

  it('gives an unknown provider the defaults', () => {
    expect(policyFor('demo', { github: { baseSeconds: 10 } })).toEqual(DEFAULT_RATE_LIMIT_POLICY);
    expect(policyFor('demo', {})).toEqual(DEFAULT_RATE_LIMIT_POLICY);
  });

  it('falls back field by field: overriding only max keeps the default base and jitter', () => {
    expect(policyFor('github', { github: { maxSeconds: 120 } })).toEqual({ baseSeconds: 5, maxSeconds: 120, jitterFactor: 0.1 });
    expect(rateLimitBackoff({ attempts: 10, policy: policyFor('github', { github: { maxSeconds: 120 } }), random: LOW }).exponentialSeconds).toBe(120);
  });

  it('falls back to configured defaults when given, and keeps a jitter override of 0', () => {
    const defaults = { baseSeconds: 2, maxSeconds: 60, jitterFactor: 0.3 };
    expect(policyFor('github', { github: { jitterFactor: 0 } }, defaults)).toEqual({ baseSeconds: 2, maxSeconds: 60, jitterFactor: 0 });
    expect(policyFor('gitlab', { github: { jitterFactor: 0 } }, defaults)).toEqual(defaults);
  });

  it('never takes Object.prototype members for overrides', () => {
    expect(policyFor('constructor', {})).toEqual(DEFAULT_RATE_LIMIT_POLICY);
    expect(policyFor('__proto__', {})).toEqual(DEFAULT_RATE_LIMIT_POLICY);
  });
});

describe('rate-limit backoff: properties', () => {
  it('final always lies in [effective, effective · (1 + jitter)]', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 2000 }),
        fc.option(fc.double({ min: 0, max: 1e6, noNaN: true }), { nil: undefined }),
        arbPolicy,
        arbRandom,
        (attempts, hintSeconds, policy, r) => {
          const b = rateLimitBackoff({ attempts, hintSeconds, policy, random: () => r });
          expect(b.effectiveSeconds).toBe(Math.max(hintSeconds ?? 0, b.exponentialSeconds));
          expect(b.finalSeconds).toBeGreaterThanOrEqual(b.effectiveSeconds);
          // A relative epsilon: effective + effective·j and effective·(1 + j) round differently.
          expect(b.finalSeconds).toBeLessThanOrEqual(b.effectiveSeconds * (1 + policy.jitterFactor) * (1 + 1e-12));
        },
      ),
    );
  });

  it('final never exceeds max · (1 + jitter) when the hint is at most max', () => {
    fc.assert(
      fc.property(fc.nat({ max: 2000 }), arbPolicy, fc.double({ min: 0, max: 1, noNaN: true }), arbRandom, (attempts, policy, f, r) => {
        const hintSeconds = f * policy.maxSeconds;
        const b = rateLimitBackoff({ attempts, hintSeconds, policy, random: () => r });
        expect(b.finalSeconds).toBeLessThanOrEqual(policy.maxSeconds * (1 + policy.jitterFactor) * (1 + 1e-12));
      }),
    );
  });

  it('exp is monotone non-decreasing in attempts and capped at max', () => {
    fc.assert(
      fc.property(fc.nat({ max: 3000 }), fc.nat({ max: 3000 }), arbPolicy, (a, b, policy) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        const expLo = rateLimitBackoff({ attempts: lo, policy, random: LOW }).exponentialSeconds;
        const expHi = rateLimitBackoff({ attempts: hi, policy, random: LOW }).exponentialSeconds;
        expect(expLo).toBeLessThanOrEqual(expHi);
        expect(expHi).toBeLessThanOrEqual(policy.maxSeconds);
        expect(expLo).toBeGreaterThanOrEqual(Math.min(policy.baseSeconds, policy.maxSeconds));
      }),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Failure retries

describe('failure retry schedule', () => {
  const MIN = 60;

  it('waits 1, 2, 4, 8, 16 minutes ±10 % for retries 1..5', () => {
    [1, 2, 4, 8, 16].forEach((minutes, i) => {
      const retryCount = i + 1;
      const d = minutes * MIN;
      expect(retryDelaySeconds({ retryCount, random: LOW })).toBeCloseTo(0.9 * d, 9);
      expect(retryDelaySeconds({ retryCount, random: fixed(0.5) })).toBeCloseTo(d, 9);
      expect(retryDelaySeconds({ retryCount, random: TOP })).toBeLessThanOrEqual(1.1 * d);
      expect(retryDelaySeconds({ retryCount, random: TOP })).toBeGreaterThan(1.09 * d);
    });
  });

  it('caps at 30 minutes: retry 6 (32 min) and 7 (64 min) wait 1800 s ±10 %', () => {
    for (const retryCount of [6, 7, 50, 5000]) {
      expect(retryDelaySeconds({ retryCount, random: fixed(0.5) })).toBeCloseTo(1800, 9);
      expect(retryDelaySeconds({ retryCount, random: LOW })).toBeCloseTo(1620, 9);
      expect(retryDelaySeconds({ retryCount, random: TOP })).toBeLessThanOrEqual(1980);
    }
  });

  it('every delay lies within ±10 % of min(60 · 2^(n−1), 1800)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5000 }), arbRandom, (retryCount, r) => {
        const d = Math.min(60 * 2 ** (retryCount - 1), 1800);
        const delay = retryDelaySeconds({ retryCount, random: () => r });
        expect(delay).toBeGreaterThanOrEqual(0.9 * d - 1e-9);
        expect(delay).toBeLessThanOrEqual(1.1 * d + 1e-9);
      }),
    );
  });

  it('retries 5 times (max_retries default 5), then fails with retries_exhausted', () => {
    expect(DEFAULT_MAX_RETRIES).toBe(5);
    const decisions: FailureDecision[] = [];
    let retryCount = 0;
    for (;;) {
      const decision = decideFailure({ retryCount, maxRetries: DEFAULT_MAX_RETRIES, permanent: false });
      decisions.push(decision);
      if (decision.action === 'fail') break;
      retryCount = decision.retryCount;
    }
    expect(decisions).toEqual([
      { action: 'retry', retryCount: 1 },
      { action: 'retry', retryCount: 2 },
      { action: 'retry', retryCount: 3 },
      { action: 'retry', retryCount: 4 },
      { action: 'retry', retryCount: 5 },
      { action: 'fail', reason: 'retries_exhausted' },
    ]);
    // Omitting maxRetries means the default.
    expect(decideFailure({ retryCount: 4, permanent: false })).toEqual({ action: 'retry', retryCount: 5 });
    expect(decideFailure({ retryCount: 5, permanent: false })).toEqual({ action: 'fail', reason: 'retries_exhausted' });
  });

  it('honours a job-specific max_retries, including 0', () => {
    expect(decideFailure({ retryCount: 0, maxRetries: 0, permanent: false })).toEqual({ action: 'fail', reason: 'retries_exhausted' });
    expect(decideFailure({ retryCount: 1, maxRetries: 2, permanent: false })).toEqual({ action: 'retry', retryCount: 2 });
  });

  it('fails a permanent error at once, whatever the retry budget', () => {
    expect(decideFailure({ retryCount: 0, maxRetries: 5, permanent: true })).toEqual({ action: 'fail', reason: 'permanent' });
    expect(decideFailure({ retryCount: 3, maxRetries: 5, permanent: true })).toEqual({ action: 'fail', reason: 'permanent' });
  });
});

// ---------------------------------------------------------------------------------------------
// Circuit breaker

describe('circuit breaker', () => {
  it('opens after 5 consecutive failed attempts: count 5, paused 30 min, one alert', () => {
    expect(BREAKER_THRESHOLD).toBe(5);
    expect(BREAKER_PAUSE_SECONDS).toBe(1800);
    let state = { consecutiveFailures: 0, pausedUntil: null as number | null };
    const alerts: number[] = [];
    for (let i = 1; i <= 5; i++) {
      const now = NOW + i * 60 * S;
      const next = onFailedAttempt({ ...state, now });
      // Every failed attempt counts (a count stuck at 1 would never open the breaker).
      expect(next.consecutiveFailures).toBe(i);
      if (next.raiseAlert) alerts.push(i);
      state = { consecutiveFailures: next.consecutiveFailures, pausedUntil: next.pausedUntil };
      if (i < 5) expect(next.pausedUntil).toBeNull();
    }
    expect(state.consecutiveFailures).toBe(5);
    expect(state.pausedUntil).toBe(NOW + 5 * 60 * S + 1800 * S);
    expect(alerts).toEqual([5]);

    // A 6th failure while paused counts but neither extends the pause nor raises a second alert.
    const sixth = onFailedAttempt({ ...state, now: NOW + 10 * 60 * S });
    expect(sixth).toEqual({ consecutiveFailures: 6, pausedUntil: state.pausedUntil, raiseAlert: false });
  });

  it('re-opens when the first attempt after the pause fails again', () => {
    const pausedUntil = NOW + 1800 * S;
    const after = onFailedAttempt({ consecutiveFailures: 6, pausedUntil, now: pausedUntil + S });
    expect(after).toEqual({ consecutiveFailures: 7, pausedUntil: pausedUntil + S + 1800 * S, raiseAlert: true });
  });

  it('treats pausedUntil as optional (no pause known)', () => {
    expect(onFailedAttempt({ consecutiveFailures: 4, now: NOW })).toEqual({
      consecutiveFailures: 5,
      pausedUntil: NOW + BREAKER_PAUSE_SECONDS * S,
      raiseAlert: true,
    });
    expect(onFailedAttempt({ consecutiveFailures: 0, now: NOW })).toEqual({ consecutiveFailures: 1, pausedUntil: null, raiseAlert: false });
  });

  it('a success resets the count, clears the pause and resolves the alert', () => {
    expect(onSuccess()).toEqual({ consecutiveFailures: 0, pausedUntil: null, resolveAlert: true });
    // After the reset, it takes a full 5 failures again to open.
    let count = onSuccess().consecutiveFailures as number;
    for (let i = 0; i < 4; i++) {
      const next = onFailedAttempt({ consecutiveFailures: count, now: NOW });
      expect(next.raiseAlert).toBe(false);
      count = next.consecutiveFailures;
    }
    expect(onFailedAttempt({ consecutiveFailures: count, now: NOW }).raiseAlert).toBe(true);
  });

  it('isPaused holds strictly before pausedUntil', () => {
    expect(isPaused(null, NOW)).toBe(false);
    expect(isPaused(undefined, NOW)).toBe(false);
    expect(isPaused(NOW + 1, NOW)).toBe(true);
    expect(isPaused(NOW, NOW)).toBe(false);
    expect(isPaused(NOW - 1, NOW)).toBe(false);
  });

  it('raises exactly one alert for any run of failures while the pause holds (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 60 * S }), { minLength: 5, maxLength: 40 }), (gaps) => {
        let state = { consecutiveFailures: 0, pausedUntil: null as number | null };
        let now = NOW;
        let alerts = 0;
        // Stop once a pause has run out: a failure after that rightly opens the breaker again.
        for (const gap of gaps) {
          now += gap;
          if (state.pausedUntil !== null && !isPaused(state.pausedUntil, now)) break;
          const next = onFailedAttempt({ ...state, now });
          if (next.raiseAlert) alerts++;
          state = next;
        }
        expect(alerts).toBe(state.consecutiveFailures >= BREAKER_THRESHOLD ? 1 : 0);
      }),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Configuration

describe('parseRateLimitConfig', () => {
  const fails = (env: Record<string, string>) => {
    try {
      parseRateLimitConfig(env);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error(`expected ${JSON.stringify(env)} to be rejected`);
  };

  it('uses the defaults when nothing is set (and when a variable is set but empty)', () => {
    const expected = { defaults: { baseSeconds: 5, maxSeconds: 900, jitterFactor: 0.1 }, overrides: {}, retryCap: 20 };
    expect(parseRateLimitConfig({})).toEqual(expected);
    expect(parseRateLimitConfig({ RATE_LIMIT_BASE_SECONDS: '', RATE_LIMIT_OVERRIDES: ' ' })).toEqual(expected);
  });

  it('reads the global settings', () => {
    expect(
      parseRateLimitConfig({
        RATE_LIMIT_BASE_SECONDS: '2',
        RATE_LIMIT_MAX_SECONDS: '600',
        RATE_LIMIT_JITTER_FACTOR: '0.25',
        RATE_LIMIT_RETRY_CAP: '0',
      }),
    ).toEqual({ defaults: { baseSeconds: 2, maxSeconds: 600, jitterFactor: 0.25 }, overrides: {}, retryCap: 0 });
  });

  it('reads per-provider overrides from JSON, which policyFor then applies field by field', () => {
    const config = parseRateLimitConfig({
      RATE_LIMIT_OVERRIDES: '{"github": {"base_seconds": 10}, "gitlab": {"max_seconds": 120, "jitter_factor": 0}}',
    });
    expect(config.overrides).toEqual({ github: { baseSeconds: 10 }, gitlab: { maxSeconds: 120, jitterFactor: 0 } });
    expect(policyFor('github', config.overrides, config.defaults)).toEqual({ baseSeconds: 10, maxSeconds: 900, jitterFactor: 0.1 });
    expect(policyFor('gitlab', config.overrides, config.defaults)).toEqual({ baseSeconds: 5, maxSeconds: 120, jitterFactor: 0 });
    expect(policyFor('demo', config.overrides, config.defaults)).toEqual(config.defaults);
  });

  it('rejects invalid JSON, naming RATE_LIMIT_OVERRIDES', () => {
    expect(fails({ RATE_LIMIT_OVERRIDES: '{github: 10' })).toMatch(/RATE_LIMIT_OVERRIDES: must be valid JSON/);
    expect(fails({ RATE_LIMIT_OVERRIDES: '[1, 2]' })).toMatch(/RATE_LIMIT_OVERRIDES: must be a JSON object keyed by provider slug/);
  });

  it('rejects unknown keys (strict)', () => {
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"github": {"base_seconds": 10, "baseSeconds": 10}}' })).toContain(
      'RATE_LIMIT_OVERRIDES: github.baseSeconds is not a known key (allowed: base_seconds, max_seconds, jitter_factor)',
    );
  });

  it('rejects negative, zero, non-numeric and out-of-range values, naming slug.key and the rule', () => {
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"github": {"base_seconds": -1}}' })).toContain(
      'RATE_LIMIT_OVERRIDES: github.base_seconds must be a positive number',
    );
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"github": {"max_seconds": 0}}' })).toContain(
      'RATE_LIMIT_OVERRIDES: github.max_seconds must be a positive number',
    );
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"github": {"base_seconds": "10"}}' })).toContain(
      'RATE_LIMIT_OVERRIDES: github.base_seconds must be a positive number',
    );
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"github": {"jitter_factor": 1.5}}' })).toContain(
      'RATE_LIMIT_OVERRIDES: github.jitter_factor must be a number between 0 and 1',
    );
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"github": 10}' })).toContain('RATE_LIMIT_OVERRIDES: github must be an object');
  });

  it('rejects provider slugs outside ^[a-z0-9_-]+$', () => {
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"GitHub": {"base_seconds": 10}}' })).toContain(
      'RATE_LIMIT_OVERRIDES: "GitHub" is not a valid provider slug (must match ^[a-z0-9_-]+$)',
    );
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"": {}}' })).toContain('is not a valid provider slug');
  });

  it('rejects max < base, for the defaults and for a provider after fallback', () => {
    expect(fails({ RATE_LIMIT_BASE_SECONDS: '60', RATE_LIMIT_MAX_SECONDS: '30' })).toContain(
      'RATE_LIMIT_MAX_SECONDS: must be at least RATE_LIMIT_BASE_SECONDS',
    );
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"github": {"max_seconds": 3}}' })).toContain(
      'RATE_LIMIT_OVERRIDES: github.max_seconds (3) must be at least base_seconds (5, from RATE_LIMIT_BASE_SECONDS)',
    );
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"github": {"base_seconds": 20, "max_seconds": 10}}' })).toContain(
      'RATE_LIMIT_OVERRIDES: github.max_seconds (10) must be at least base_seconds (20)',
    );
    expect(fails({ RATE_LIMIT_OVERRIDES: '{"github": {"base_seconds": 1000}}' })).toContain(
      'RATE_LIMIT_OVERRIDES: github.base_seconds (1000) must not exceed max_seconds (900, from RATE_LIMIT_MAX_SECONDS)',
    );
  });

  it('rejects invalid global values, naming each variable and reporting all problems at once', () => {
    const message = fails({
      RATE_LIMIT_BASE_SECONDS: '-5',
      RATE_LIMIT_MAX_SECONDS: 'soon',
      RATE_LIMIT_JITTER_FACTOR: '2',
      RATE_LIMIT_RETRY_CAP: '2.5',
      RATE_LIMIT_OVERRIDES: '{"github": {"base_seconds": -1}}',
    });
    expect(message).toContain('RATE_LIMIT_BASE_SECONDS: must be a positive number (got "-5")');
    expect(message).toContain('RATE_LIMIT_MAX_SECONDS: must be a positive number (got "soon")');
    expect(message).toContain('RATE_LIMIT_JITTER_FACTOR: must be a number between 0 and 1 (got "2")');
    expect(message).toContain('RATE_LIMIT_RETRY_CAP: must be a non-negative integer (got "2.5")');
    expect(message).toContain('RATE_LIMIT_OVERRIDES: github.base_seconds must be a positive number');
    expect(fails({ RATE_LIMIT_MAX_SECONDS: 'Infinity' })).toContain('RATE_LIMIT_MAX_SECONDS: must be a positive number');
  });
});
