// The scheduler of one connection (SPEC §4): workflow `connection:<connection_id>`, one cycle per
// run — clean up → plan → enqueue → durable sleep → run the job as a child → record — then
// continue-as-new, so history stays small forever and code changes apply at a cycle boundary.
import {
  CancellationScope,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  executeChild,
  isCancellation,
  log,
  proxyActivities,
  setHandler,
  allHandlersFinished,
  upsertSearchAttributes,
  uuid4,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ConnectionContext } from '../activities/load-connection-context';
import type { ScheduleChange } from '../activities/save-schedule';
import {
  DEFAULT_SCHEDULE_SETTINGS,
  cronProblem,
  intervalProblem,
  planNextRun,
  resolveSchedule,
  toPlannedRun,
  type Plan,
} from '../policy/schedule';
import { BOOKKEEPING } from './activity-options';
import { syncJobWorkflowId } from './ids';
import { CONNECTION_ID, PHASE, PROVIDER, TENANT_ID } from './search-attributes';
import { syncJobWorkflow, type SyncJobResult } from './sync-job';

const acts = proxyActivities<Activities>(BOOKKEEPING);

/** A sync's mode. */
export type SyncMode = 'incremental' | 'full';

/** Run now instead of waiting; `mode` defaults to incremental. */
export const syncNowSignal = defineSignal<[{ mode?: SyncMode }?]>('syncNow');
/** Stop scheduling runs until `resume` (a running job finishes; a queued one is cancelled). */
export const pauseSignal = defineSignal('pause');
/** Resume scheduling after `pause`. */
export const resumeSignal = defineSignal('resume');
/** Change the interval or cron; while sleeping, the next run is re-planned at once. */
export const updateScheduleSignal = defineSignal<[{ interval_seconds?: number; cron?: string }]>('updateSchedule');
/** Cancel the current job, queued or running; the schedule goes on with the next cycle. */
export const cancelJobSignal = defineSignal('cancelJob');

/** Live phase of a connection workflow. */
export type Phase = 'starting' | 'sleeping' | 'running' | 'paused' | 'backing_off' | 'stopped';

/** Live state returned by the `state` query. Times are ISO strings. */
export interface ConnectionState {
  connection_id: string;
  phase: Phase;
  next_run_at: string | null;
  scheduled_at: string | null;
  last_jitter_seconds: number | null;
  current_job_id: string | null;
  last_outcome: SyncJobResult['status'] | null;
  breaker: { paused_until: string } | null;
  /** Signals received and not yet acted on. */
  pending: string[];
  /** Completed cycles across continue-as-new. */
  cycles: number;
}

/** Returns the connection workflow's live state. */
export const stateQuery = defineQuery<ConnectionState>('state');

/** Intents recorded by signal handlers; only the main loop acts on them. */
interface Intents {
  syncNow: SyncMode | null;
  /** `paused` / `active` when a pause or resume is pending (the last one wins). */
  status: 'paused' | 'active' | null;
  schedule: ScheduleChange | null;
  cancelJob: boolean;
}

/** What one run hands the next across continue-as-new. */
export interface CarriedState {
  intents: Intents;
  lastOutcome: ConnectionState['last_outcome'];
  lastJitterSeconds: number | null;
  nextRunAt: string | null;
  cycles: number;
}

/** Input of the connection workflow. */
export interface ConnectionWorkflowInput {
  connectionId: string;
  carried?: CarriedState;
}

const SKIP_RETRY_MS = 60_000;
const LOCKED_RETRY_MS = 5_000;
const PAUSED_RECHECK_MS = 60 * 60_000;

