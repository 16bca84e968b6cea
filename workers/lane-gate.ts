import type { ActivityOf } from '../activities/activity-tenant';
import type { ActivityInterceptorsFactory, CustomSlotSupplier, SlotPermit, SlotReleaseContext, SlotReserveContext, WorkflowSlotInfo } from '@temporalio/worker';
import { workingFor } from '../lib/tenant-turns';
import { fairShare, immediateLaneBusy, mayStartScheduledActivity, nextInLine, scheduledLaneHeld, type ImmediateLaneState, type WaitingActivity } from '../policy/lanes';

/** How often a scheduled activity held back by the gate looks again (one that ends wakes the next at once). */
export const GATE_RECHECK_MS = 50;
/** How often a held-back activity heartbeats while it waits (with the details it started with), so its heartbeat timeout does not fire. */
export const GATE_HEARTBEAT_MS = 1_000;

/**
 * Waits GATE_RECHECK_MS, or less: until one of `waiting` is called (something was released) or
 * `signal` aborts. Whoever waits looks again afterwards.
 */
function nap(waiting: Set<() => void>, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      waiting.delete(done);
      resolve();
    };
    const timer = setTimeout(done, GATE_RECHECK_MS);
    signal.addEventListener('abort', done, { once: true });
    waiting.add(done);
  });
}

/**
 * The two lanes of one worker process (policy/lanes.ts): the immediate worker's activities report
 * to it while they run; the scheduled worker's activities ask it before they start, and wait while
 * it holds them back, and its workflow-task slot supplier asks it before handing out more than one
 * slot per queue.
 */
export class LaneGate {
  private readonly lane: ImmediateLaneState = { running: 0, lastEndedAt: null };
  private scheduledRunning = 0;
  private readonly runningByTenant = new Map<string, number>();
  private readonly line = new Set<WaitingActivity>();
  private arrivals = 0;
  private readonly waiting = new Set<() => void>();

  constructor(
    readonly targetCpu: number,
    private readonly cpu: () => number,
    /** Milliseconds on a monotonic clock: a wall clock set back (an NTP step) would hold the lane, and stop heartbeats, for as long. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** An immediate-lane activity started. */
  immediateStarted(): void {
    this.lane.running++;
  }

  /** An immediate-lane activity ended. */
  immediateEnded(): void {
    this.lane.running = Math.max(0, this.lane.running - 1);
    this.lane.lastEndedAt = this.now();
  }

  /** Whether the scheduled lane is held back now (policy/lanes.ts); the CPU is read only while the immediate lane is busy. */
  holdsBack(): boolean {
    const immediateBusy = immediateLaneBusy(this.lane, this.now());
    return scheduledLaneHeld({ immediateBusy, cpu: immediateBusy ? this.cpu() : 0, targetCpu: this.targetCpu });
  }

  private tenantRunning = (tenant: string): number => this.runningByTenant.get(tenant) ?? 0;

  /** Whether a scheduled activity of `tenant` may start now: `waiter` is its place in line (none: it would come last). */
  mayStartScheduled(tenant = '', waiter?: WaitingActivity): boolean {
    const held = this.holdsBack();
    if (!held) return true;
    const next = nextInLine(this.line, this.tenantRunning);
    const tenants = new Set([...this.runningByTenant.keys(), ...[...this.line].map((w) => w.tenant), tenant]);
    return mayStartScheduledActivity({
      running: this.scheduledRunning,
      held,
      tenantRunning: this.tenantRunning(tenant),
      fairShare: fairShare(tenants.size),
      nextInLine: next === undefined || next === waiter,
    });
  }

  /**
   * Resolves once a scheduled activity of `tenant` ('' for work of no tenant) may start, counting it
   * as running (end it with `scheduledEnded(tenant)`). Meanwhile it waits in line and calls `tick`
   * every GATE_HEARTBEAT_MS; rejects with the signal's reason when it is aborted (the activity was
   * cancelled).
   */
  async admitScheduled(signal: AbortSignal, tick: () => void, tenant = ''): Promise<void> {
    const waiter: WaitingActivity = { tenant, seq: this.arrivals++ };
    this.line.add(waiter);
    try {
      let lastTick = this.now();
      while (!this.mayStartScheduled(tenant, waiter)) {
        signal.throwIfAborted();
        if (this.now() - lastTick >= GATE_HEARTBEAT_MS) {
          tick();
          lastTick = this.now();
        }
        await nap(this.waiting, signal);
      }
    } finally {
      this.line.delete(waiter);
    }
    this.scheduledRunning++;
    this.runningByTenant.set(tenant, this.tenantRunning(tenant) + 1);
  }

  /** A scheduled activity of `tenant` admitted by `admitScheduled` ended: the waiting ones look again. */
  scheduledEnded(tenant = ''): void {
    this.scheduledRunning = Math.max(0, this.scheduledRunning - 1);
    const left = this.tenantRunning(tenant) - 1;
    if (left > 0) this.runningByTenant.set(tenant, left);
    else this.runningByTenant.delete(tenant);
    for (const wake of this.waiting) wake();
  }
}

/**
 * The immediate worker's activity interceptor: each immediate sync's activity is reported to the
 * LaneGate while it runs (its two short workflow tasks are not: the hold after it covers them).
 */
export function immediateLaneInterceptor(gate: LaneGate): ActivityInterceptorsFactory {
  return () => ({
    inbound: {
      async execute(input, next) {
        gate.immediateStarted();
        try {
          return await next(input);
        } finally {
          gate.immediateEnded();
        }
      },
    },
  });
}

/** The tenant a scheduled activity works for ('' when none, or when it cannot be told): activities/activity-tenant.ts. */
export type ActivityTenant = (activity: ActivityOf) => Promise<string>;

/**
 * The scheduled worker's activity interceptor: an activity (not a local one: those run inside a
 * workflow task, which must not wait) runs as its tenant's work (`tenantOf`, set as `workingFor`:
 * its statements take the tenant's turns at the pool, workers/tenant-pool.ts) and, with a gate,
 * starts only once the LaneGate lets it, in line with the other tenants'. While it waits it holds
 * its slot, heartbeats with the details it started with, and stops when cancelled.
 */
export function scheduledLaneInterceptor(gate: LaneGate | undefined, tenantOf: ActivityTenant = async () => ''): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        if (ctx.info.isLocal) return next(input);
        const tenant = await tenantOf({ activityType: ctx.info.activityType, workflowId: ctx.info.workflowExecution?.workflowId ?? '', args: input.args });
        const run = () => workingFor.run(tenant, () => next(input));
        if (!gate) return run();
        await gate.admitScheduled(ctx.cancellationSignal, () => ctx.heartbeat(ctx.info.heartbeatDetails), tenant);
        try {
          return await run();
        } finally {
          gate.scheduledEnded(tenant);
        }
      },
    },
  });
}

