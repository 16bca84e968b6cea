// The backfill window rule (policy/window.ts): which records a backfill of [start, end) stores.
// Pure: no database or Temporal (the shared globalSetup still starts Postgres; these tests ignore it).
import { describe, expect, it } from 'vitest';
import { inWindow } from '../policy/window';

describe('inWindow', () => {
  const window = { start: new Date('2025-01-01T09:00:00Z'), end: new Date('2025-01-01T10:00:00Z') };

  it('keeps records changed at or after the start and before the end (half-open)', () => {
    expect(inWindow('2025-01-01T09:00:00Z', window)).toBe(true);
    expect(inWindow('2025-01-01T09:59:59.999Z', window)).toBe(true);
    expect(inWindow('2025-01-01T10:00:00Z', window)).toBe(false);
    expect(inWindow('2025-01-01T08:59:59.999Z', window)).toBe(false);
    // Offsets are compared as instants: 10:30+01:00 is 09:30Z.
    expect(inWindow('2025-01-01T10:30:00+01:00', window)).toBe(true);
  });

  it('places a record in exactly one of two adjacent windows', () => {
    const next = { start: window.end, end: new Date('2025-01-01T11:00:00Z') };
    for (const at of ['2025-01-01T09:30:00Z', '2025-01-01T10:00:00Z', '2025-01-01T10:00:00.001Z']) {
      expect([inWindow(at, window), inWindow(at, next)].filter(Boolean)).toHaveLength(1);
    }
  });

  it('has no upper bound when the end is null, and never keeps a record without a readable change time', () => {
    expect(inWindow('2999-01-01T00:00:00Z', { start: window.start, end: null })).toBe(true);
    expect(inWindow(null, window)).toBe(false);
    expect(inWindow('not a date', { start: window.start, end: null })).toBe(false);
  });
});