/** The long-running scheduler workflow of one connection. */
export async function connectionWorkflow(input: ConnectionWorkflowInput): Promise<void> {
  const { connectionId } = input;
  const carried = input.carried;
  const intents: Intents = carried?.intents ?? { syncNow: null, status: null, schedule: null, cancelJob: false };
  const state: ConnectionState = {
    connection_id: connectionId,
    phase: 'starting',
    next_run_at: carried?.nextRunAt ?? null,
    scheduled_at: null,
    last_jitter_seconds: carried?.lastJitterSeconds ?? null,
    current_job_id: null,
    last_outcome: carried?.lastOutcome ?? null,
    breaker: null,
    pending: [],
    cycles: carried?.cycles ?? 0,
  };
  const anyIntent = () =>
    intents.syncNow !== null || intents.status !== null || intents.schedule !== null || intents.cancelJob;

  setHandler(syncNowSignal, (arg) => {
    intents.syncNow = arg?.mode === 'full' ? 'full' : 'incremental';
  });
  setHandler(pauseSignal, () => {
    intents.status = 'paused';
  });
  setHandler(resumeSignal, () => {
    intents.status = 'active';
  });
  setHandler(updateScheduleSignal, (change) => {
    const accepted = acceptScheduleChange(change);
    if (accepted) intents.schedule = accepted;
  });
  setHandler(cancelJobSignal, () => {
    intents.cancelJob = true;
  });
  setHandler(stateQuery, () => ({ ...state, pending: pendingNames(intents) }));

  let phaseShown: Phase | null = null;
  const setPhase = (phase: Phase) => {
    state.phase = phase;
    if (phase !== phaseShown) {
      upsertSearchAttributes([{ key: PHASE, value: phase }]);
      phaseShown = phase;
    }
  };

  /** Applies a pending pause/resume or schedule change to Postgres. */
  const applyIntents = async () => {
    if (intents.schedule) {
      const change = intents.schedule;
      intents.schedule = null;
      await acts.saveSchedule({ connectionId, change });
    }
    if (intents.status) {
      const status = intents.status;
      intents.status = null;
      await acts.setConnectionStatus({ connectionId, status });
    }
  };

  try {
    await acts.failAbandonedJobs({ connectionId, at: Date.now() });
    let identityShown = false;

    cycle: for (;;) {
      await applyIntents();
      const ctx = await acts.loadConnectionContext(connectionId, Date.now());
      if (!ctx || ctx.status === 'disabled') {
        setPhase('stopped');
        log.info('connection gone or disabled: connection workflow completes', { connectionId });
        return;
      }
      if (!identityShown) {
        upsertSearchAttributes([
          { key: CONNECTION_ID, value: connectionId },
          { key: TENANT_ID, value: ctx.tenantId },
          { key: PROVIDER, value: ctx.providerSlug },
        ]);
        identityShown = true;
      }
      if (ctx.status === 'paused') {
        setPhase('paused');
        // Woken by resume; also re-reads the status hourly in case it was changed without a signal.
        await condition(() => intents.status !== null || intents.schedule !== null, PAUSED_RECHECK_MS);
        continue;
      }
      if (ctx.pausedUntil !== null) {
        setPhase('backing_off');
        state.breaker = { paused_until: iso(ctx.pausedUntil) };
        await condition(() => intents.status !== null, ctx.pausedUntil - Date.now());
        continue;
      }
      state.breaker = null;
      intents.cancelJob = false; // nothing to cancel yet

      const jobId = uuid4();
      const manual = intents.syncNow;
      const plan = manual ? undefined : planFor(ctx);
      const scheduledAt = plan?.scheduledAt ?? Date.now();
      const enqueued = await acts.enqueueJob({
        jobId,
        connectionId,
        jobType: manual ?? 'incremental',
        trigger: manual ? 'manual' : 'schedule',
        scheduledAt,
        at: Date.now(),
        plan: plan && toPlannedRun(plan),
      });
      if (enqueued.outcome === 'missing') continue;
      if (enqueued.outcome !== 'enqueued') {
        // Locked by a concurrent enqueue, an active job we don't own, or a status change: look again soon.
        setPhase('sleeping');
        await condition(anyIntent, enqueued.outcome === 'locked' ? LOCKED_RETRY_MS : SKIP_RETRY_MS);
        continue;
      }
      if (manual) intents.syncNow = null;
      showPlan(state, scheduledAt, plan);
      state.current_job_id = jobId;

      // Durable sleep until scheduled_at, woken early by signals.
      setPhase('sleeping');
      for (;;) {
        const remaining = Date.parse(state.scheduled_at!) - Date.now();
        const woke = remaining > 0 ? await condition(anyIntent, remaining) : anyIntent();
        if (!woke) break;
        if (intents.cancelJob || intents.status === 'paused') {
          const reason = intents.cancelJob ? 'cancelled by signal before it started' : 'connection paused';
          intents.cancelJob = false;
          await acts.cancelJob({ jobId, reason, at: Date.now() });
          state.last_outcome = 'cancelled';
          state.current_job_id = null;
          if (intents.status === 'paused') continue cycle;
          break cycle;
        }
        if (intents.status === 'active') {
          await applyIntents();
          continue;
        }
        if (intents.schedule) {
          await applyIntents();
          const fresh = await acts.loadConnectionContext(connectionId, Date.now());
          if (!fresh || fresh.status !== 'active') continue cycle;
          const replanned = planFor(fresh);
          if (await acts.rescheduleQueuedJob({ jobId, connectionId, scheduledAt: replanned.scheduledAt, plan: toPlannedRun(replanned) })) {
            showPlan(state, replanned.scheduledAt, replanned);
          }
          continue;
        }
        if (intents.syncNow) {
          const mode = intents.syncNow;
          intents.syncNow = null;
          const now = Date.now();
          await acts.rescheduleQueuedJob({ jobId, connectionId, scheduledAt: now, jobType: mode, trigger: 'manual' });
          state.scheduled_at = iso(now);
          break;
        }
      }

      // Run the job as a visible, separately cancellable child workflow.
      setPhase('running');
      const scope = new CancellationScope();
      let result: SyncJobResult | undefined;
      let failure: unknown;
      const child = scope
        .run(() =>
          executeChild(syncJobWorkflow, {
            workflowId: syncJobWorkflowId(jobId),
            args: [{ jobId, connectionId }],
          }),
        )
        .then(
          (r) => (result = r),
          (err) => (failure = err),
        );
      await condition(() => result !== undefined || failure !== undefined || intents.cancelJob);
      if (result === undefined && failure === undefined) {
        intents.cancelJob = false;
        scope.cancel();
        await child;
      }
      state.last_outcome = result?.status ?? (isCancellation(failure) ? 'cancelled' : 'failed');
      if (failure && !isCancellation(failure)) log.warn('sync job workflow failed', { jobId, error: String(failure) });
      state.current_job_id = null;
      break;
    }
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // The connection workflow itself was cancelled (connection disabled): leave nothing queued.
    const jobId = state.current_job_id;
    if (jobId) {
      await CancellationScope.nonCancellable(() =>
        acts.cancelJob({ jobId, reason: 'connection workflow cancelled', at: Date.now() }),
      );
    }
    setPhase('stopped');
    throw err;
  }

  state.cycles += 1;
  await condition(allHandlersFinished);
  await continueAsNew<typeof connectionWorkflow>({
    connectionId,
    carried: {
      intents,
      lastOutcome: state.last_outcome,
      lastJitterSeconds: state.last_jitter_seconds,
      nextRunAt: state.next_run_at,
      cycles: state.cycles,
    },
  });
}

