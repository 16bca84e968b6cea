// The two lanes of a worker process (policy/lanes.ts, workers/lane-gate.ts): while immediate syncs
// run, and for IMMEDIATE_HOLD_MS after, and while the CPU use is over the target, no more than
// MIN_SCHEDULED_ACTIVITIES scheduled activities start; the others wait (heartbeating, cancellable)
// until one ends or the gate opens. Otherwise every scheduled activity starts at once.
import { describe, expect, it, vi } from 'vitest';
import { fairShare, IMMEDIATE_HOLD_MS, immediateLaneBusy, MIN_SCHEDULED_ACTIVITIES, mayStartScheduledActivity, nextInLine, scheduledLaneHeld } from '../policy/lanes';
import { GATE_HEARTBEAT_MS, immediateLaneInterceptor, LaneGate, scheduledLaneInterceptor, ScheduledWorkflowTaskSlots } from '../workers/lane-gate';

/** Settles within a few event-loop turns, or reports that it is still pending. */
async function settled<T>(p: Promise<T>, ms = 5): Promise<T | 'pending'> {
  return Promise.race([p, new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms))]);
}

describe('scheduledLaneHeld and mayStartScheduledActivity', () => {
  it('hold the lane back only while the immediate lane is busy and the CPU use is over the target', () => {
    expect(scheduledLaneHeld({ immediateBusy: true, cpu: 0.9, targetCpu: 0.7 })).toBe(true);
    expect(scheduledLaneHeld({ immediateBusy: false, cpu: 0.9, targetCpu: 0.7 })).toBe(false);
    expect(scheduledLaneHeld({ immediateBusy: true, cpu: 0.7, targetCpu: 0.7 })).toBe(false);
    expect(scheduledLaneHeld({ immediateBusy: true, cpu: 1, targetCpu: 1 })).toBe(false);
  });
  it("start activities up to the minimum (next in line first), beyond it only while the lane is not held, and a tenant's fair share always", () => {
    const s = (running: number, held: boolean, tenantRunning = 1, next = true, share = 1) => mayStartScheduledActivity({ running, held, tenantRunning, fairShare: share, nextInLine: next });
    expect(s(MIN_SCHEDULED_ACTIVITIES - 1, true)).toBe(true);
    expect(s(MIN_SCHEDULED_ACTIVITIES - 1, true, 1, false)).toBe(false);
    expect(s(MIN_SCHEDULED_ACTIVITIES, true)).toBe(false);
    expect(s(10 * MIN_SCHEDULED_ACTIVITIES, false, 5, false)).toBe(true);
    expect(s(10 * MIN_SCHEDULED_ACTIVITIES, true, 0, false)).toBe(true);
    expect(s(10 * MIN_SCHEDULED_ACTIVITIES, true, 1, false, 2)).toBe(true);
    expect(s(10 * MIN_SCHEDULED_ACTIVITIES, true, 2, false, 2)).toBe(false);
  });
  it('fairShare: the minimum split between the tenants with work, one at least', () => {
    expect(fairShare(1)).toBe(MIN_SCHEDULED_ACTIVITIES);
    expect(fairShare(2)).toBe(Math.floor(MIN_SCHEDULED_ACTIVITIES / 2));
    expect(fairShare(10 * MIN_SCHEDULED_ACTIVITIES)).toBe(1);
    expect(fairShare(0)).toBe(MIN_SCHEDULED_ACTIVITIES);
  });
  it('nextInLine: the tenant running the fewest, then the one that came first', () => {
    const running = (t: string) => ({ a: 3, b: 1, c: 1 })[t] ?? 0;
    expect(nextInLine([{ tenant: 'a', seq: 0 }, { tenant: 'c', seq: 2 }, { tenant: 'b', seq: 1 }], running)).toEqual({ tenant: 'b', seq: 1 });
    expect(nextInLine([{ tenant: 'a', seq: 0 }, { tenant: 'd', seq: 5 }], running)).toEqual({ tenant: 'd', seq: 5 });
    expect(nextInLine([], running)).toBeUndefined();
  });
});

describe('immediateLaneBusy', () => {
  it('is busy while an activity runs and for IMMEDIATE_HOLD_MS after the last one ended', () => {
    expect(immediateLaneBusy({ running: 0, lastEndedAt: null }, 0)).toBe(false);
    expect(immediateLaneBusy({ running: 1, lastEndedAt: null }, 0)).toBe(true);
    expect(immediateLaneBusy({ running: 0, lastEndedAt: 1000 }, 1000 + IMMEDIATE_HOLD_MS - 1)).toBe(true);
    expect(immediateLaneBusy({ running: 0, lastEndedAt: 1000 }, 1000 + IMMEDIATE_HOLD_MS)).toBe(false);
  });
});

