// Which lane of a worker process goes first when its node runs out of CPU. A worker process has two
// lanes: immediate syncs (a caller waits on the answer) and scheduled work (due jobs, connection
// cycles, webhook deliveries, the reconcile tick). Immediate syncs have slots, a queue, a workflow
// thread and a pool of their own, but share the node's cores; when scheduled work keeps those busy,
// an immediate answer waits for a core. So while immediate syncs run, and for a short while after,
// and while the CPU use is over the target, the scheduled lane is held back: it starts no more
// activities (the long syncs that burn the CPU) than its minimum, except that each tenant may run
// its fair share of that minimum whatever another tenant started before (the others wait in the
// worker, and a free slot goes to the tenant running the fewest), and it runs one workflow task at
// a time from each of its queues. With no immediate sync about, or with CPU to spare, the
// scheduled lane runs at its full size.

/** How long after the immediate lane's last activity the scheduled lane still yields: the workflow tasks that end that sync, and the next sync of a caller who asks again. */
export const IMMEDIATE_HOLD_MS = 5_000;

/** Scheduled-lane activities that run whatever the CPU use: progress on a saturated node. */
export const MIN_SCHEDULED_ACTIVITIES = 4;

/** What the immediate lane of a process is doing: activities running now, and when the last one ended (ms on the gate's monotonic clock; null: never). */
export interface ImmediateLaneState {
  running: number;
  lastEndedAt: number | null;
}

/** Whether the immediate lane counts as busy at `now`: an activity runs, or one ended within IMMEDIATE_HOLD_MS. */
export function immediateLaneBusy(lane: ImmediateLaneState, now: number): boolean {
  return lane.running > 0 || (lane.lastEndedAt !== null && now - lane.lastEndedAt < IMMEDIATE_HOLD_MS);
}

/** Whether the scheduled lane is held back now: the immediate lane is busy and the CPU use (0–1) is over `targetCpu`. */
export function scheduledLaneHeld(s: { immediateBusy: boolean; cpu: number; targetCpu: number }): boolean {
  return s.immediateBusy && s.cpu > s.targetCpu;
}

/**
 * Whether one more scheduled-lane activity of a tenant may start. Not held back: always. Held back:
 * while the tenant runs fewer than its fair share (`fairShare`: so that one tenant's long syncs,
 * started before, never keep another's waiting behind them), and beyond that, while fewer than
 * MIN_SCHEDULED_ACTIVITIES run, the one next in line (`nextInLine`).
 */
export function mayStartScheduledActivity(s: { running: number; held: boolean; tenantRunning: number; fairShare: number; nextInLine: boolean }): boolean {
  if (!s.held || s.tenantRunning < s.fairShare) return true;
  return s.running < MIN_SCHEDULED_ACTIVITIES && s.nextInLine;
}

/** A tenant's share of a held-back lane: MIN_SCHEDULED_ACTIVITIES split between the tenants with scheduled work running or waiting, one at least. */
export function fairShare(tenantsWithWork: number): number {
  return Math.max(1, Math.floor(MIN_SCHEDULED_ACTIVITIES / Math.max(1, tenantsWithWork)));
}

/** A scheduled-lane activity waiting at the gate: its tenant ('' for work of no tenant) and its place in arrival order. */
export interface WaitingActivity {
  tenant: string;
  seq: number;
}

/** Which waiting activity a free slot goes to: the one whose tenant runs the fewest, then the one that came first. */
export function nextInLine<W extends WaitingActivity>(waiting: Iterable<W>, running: (tenant: string) => number): W | undefined {
  let best: W | undefined;
  let bestRunning = Infinity;
  for (const w of waiting) {
    const r = running(w.tenant);
    if (r < bestRunning || (r === bestRunning && best !== undefined && w.seq < best.seq)) {
      best = w;
      bestRunning = r;
    }
  }
  return best;
}
