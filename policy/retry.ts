// Retries of ordinary (non-rate-limit) job failures. Pure and deterministic:
// no I/O, the random source is an argument, so the job workflow can call it with its replay-safe
// Math.random().

/** Retries a job gets before it is `failed` when the job row does not say otherwise. */
export const DEFAULT_MAX_RETRIES = 5;

/** Delay before the first retry: 60 s, doubling per retry. */
export const RETRY_BASE_SECONDS = 60;

/** No retry waits longer than 30 minutes (before jitter). */
export const RETRY_MAX_SECONDS = 1800;

/** Jitter of ±10 % around each delay, so jobs failing together do not retry together. */
export const RETRY_JITTER_FRACTION = 0.1;

/** Input of `retryDelaySeconds`. */
export interface RetryDelayInput {
  /** The job's retry_count after incrementing: 1 for the first retry. */
  retryCount: number;
  /** Uniform source in [0, 1): the workflow's seeded Math.random(). */
  random: () => number;
}

/**
 * Delay before retry number `retryCount`: d = min(60 s · 2^(retryCount − 1), 1800 s), jittered
 * uniformly within [0.9·d, 1.1·d]. Retries 1..5 wait about 1, 2, 4, 8 and 16 minutes.
 */
export function retryDelaySeconds({ retryCount, random }: RetryDelayInput): number {
  // Below 1 is a caller's slip (the count before incrementing); treat it as the first retry.
  const n = Number.isFinite(retryCount) ? Math.max(1, Math.floor(retryCount)) : retryCount > 0 ? Infinity : 1;
  // 2^(n−1) overflows to Infinity for huge n, and min() then yields the cap: no special case needed.
  const base = Math.min(RETRY_BASE_SECONDS * 2 ** (n - 1), RETRY_MAX_SECONDS);
  const r = random();
  // Clamped so a misbehaving source cannot push the delay outside ±10 %.
  const u = Number.isFinite(r) ? Math.min(Math.max(r, 0), 1) : 0;
  return base * (1 - RETRY_JITTER_FRACTION + 2 * RETRY_JITTER_FRACTION * u);
}

/** Input of `decideFailure`. */
export interface FailureInput {
  /** Retries already taken (the job's retry_count before this failure). */
  retryCount: number;
  /** The job's max_retries; `DEFAULT_MAX_RETRIES` when omitted. */
  maxRetries?: number;
  /** Non-retryable (bad credentials, invalid configuration): no retry can succeed. */
  permanent: boolean;
}

/** What to do with a failed attempt. */
export type FailureDecision =
  | { action: 'retry'; retryCount: number }
  | { action: 'fail'; reason: 'permanent' | 'retries_exhausted' };

/**
 * Retry (with retry_count + 1) while fewer than `maxRetries` retries were taken; after
 * `maxRetries` retries the job fails with `retries_exhausted`; a permanent error fails at once.
 */
export function decideFailure({ retryCount, maxRetries = DEFAULT_MAX_RETRIES, permanent }: FailureInput): FailureDecision {
  if (permanent) return { action: 'fail', reason: 'permanent' };
  if (retryCount >= maxRetries) return { action: 'fail', reason: 'retries_exhausted' };
  return { action: 'retry', retryCount: retryCount + 1 };
}

/**
 * A task cut off by a worker shutdown or crash (a rolling deploy), or held by an earlier attempt,
 * is not a provider failure: the attempt is retried after this short wait, counting toward neither
 * `retry_count` nor the circuit breaker.
 */
export const INTERRUPTED_RETRY_SECONDS = 10;

/** Interrupted attempts a job may retry in a row before an interruption counts as a failure. */
export const INTERRUPTED_RETRY_CAP = 20;
