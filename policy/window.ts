// A backfill's window: which records it may store. Pure: no I/O.

/**
 * The half-open window [start, end) of a backfill: records changed at or after `start` and before
 * `end`. Half-open so adjacent windows [a, b) and [b, c) never both store a record. `end` null:
 * no upper bound.
 */
export interface SyncWindow {
  start: Date;
  end: Date | null;
}

/**
 * Whether a record changed at `updatedAt` (ISO 8601, as a connector returns it) belongs to
 * `window`: start ≤ updatedAt < end. A record without a readable change time cannot be placed in
 * any window, so it does not belong.
 */
export function inWindow(updatedAt: string | null, window: SyncWindow): boolean {
  if (updatedAt === null) return false;
  const ms = Date.parse(updatedAt);
  if (Number.isNaN(ms)) return false;
  return ms >= window.start.getTime() && (window.end === null || ms < window.end.getTime());
}