describe('LaneGate', () => {
  function lanes(cpu = 0.95) {
    let now = 0;
    const gate = new LaneGate(0.7, () => cpu, () => now);
    const signal = new AbortController().signal;
    const admit = (tick = () => {}) => gate.admitScheduled(signal, tick);
    return { gate, admit, advance: (ms: number) => (now += ms) };
  }

  it('admits every scheduled activity while no immediate activity has run, hot CPU or not', async () => {
    const { admit } = lanes();
    for (let i = 0; i < 3 * MIN_SCHEDULED_ACTIVITIES; i++) expect(await settled(admit())).toBeUndefined();
  });

  it('holds to the minimum while an immediate activity runs and for the hold after it, then admits the waiting one', async () => {
    const { gate, admit, advance } = lanes();
    gate.immediateStarted();
    for (let i = 0; i < MIN_SCHEDULED_ACTIVITIES; i++) await admit();
    const waiting = admit();
    expect(await settled(waiting)).toBe('pending');
    gate.immediateEnded();
    advance(IMMEDIATE_HOLD_MS - 1);
    expect(await settled(waiting, 100)).toBe('pending');
    advance(1);
    // It looks again within GATE_RECHECK_MS.
    expect(await settled(waiting, 500)).toBeUndefined();
  });

  it('admits the next waiting activity as soon as a running one ends', async () => {
    const { gate, admit } = lanes();
    gate.immediateStarted();
    for (let i = 0; i < MIN_SCHEDULED_ACTIVITIES; i++) await admit();
    const waiting = admit();
    expect(await settled(waiting)).toBe('pending');
    gate.scheduledEnded();
    expect(await settled(waiting)).toBeUndefined();
  });

  it("held back, starts a tenant's fair share beside another's minimum, and gives a free slot to the tenant running the fewest", async () => {
    const { gate } = lanes();
    gate.immediateStarted();
    const never = new AbortController().signal;
    const admit = (tenant: string) => gate.admitScheduled(never, () => {}, tenant);
    for (let i = 0; i < MIN_SCHEDULED_ACTIVITIES; i++) await admit('a');
    const moreOfA = admit('a');
    expect(await settled(moreOfA)).toBe('pending');
    // b runs none: its share of the minimum (split between a and b) starts at once; beyond it, b waits.
    for (let i = 0; i < fairShare(2); i++) expect(await settled(admit('b'))).toBeUndefined();
    const moreOfB = admit('b');
    expect(await settled(moreOfB)).toBe('pending');
    // a ends until the minimum has room: the slot goes to the tenant running the fewest (a, now).
    for (let i = 0; i < fairShare(2) + 1; i++) gate.scheduledEnded('a');
    expect(await settled(moreOfA)).toBeUndefined();
    expect(await settled(moreOfB)).toBe('pending');
    // b ends one: under its share again, its next starts.
    gate.scheduledEnded('b');
    expect(await settled(moreOfB)).toBeUndefined();
  });

  it('does not hold back while the CPU use is under the target, busy immediate lane or not', async () => {
    const { gate, admit } = lanes(0.3);
    gate.immediateStarted();
    for (let i = 0; i < 2 * MIN_SCHEDULED_ACTIVITIES; i++) expect(await settled(admit())).toBeUndefined();
  });

  it('heartbeats while it waits, and stops waiting with the reason when the activity is cancelled', async () => {
    const { gate, advance } = lanes();
    gate.immediateStarted();
    const never = new AbortController().signal;
    for (let i = 0; i < MIN_SCHEDULED_ACTIVITIES; i++) await gate.admitScheduled(never, () => {});
    const cancel = new AbortController();
    let ticks = 0;
    const waiting = gate.admitScheduled(cancel.signal, () => ticks++);
    await settled(waiting, 60);
    advance(GATE_HEARTBEAT_MS);
    await settled(waiting, 120);
    expect(ticks).toBeGreaterThanOrEqual(1);
    cancel.abort(new Error('cancelled by the workflow'));
    await expect(waiting).rejects.toThrow('cancelled by the workflow');
    // Not counted: the minimum is still full, one ending admits one more.
    gate.scheduledEnded();
    expect(await settled(gate.admitScheduled(never, () => {}))).toBeUndefined();
    expect(await settled(gate.admitScheduled(never, () => {}))).toBe('pending');
  });
});

