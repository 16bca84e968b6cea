// Where an incremental cursor may move after a partition was read to its end.

/**
 * How far a provider's clock may lag ours: a cursor never passes the pass start minus this, so a
 * change stamped by a slow provider clock during the pass is read again by the next pass.
 */
export const CURSOR_CLOCK_SKEW_MS = 60_000;

/**
 * The cursor a partition may take after a pass that started at `passStart` read it to its end and
 * saw `highWater` as its newest change time: min(highWater, hold, passStart − skew), where `hold`
 * is the time the connector said the cursor may not pass (null: none). Null when the pass saw no
 * change time there (the stored cursor stays). The caller never moves a cursor backwards.
 */
export function nextCursor(highWater: Date | null, passStart: Date, hold: Date | null = null, skewMs: number = CURSOR_CLOCK_SKEW_MS): Date | null {
  if (highWater === null) return null;
  let cap = passStart.getTime() - skewMs;
  if (hold !== null && hold.getTime() < cap) cap = hold.getTime();
  return highWater.getTime() <= cap ? highWater : new Date(cap);
}
