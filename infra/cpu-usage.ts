import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

/** How often the CPU use is read. */
export const CPU_SAMPLE_MS = 250;

/** A CPU-use reading: the share (0–1) of the CPU this process may use that was busy over the last sample period. */
export interface CpuUsage {
  /** The latest reading (0 before the first period has passed). */
  current(): number;
  /** Stops reading. */
  stop(): void;
}

/** A cumulative counter of busy CPU time against the time that could have been busy, both in the same unit. */
type Counter = () => { busy: number; capacity: number };

/**
 * The container's CPU use against its limit when it runs under a cgroup v2 CPU limit (`cpu.max`
 * names a quota), otherwise the host's (every core's busy time, as `os.cpus()` reports it), so a
 * worker on a shared host also counts its neighbours' use. Read every CPU_SAMPLE_MS on a timer
 * that does not keep the process alive.
 */
export function cpuUsage(counter: Counter = cgroupCounter() ?? hostCounter): CpuUsage {
  let last = counter();
  let reading = 0;
  const timer = setInterval(() => {
    const next = counter();
    const capacity = next.capacity - last.capacity;
    if (capacity > 0) reading = Math.min(1, Math.max(0, (next.busy - last.busy) / capacity));
    last = next;
  }, CPU_SAMPLE_MS);
  timer.unref();
  return { current: () => reading, stop: () => clearInterval(timer) };
}

/** Every core's busy and total time (ms) since boot. */
function hostCounter(): { busy: number; capacity: number } {
  let busy = 0;
  let capacity = 0;
  for (const { times } of cpus()) {
    const total = times.user + times.nice + times.sys + times.irq + times.idle;
    capacity += total;
    busy += total - times.idle;
  }
  return { busy, capacity };
}

/** The cgroup's busy time (µs) against its quota's share of the wall clock (µs), when `cpu.max` sets a quota; otherwise null. */
function cgroupCounter(): Counter | null {
  let quota: number;
  let period: number;
  try {
    const [q, p] = readFileSync('/sys/fs/cgroup/cpu.max', 'utf8').trim().split(/\s+/);
    if (q === undefined || q === 'max' || p === undefined) return null;
    quota = Number(q);
    period = Number(p);
    if (!(quota > 0 && period > 0)) return null;
    readFileSync('/sys/fs/cgroup/cpu.stat', 'utf8');
  } catch {
    return null;
  }
  const cores = quota / period;
  return () => {
    const usage = /^usage_usec (\d+)$/m.exec(readFileSync('/sys/fs/cgroup/cpu.stat', 'utf8'));
    return { busy: Number(usage?.[1] ?? 0), capacity: performance.now() * 1000 * cores };
  };
}
