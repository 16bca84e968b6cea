// Rate-limit backoff. Pure and deterministic: no I/O, the random source is an
// argument, so the job workflow can call it with its replay-safe Math.random().

/** How long to back off after a provider rate limit (all values in seconds). */
export interface RateLimitPolicy {
  baseSeconds: number;
  maxSeconds: number;
  /** Jitter added on top of the wait, as a fraction of it (0.1 → up to +10 %). */
  jitterFactor: number;
}

/** The default policy: base 5 s, max 900 s, jitter factor 0.1. */
export const DEFAULT_RATE_LIMIT_POLICY: RateLimitPolicy = Object.freeze({
  baseSeconds: 5,
  maxSeconds: 900,
  jitterFactor: 0.1,
});

/**
 * Rate-limit retries a job may take before it fails. Counted apart from `max_retries`, and rate
 * limits never count toward the circuit breaker: being throttled is not the provider failing.
 */
export const DEFAULT_RATE_LIMIT_RETRY_CAP = 20;

/**
 * The policy for one provider: each field of `overrides[provider]` that is set wins, every other
 * field falls back to `defaults` (so overriding only `maxSeconds` keeps the default base).
 */
export function policyFor(
  provider: string,
  overrides: Record<string, Partial<RateLimitPolicy>>,
  defaults: RateLimitPolicy = DEFAULT_RATE_LIMIT_POLICY,
): RateLimitPolicy {
  // Own keys only: a slug such as "constructor" must not pick up Object.prototype members.
  const own = Object.hasOwn(overrides, provider) ? overrides[provider] : undefined;
  return {
    baseSeconds: own?.baseSeconds ?? defaults.baseSeconds,
    maxSeconds: own?.maxSeconds ?? defaults.maxSeconds,
    jitterFactor: own?.jitterFactor ?? defaults.jitterFactor,
  };
}

/** Input of `rateLimitBackoff`. */
export interface RateLimitBackoffInput {
  /** Rate-limit failures before this one: 0 on the first retry. */
  attempts: number;
  /** The provider's own wait (`Retry-After` or reset header), in seconds, when it gave one. */
  hintSeconds?: number | undefined;
  policy: RateLimitPolicy;
  /** Uniform source in [0, 1): the workflow's seeded Math.random(). */
  random: () => number;
}

/** The steps of one backoff computation, kept apart for logs and metrics. */
export interface RateLimitBackoff {
  /** min(base · 2^attempts, max). */
  exponentialSeconds: number;
  /** max(hint ?? 0, exponential): a provider asking for longer always wins. */
  effectiveSeconds: number;
  /** effective + uniform(0, jitterFactor · effective): the wait; `retry_after = now + final`. */
  finalSeconds: number;
}

/**
 * The backoff: exp = min(base·2^attempts, max); effective = max(hint ?? 0, exp);
 * final = effective + uniform(0, jitterFactor·effective). The hint is not capped at max, because
 * retrying before the provider's reset only earns another rate limit.
 */
export function rateLimitBackoff({ attempts, hintSeconds, policy, random }: RateLimitBackoffInput): RateLimitBackoff {
  const exponentialSeconds = exponential(attempts, policy);
  // A missing, negative or non-finite hint says nothing usable: fall back to the formula alone.
  const hint = hintSeconds !== undefined && Number.isFinite(hintSeconds) && hintSeconds > 0 ? hintSeconds : 0;
  const effectiveSeconds = Math.max(hint, exponentialSeconds);
  const finalSeconds = effectiveSeconds + unit(random) * policy.jitterFactor * effectiveSeconds;
  return { exponentialSeconds, effectiveSeconds, finalSeconds };
}

function exponential(attempts: number, { baseSeconds, maxSeconds }: RateLimitPolicy): number {
  const n = Number.isFinite(attempts) ? Math.max(0, Math.floor(attempts)) : attempts > 0 ? Infinity : 0;
  const growth = 2 ** n;
  // 2^n overflows to Infinity for n ≥ 1024 (and base · 2^n sooner): such a wait is past max anyway.
  if (!Number.isFinite(growth)) return maxSeconds;
  const seconds = baseSeconds * growth;
  return Number.isFinite(seconds) ? Math.min(seconds, maxSeconds) : maxSeconds;
}

// Clamps a misbehaving source into [0, 1) so the jitter can never leave its bounds.
function unit(random: () => number): number {
  const r = random();
  return Number.isFinite(r) && r > 0 ? Math.min(r, 1 - Number.EPSILON) : 0;
}
