// Circuit breaker per connection and provider. Pure and deterministic: the
// clock is an argument (epoch milliseconds), so workflows and activities share one rule.

/** Consecutive failed attempts that open the breaker. */
export const BREAKER_THRESHOLD = 5;

/** How long an open breaker pauses the connection: 30 minutes. */
export const BREAKER_PAUSE_SECONDS = 1800;

/** Input of `onFailedAttempt` (times in epoch milliseconds). */
export interface FailedAttemptInput {
  /** The stored count before this failure. */
  consecutiveFailures: number;
  now: number;
  /** The stored `paused_until`, if any; an expired pause counts as none. */
  pausedUntil?: number | null;
}

/** The breaker after a failed attempt. */
export interface FailedAttemptOutcome {
  consecutiveFailures: number;
  /** The pause in force after this failure (a new one when the breaker just opened), else null. */
  pausedUntil: number | null;
  /** True only when this failure opened the breaker: raise one `sync_circuit_breaker` alert. */
  raiseAlert: boolean;
}

/**
 * Counts a failed attempt. Every failure increments the count (an earlier design let it stick at
 * 1, so the breaker never opened). At the threshold, and on any later failure once a pause has run out (the probe after the
 * pause failed again), the breaker opens: paused until now + 30 min, alert raised. A failure while
 * already paused keeps the pause as it is and raises nothing, so one outage gives one alert.
 */
export function onFailedAttempt({ consecutiveFailures, now, pausedUntil = null }: FailedAttemptInput): FailedAttemptOutcome {
  const count = Math.max(0, consecutiveFailures) + 1;
  if (isPaused(pausedUntil, now)) return { consecutiveFailures: count, pausedUntil, raiseAlert: false };
  if (count >= BREAKER_THRESHOLD) {
    return { consecutiveFailures: count, pausedUntil: now + BREAKER_PAUSE_SECONDS * 1000, raiseAlert: true };
  }
  return { consecutiveFailures: count, pausedUntil: null, raiseAlert: false };
}

/** The breaker after a successful attempt. */
export interface SuccessOutcome {
  consecutiveFailures: 0;
  pausedUntil: null;
  /** Resolve the open `sync_circuit_breaker` alert, if there is one. */
  resolveAlert: true;
}

/** A success closes the breaker: count 0, pause cleared, open alert resolved. */
export function onSuccess(): SuccessOutcome {
  return { consecutiveFailures: 0, pausedUntil: null, resolveAlert: true };
}

/** Whether a pause ending at `pausedUntil` (epoch ms) still holds at `now`; the end is exclusive. */
export function isPaused(pausedUntil: number | null | undefined, now: number): pausedUntil is number {
  return typeof pausedUntil === 'number' && pausedUntil > now;
}