/** A workflow-task permit: which queue its poller polls, so that its release is counted there. */
interface WorkflowTaskPermit extends SlotPermit {
  sticky: boolean;
}

/**
 * The scheduled worker's workflow-task slots: at most `maximum` in all. Each queue (the worker's
 * sticky queue, where the tasks of its cached runs go, and the task queue itself) always gets
 * one, so that neither starves; beyond that, none while the LaneGate holds the scheduled lane
 * back (an immediate sync runs on a hot node). Held-back reservations look again every
 * GATE_RECHECK_MS, and at once when a slot is released.
 */
export class ScheduledWorkflowTaskSlots implements CustomSlotSupplier<WorkflowSlotInfo> {
  readonly type = 'custom' as const;
  private readonly issued = { sticky: 0, normal: 0 };
  private readonly waiting = new Set<() => void>();

  constructor(
    private readonly gate: LaneGate,
    private readonly maximum: number,
  ) {}

  private mayIssue(sticky: boolean): boolean {
    if (this.issued.sticky + this.issued.normal >= this.maximum) return false;
    if ((sticky ? this.issued.sticky : this.issued.normal) < 1) return true;
    return !this.gate.holdsBack();
  }

  private issue(sticky: boolean): WorkflowTaskPermit {
    this.issued[sticky ? 'sticky' : 'normal']++;
    return { sticky };
  }

  async reserveSlot(ctx: SlotReserveContext, abortSignal: AbortSignal): Promise<SlotPermit> {
    while (!this.mayIssue(ctx.isSticky)) {
      abortSignal.throwIfAborted();
      await nap(this.waiting, abortSignal);
    }
    return this.issue(ctx.isSticky);
  }

  tryReserveSlot(ctx: SlotReserveContext): SlotPermit | null {
    return this.mayIssue(ctx.isSticky) ? this.issue(ctx.isSticky) : null;
  }

  markSlotUsed(): void {}

  releaseSlot(ctx: SlotReleaseContext<WorkflowSlotInfo>): void {
    const kind = (ctx.permit as Partial<WorkflowTaskPermit>).sticky ? 'sticky' : 'normal';
    this.issued[kind] = Math.max(0, this.issued[kind] - 1);
    for (const wake of this.waiting) wake();
  }
}