describe('the lanes\' activity interceptors', () => {
  const ctx = (isLocal = false) => ({ info: { isLocal, heartbeatDetails: { page: 3 } }, cancellationSignal: new AbortController().signal, heartbeat: () => {} }) as never;

  it('report each immediate activity to the gate while it runs, failed ones too', async () => {
    let now = 0;
    const gate = new LaneGate(0.7, () => 1, () => now);
    for (let i = 0; i < MIN_SCHEDULED_ACTIVITIES; i++) await gate.admitScheduled(new AbortController().signal, () => {});
    const inbound = immediateLaneInterceptor(gate)(ctx()).inbound!;
    let heldWhileRunning = false;
    await inbound.execute!({} as never, async () => {
      heldWhileRunning = !gate.mayStartScheduled();
      return 'done';
    });
    expect(heldWhileRunning).toBe(true);
    await expect(inbound.execute!({} as never, async () => Promise.reject(new Error('provider down')))).rejects.toThrow('provider down');
    // Both ended: held for IMMEDIATE_HOLD_MS, then free (a failed activity left running would hold it for good).
    expect(gate.mayStartScheduled()).toBe(false);
    now = IMMEDIATE_HOLD_MS;
    expect(gate.mayStartScheduled()).toBe(true);
  });

  it('make a scheduled activity wait at the gate, count it while it runs, and let local activities through', async () => {
    const gate = new LaneGate(0.7, () => 1, () => 0);
    gate.immediateStarted();
    const scheduled = scheduledLaneInterceptor(gate);
    const finish: Array<() => void> = [];
    const running = Array.from({ length: MIN_SCHEDULED_ACTIVITIES }, () =>
      scheduled(ctx()).inbound!.execute!({} as never, () => new Promise((r) => finish.push(() => r('ok')))),
    );
    await settled(Promise.resolve());
    let started = false;
    const held = scheduled(ctx()).inbound!.execute!({} as never, async () => {
      started = true;
      return 'ok';
    });
    expect(await settled(held)).toBe('pending');
    expect(started).toBe(false);
    // A local activity runs inside a workflow task: never held.
    expect(await settled(scheduled(ctx(true)).inbound!.execute!({} as never, async () => 'local'))).toBe('local');
    finish[0]!();
    expect(await settled(held)).toBe('ok');
    finish.slice(1).forEach((f) => f());
    await Promise.all(running);
  });
});

describe('the lane gate and the wall clock', () => {
  it('a wall clock set back (an NTP step) neither holds the scheduled lane past IMMEDIATE_HOLD_MS nor stops a waiting activity heartbeating: the gate times itself on a monotonic clock', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'performance', 'setTimeout', 'clearTimeout'] });
    try {
      const gate = new LaneGate(0.7, () => 1);
      gate.immediateStarted();
      for (let i = 0; i < MIN_SCHEDULED_ACTIVITIES; i++) await gate.admitScheduled(new AbortController().signal, () => {});
      let beats = 0;
      const waiting = gate.admitScheduled(new AbortController().signal, () => beats++);
      // The wall clock goes back an hour while the activity waits; then 3 s pass.
      vi.setSystemTime(Date.now() - 3_600_000);
      await vi.advanceTimersByTimeAsync(3 * GATE_HEARTBEAT_MS);
      const waitedBeats = beats;
      // The immediate sync ends, the wall clock goes back an hour again, IMMEDIATE_HOLD_MS pass.
      gate.immediateEnded();
      vi.setSystemTime(Date.now() - 3_600_000);
      await vi.advanceTimersByTimeAsync(IMMEDIATE_HOLD_MS);
      expect({ waitedBeats, held: gate.holdsBack() }).toEqual({ waitedBeats: 3, held: false });
      await waiting;
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("the scheduled lane's workflow-task slots", () => {
  const ctx = (isSticky: boolean) => ({ slotType: 'workflow' as const, taskQueue: 'q', workerIdentity: 'w', workerBuildId: '', isSticky });
  function slots(busy: boolean, cpu = 0.95) {
    const gate = new LaneGate(0.7, () => cpu, () => 0);
    if (busy) gate.immediateStarted();
    return new ScheduledWorkflowTaskSlots(gate, 3);
  }

  it('hands out every slot up to the maximum while the gate is open', () => {
    const s = slots(false);
    expect([s.tryReserveSlot(ctx(false)), s.tryReserveSlot(ctx(true)), s.tryReserveSlot(ctx(false))].every((p) => p !== null)).toBe(true);
    expect(s.tryReserveSlot(ctx(true))).toBeNull();
  });

  it('while it holds back, still gives each queue one slot, so that neither the sticky nor the normal queue starves', () => {
    const s = slots(true);
    const normal = s.tryReserveSlot(ctx(false));
    expect(normal).not.toBeNull();
    expect(s.tryReserveSlot(ctx(false))).toBeNull();
    const sticky = s.tryReserveSlot(ctx(true));
    expect(sticky).not.toBeNull();
    expect(s.tryReserveSlot(ctx(true))).toBeNull();
    // A released permit is counted back on its own queue.
    s.releaseSlot({ permit: sticky! });
    expect(s.tryReserveSlot(ctx(false))).toBeNull();
    expect(s.tryReserveSlot(ctx(true))).not.toBeNull();
  });

  it('does not hold back while the CPU use is under the target', () => {
    const s = slots(true, 0.3);
    expect([s.tryReserveSlot(ctx(false)), s.tryReserveSlot(ctx(false)), s.tryReserveSlot(ctx(false))].every((p) => p !== null)).toBe(true);
  });

  it('wakes a waiting reservation when a slot is released, and rejects one the SDK aborts', async () => {
    const s = slots(true);
    const abort = new AbortController();
    const first = await s.reserveSlot(ctx(false), abort.signal);
    const waiting = s.reserveSlot(ctx(false), abort.signal);
    expect(await settled(waiting)).toBe('pending');
    s.releaseSlot({ permit: first });
    expect(await settled(waiting)).toEqual({ sticky: false });
    const aborted = s.reserveSlot(ctx(false), abort.signal);
    abort.abort(new Error('poller stopped'));
    await expect(aborted).rejects.toThrow('poller stopped');
  });
});
