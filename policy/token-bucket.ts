// A token bucket: `burst` tokens, refilled at `ratePerSecond`; each request takes one. Pure: the
// caller keeps the state and passes the time, so it is tested without clocks.

/** A bucket's limits. */
export interface BucketLimits {
  ratePerSecond: number;
  burst: number;
}

/** A bucket's state: tokens left at time `at` (epoch ms). */
export interface BucketState {
  tokens: number;
  at: number;
}

/** The outcome of taking one token: the new state, and when refused, seconds until one is there. */
export type TakeResult = { allowed: true; state: BucketState } | { allowed: false; state: BucketState; retryAfterSeconds: number };

/** Takes one token from `state` (a full bucket when undefined) at time `now`. */
export function takeToken(limits: BucketLimits, state: BucketState | undefined, now: number): TakeResult {
  const elapsed = state ? Math.max(0, now - state.at) / 1000 : 0;
  const tokens = Math.min(limits.burst, (state?.tokens ?? limits.burst) + elapsed * limits.ratePerSecond);
  if (tokens >= 1) return { allowed: true, state: { tokens: tokens - 1, at: now } };
  return { allowed: false, state: { tokens, at: now }, retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / limits.ratePerSecond)) };
}

/**
 * Gives one token back to `state` at time `now` (a token taken for a request that then did not
 * count): refilled to `now`, plus one, never above `burst`.
 */
export function returnToken(limits: BucketLimits, state: BucketState | undefined, now: number): BucketState {
  const elapsed = state ? Math.max(0, now - state.at) / 1000 : 0;
  const tokens = Math.min(limits.burst, (state?.tokens ?? limits.burst) + elapsed * limits.ratePerSecond + 1);
  return { tokens, at: now };
}
