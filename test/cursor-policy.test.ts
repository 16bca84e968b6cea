// Where a partition's cursor may move (policy/cursor.ts): never past the pass start less the
// clock skew, nor past a connector's hold, nor anywhere without a change time seen.
import { describe, expect, it } from 'vitest';
import { CURSOR_CLOCK_SKEW_MS, earliestStampDuring, nextCursor } from '../policy/cursor';

describe('nextCursor', () => {
  const start = new Date('2026-01-01T12:00:00Z');
  const t = (iso: string) => new Date(iso);

  it('is the high water when it is older than the pass start less the skew', () => {
    expect(nextCursor(t('2026-01-01T11:00:00Z'), start)).toEqual(t('2026-01-01T11:00:00Z'));
  });
  it('is capped at the pass start less the skew (a change during the pass is read again)', () => {
    expect(nextCursor(t('2026-01-01T12:30:00Z'), start)).toEqual(new Date(start.getTime() - CURSOR_CLOCK_SKEW_MS));
    expect(nextCursor(t('2026-01-01T11:59:30Z'), start)).toEqual(new Date(start.getTime() - CURSOR_CLOCK_SKEW_MS));
  });
  it('is capped at a whole second: a provider cutting its change times to seconds stamps a change during the pass no earlier', () => {
    const late = new Date('2026-01-01T12:00:00.700Z');
    // A provider clock 0.2 s less than CURSOR_CLOCK_SKEW_MS behind ours, at our 12:00:00.700, reads 11:59:00.900 and stamps 11:59:00.
    const stamp = new Date(Math.floor((late.getTime() - CURSOR_CLOCK_SKEW_MS + 200) / 1000) * 1000);
    const cursor = nextCursor(t('2026-01-01T12:30:00Z'), late)!;
    expect(cursor.getTime()).toBeLessThanOrEqual(stamp.getTime());
    expect(cursor).toEqual(new Date('2026-01-01T11:59:00.000Z'));
    expect(earliestStampDuring(late)).toEqual(cursor);
  });
  it('never passes a hold', () => {
    expect(nextCursor(t('2026-01-01T11:00:00Z'), start, t('2026-01-01T10:00:00Z'))).toEqual(t('2026-01-01T10:00:00Z'));
    expect(nextCursor(t('2026-01-01T09:00:00Z'), start, t('2026-01-01T10:00:00Z'))).toEqual(t('2026-01-01T09:00:00Z'));
  });
  it('is null (the cursor stays) when the pass saw no change time', () => {
    expect(nextCursor(null, start, t('2026-01-01T10:00:00Z'))).toBeNull();
  });
});
