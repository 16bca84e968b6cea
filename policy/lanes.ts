// Which lane of a worker process goes first when its node runs out of CPU. A worker process has two
// lanes: immediate syncs (a caller waits on the answer) and scheduled work (due jobs, connection
// cycles, webhook deliveries, the reconcile tick). Immediate syncs have slots, a queue, a workflow
// thread and a pool of their own, but share the node's cores; when scheduled work keeps those busy,
// an immediate answer waits for a core. So while immediate syncs run, and for a short while after,
// and while the CPU use is over the target, the scheduled lane is held back: it starts no more
// activities (the long syncs that burn the CPU) than its minimum, the others waiting in the worker,
// and runs one workflow task at a time from each of its queues. With no immediate sync about, or
// with CPU to spare, the scheduled lane runs at its full size.

/** How long after the immediate lane's last activity the scheduled lane still yields: the workflow tasks that end that sync, and the next sync of a caller who asks again. */
export const IMMEDIATE_HOLD_MS = 5_000;

/** Scheduled-lane activities that run whatever the CPU use: progress on a saturated node. */
export const MIN_SCHEDULED_ACTIVITIES = 4;

/** What the immediate lane of a process is doing: activities running now, and when the last one ended (epoch ms; null: never). */
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

/** Whether one more scheduled-lane activity may start: always while fewer than MIN_SCHEDULED_ACTIVITIES run; beyond that, unless the lane is held back. */
export function mayStartScheduledActivity(s: { running: number; held: boolean }): boolean {
  return s.running < MIN_SCHEDULED_ACTIVITIES || !s.held;
}
