// The CPU-use reading the lanes of a worker process go by: busy time against what could have been
// busy over each sample period, from a cumulative counter (the host's cores, or a cgroup's usage
// against its quota), clamped to 0–1.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CPU_SAMPLE_MS, cpuUsage } from '../infra/cpu-usage';

/** A reading on fake timers over a counter that gives `counts` in turn (then its last, again and again). */
function usageOver(...counts: { busy: number; capacity: number }[]) {
  vi.useFakeTimers();
  let i = 0;
  return cpuUsage(() => counts[Math.min(i++, counts.length - 1)]!);
}

describe('cpuUsage', () => {
  afterEach(() => void vi.useRealTimers());

  it('reads 0 before the first period, then the busy share of each period', () => {
    const usage = usageOver({ busy: 100, capacity: 1000 }, { busy: 400, capacity: 2000 }, { busy: 400, capacity: 3000 }, { busy: 5000, capacity: 4000 });
    expect(usage.current()).toBe(0);
    vi.advanceTimersByTime(CPU_SAMPLE_MS);
    expect(usage.current()).toBeCloseTo(0.3);
    vi.advanceTimersByTime(CPU_SAMPLE_MS);
    expect(usage.current()).toBe(0);
    vi.advanceTimersByTime(CPU_SAMPLE_MS);
    expect(usage.current()).toBe(1);
    usage.stop();
  });

  it('keeps the last reading when no time could have been busy (a counter that did not move)', () => {
    const usage = usageOver({ busy: 0, capacity: 0 }, { busy: 50, capacity: 100 }, { busy: 50, capacity: 100 });
    vi.advanceTimersByTime(CPU_SAMPLE_MS);
    expect(usage.current()).toBeCloseTo(0.5);
    vi.advanceTimersByTime(CPU_SAMPLE_MS);
    expect(usage.current()).toBeCloseTo(0.5);
    usage.stop();
  });

  it("reads this machine's use between 0 and 1 by default", async () => {
    const usage = cpuUsage();
    await new Promise((r) => setTimeout(r, CPU_SAMPLE_MS * 2 + 50));
    expect(usage.current()).toBeGreaterThanOrEqual(0);
    expect(usage.current()).toBeLessThanOrEqual(1);
    usage.stop();
  });
});
