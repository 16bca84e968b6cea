// Where an incremental cursor may move after a partition was read to its end.

/**
 * How far a provider's clock may lag ours: a cursor never passes the pass start minus this, so a
 * change stamped by a slow provider clock during the pass is read again by the next pass.
 */
export const CURSOR_CLOCK_SKEW_MS = 60_000;

/**
 * The earliest change time a provider whose clock lags ours by at most `skewMs` can give a change
 * made at or after `passStart`: the pass start less the skew, cut to its whole second (a provider
 * that keeps whole seconds cuts its stamps so, and one finer stamps no earlier).
 */
export function earliestStampDuring(passStart: Date, skewMs: number = CURSOR_CLOCK_SKEW_MS): Date {
  return new Date(Math.floor((passStart.getTime() - skewMs) / 1000) * 1000);
}

/**
 * The cursor a partition may take after a pass that started at `passStart` read it to its end and
 * saw `highWater` as its newest change time: min(highWater, hold, earliest stamp during the pass),
 * where `hold` is the time the connector said the cursor may not pass (null: none). Null when the
 * pass saw no change time there (the stored cursor stays). The caller never moves a cursor backwards.
 */
export function nextCursor(highWater: Date | null, passStart: Date, hold: Date | null = null, skewMs: number = CURSOR_CLOCK_SKEW_MS): Date | null {
  if (highWater === null) return null;
  let cap = earliestStampDuring(passStart, skewMs).getTime();
  if (hold !== null && hold.getTime() < cap) cap = hold.getTime();
  return highWater.getTime() <= cap ? highWater : new Date(cap);
}