function planFor(ctx: ConnectionContext): Plan {
  const { schedule, warnings } = resolveSchedule(ctx.sync, ctx.settings);
  for (const warning of warnings) log.warn(warning, { connectionId: ctx.connectionId });
  return planNextRun({
    now: Date.now(),
    schedule,
    lastFinishedAt: ctx.lastFinishedAt ?? undefined,
    activationReference: activationReference(ctx),
    jitterPctMin: ctx.settings.jitterPctMin,
    jitterPctMax: ctx.settings.jitterPctMax,
    random: Math.random,
  });
}

/** `metadata.sync.first_activated_at` when it is a valid time, else the connection's created_at. */
function activationReference(ctx: ConnectionContext): number {
  const first = (ctx.sync as { first_activated_at?: unknown } | undefined)?.first_activated_at;
  const parsed = typeof first === 'string' ? Date.parse(first) : NaN;
  return Number.isNaN(parsed) ? ctx.createdAt : parsed;
}


function showPlan(state: ConnectionState, scheduledAt: number, plan: Plan | undefined) {
  state.scheduled_at = iso(scheduledAt);
  if (plan) {
    state.next_run_at = iso(plan.nextRunAt);
    state.last_jitter_seconds = plan.jitterSeconds;
  }
}

/** Validates an `updateSchedule` payload; an invalid one is logged and ignored. */
function acceptScheduleChange(change: { interval_seconds?: number; cron?: string } | undefined): ScheduleChange | null {
  if (change?.cron !== undefined) {
    const problem = cronProblem(change.cron);
    if (!problem) return { cron: change.cron.trim() };
    log.warn(`updateSchedule ignored: cron ${JSON.stringify(change.cron)} ${problem}`);
    return null;
  }
  if (change?.interval_seconds !== undefined) {
    // The upper bound is the worker's configuration; the planner re-checks it with a warning.
    const problem = intervalProblem(change.interval_seconds, {
      ...DEFAULT_SCHEDULE_SETTINGS,
      maxOverriddenIntervalSeconds: Number.POSITIVE_INFINITY,
    });
    if (!problem) return { interval_seconds: change.interval_seconds };
    log.warn(`updateSchedule ignored: interval_seconds ${JSON.stringify(change.interval_seconds)} ${problem}`);
    return null;
  }
  log.warn('updateSchedule ignored: give interval_seconds or cron');
  return null;
}

function pendingNames(intents: Intents): string[] {
  const names: string[] = [];
  if (intents.syncNow) names.push(`syncNow:${intents.syncNow}`);
  if (intents.status) names.push(intents.status === 'paused' ? 'pause' : 'resume');
  if (intents.schedule) names.push('updateSchedule');
  if (intents.cancelJob) names.push('cancelJob');
  return names;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
