// The scheduler of one connection: workflow `connection:<connection_id>`, one cycle per run
// (clean up → plan → enqueue → durable sleep → run the job → record), then continue-as-new, so
// history stays small forever and code changes apply at a cycle boundary. The job runs inside the
// run (its steps as in `sync-job:` workflows), so each run of the Web UI is one cycle and its job.
import {
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  executeChild,
  isCancellation,
  log,
  patched,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { toPlannedRun, type Plan } from '../../policy/schedule';
import type { ConnectionContext } from '../../temporal/activities';
import type { ConnectionWorkflow, ConnectionWorkflowInput, Intents } from '../../temporal/connection';
import { syncJobWorkflowId } from '../../temporal/ids';
import { SYNC_JOB_WORKFLOW, type SyncJobResult, type SyncJobWorkflow } from '../../temporal/sync-job';
import { runSyncJob } from '../sync-job/workflow';
import { LEAN_CYCLE_PATCH, bookkeeping, type Bookkeeping } from './bookkeeping';
import { anyIntent, anyIntentBut, initialIntents, listenForIntents } from './intents';
import { fullSyncScheduled, planFor } from './planning';
import { ConnectionView, iso } from './state';

const SKIP_RETRY_MS = 60_000;
const LOCKED_RETRY_MS = 5_000;
const PAUSED_RECHECK_MS = 60 * 60_000;

/**
 * Idle waits (paused, breaker open, blocked by a job it does not own, locked) one run makes before
 * it continues as new, so a connection that stays idle for days keeps a small history.
 */
const MAX_IDLE_WAITS = 25;
/** Marks the workflow versions that bound idle waits per run; older runs replay without it. */
const IDLE_LOOPS_PATCH = 'bounded-idle-loops';
/**
 * Marks the workflow versions that make a planned run a full sync when `full_sync_every` says so.
 * Runs recorded before it replay their planned runs as incremental.
 */
const FULL_SYNC_EVERY_PATCH = 'full-sync-every';
/**
 * Marks the workflow versions that meet a duration `full_sync_every` with the run nearest it (the
 * last full sync at least the duration old less half a base interval, `fullSyncToleranceMs`), so
 * jitter and a run's length no longer skip full syncs the duration falls on. Recorded only at a
 * run the two rules decide differently; runs recorded before it replay the exact rule there.
 */
const FULL_SYNC_NEAREST_RUN_PATCH = 'full-sync-every-nearest-run';

/**
 * Marks the workflow versions that cancel the queued job when a schedule change finds the
 * connection no longer active. Runs recorded before it replay leaving the job queued.
 */
const INACTIVE_REPLAN_PATCH = 'inactive-replan-cancels-job';

/**
 * Marks the workflow versions that run a scheduled job inside the connection's run instead of as a
 * `sync-job:<id>` child: the job's first step is then the run's own next workflow task, which does
 * not wait in the task queue behind other workflows' first tasks. Runs recorded before it replay
 * starting the child.
 */
const INLINE_JOB_PATCH = 'inline-scheduled-job';

/**
 * Marks the workflow versions whose runs take the lean-cycle, inline-scheduled-job and lean-job
 * shapes from this one marker, and do not show again the identity a continue-as-new carried over.
 * Every patched() that answers true records a marker and an upsert of `TemporalChangeVersion` (a
 * visibility write) in the run, and every cycle is a new run: one marker instead of three, and no
 * repeated identity, make a cycle's history five events shorter and save three visibility writes.
 * Runs recorded before it replay asking for the three patches where they did.
 */
const ONE_MARKER_PATCH = 'one-marker-cycle';

/**
 * Marks the workflow versions whose idle wait after a refused enqueue (an active job it does not
 * own, a lock, a status change) is not woken by the `syncNow` that was just refused: the request
 * stays pending and is tried again after the wait, instead of every wait ending at once and the
 * run looking again with no pause (hundreds of enqueues a second). A `syncNow` of another mode,
 * and status, schedule, replan and cancel intents, still wake it. Recorded only by a run whose
 * `syncNow` was refused; runs recorded before it replay waking on any intent.
 */
const REFUSED_SYNC_NOW_WAITS_PATCH = 'refused-sync-now-waits';

/**
 * Marks the workflow versions in which a schedule change leaves a queued `syncNow` job at its
 * time: the job was asked for now, not for a slot of the schedule, so only a planned job is
 * re-planned. Recorded only by a run that stored a schedule change while its syncNow job was
 * queued; runs recorded before it replay moving that job to the schedule's next slot.
 */
const MANUAL_JOB_KEEPS_ITS_TIME_PATCH = 'replan-keeps-sync-now-job';

/**
 * Marks the workflow versions in which re-planning a queued planned job also decides again whether
 * it is a full sync, by the stored `full_sync_every` (a schedule change may add or drop it).
 * Recorded only by a run whose re-planned job changes its mode; runs recorded before it replay
 * keeping the mode decided at the enqueue.
 */
const REPLAN_DECIDES_MODE_PATCH = 'replan-decides-full-sync';

/**
 * Marks the workflow versions in which a cancelled run (its connection was disabled) ends only when
 * the connection is still disabled: one enabled again before the cancellation was acted on (a
 * resume right after the disable, whose signal reached this closing run) goes on as a new run.
 * Runs recorded before it replay ending as cancelled.
 */
const REENABLED_GOES_ON_PATCH = 'cancelled-run-goes-on-when-reenabled';

/**
 * Marks the workflow versions in which a `syncNow` that arrived before the run's job began reading
 * the provider (while its claim waited for tenant capacity, or its breaker pause) is answered by
 * that job, when the job's mode covers the request (a full job answers either mode; an incremental
 * one answers an incremental request): that job's data is newer than the request, so the run does
 * not carry the request over into an immediate second sync. A request made after the job began
 * reading still gets a sync of its own after it. Recorded only by a run that had such a request
 * pending at that point; runs recorded before it replay carrying the request over.
 */
const JOB_START_ANSWERS_SYNC_NOW_PATCH = 'job-start-answers-sync-now';

/**
 * Marks the workflow versions in which a pause that arrives while the run's job has not yet begun
 * reading the provider (its claim waiting for tenant capacity, or its breaker pause) cancels that
 * job at once, as a pause cancels a queued job: a pause sent only as a signal (`temporal workflow
 * signal`) is stored by the next look, so the waiting claim would otherwise start the job on a
 * paused connection when capacity came back. A job already reading finishes, as before. Recorded
 * only by a run paused at that point; runs recorded before it replay letting the job go on.
 */
const PAUSE_CANCELS_WAITING_JOB_PATCH = 'pause-cancels-waiting-job';

/**
 * Marks the workflow versions in which a resume that comes while the run sleeps looks whether its
 * queued job is still queued, and when it is not (a pause cancelled it in the pause command's
 * transaction, and the pause's signal never came, or came with the resume and was overwritten by
 * it) looks at the connection again and plans the next run from the stored history, as after a
 * pause it heard; older runs slept on until the cancelled job's time. Recorded only by a run that
 * heard a resume while sleeping; runs recorded before it replay sleeping on.
 */
const RESUME_REPLANS_CANCELLED_JOB_PATCH = 'resume-replans-cancelled-job';

/**
 * Marks the workflow versions in which a schedule change that finds the run's queued job no longer
 * queued (a pause cancelled it, and neither the pause's nor the resume's signal came) looks at the
 * connection again and plans from the stored schedule; older runs slept on until the cancelled
 * job's time, the new schedule unused. Recorded only by a run whose re-planned job was gone.
 */
const REPLAN_WITHOUT_JOB_PATCH = 'replan-without-queued-job-plans-again';

/** One run's working set: the connection, its pending intents, what it shows, its bookkeeping. */
interface Run {
  connectionId: string;
  intents: Intents;
  view: ConnectionView;
  books: Bookkeeping;
  /** The run's jobs run inline (decided at its first enqueue); false: as `sync-job:` children. */
  inline?: boolean;
  /** The run recorded the one-marker-cycle patch: its job takes the lean shape without a marker. */
  oneMarker: boolean;
  /** The mode of the planned job the run has queued (a `syncNow` job's mode is the request's). */
  plannedMode?: 'full' | 'incremental';
}

/** The long-running scheduler workflow of one connection. */
export async function connectionWorkflow(input: ConnectionWorkflowInput): Promise<void> {
  // Decided before the run's first command: runs recorded before a patch replay the old shape.
  const oneMarker = patched(ONE_MARKER_PATCH);
  const run: Run = {
    connectionId: input.connectionId,
    intents: initialIntents(input.carried?.intents),
    view: new ConnectionView(input.connectionId, input.carried, oneMarker),
    books: bookkeeping(oneMarker || patched(LEAN_CYCLE_PATCH)),
    ...(oneMarker && { inline: true }),
    oneMarker,
  };
  listenForIntents(run.intents, run.view.state);

  let ended: Awaited<ReturnType<typeof runCycle>>;
  try {
    ended = await runCycle(run);
    if (ended === 'stopped') return;
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // The connection workflow itself was cancelled (connection disabled): leave nothing queued.
    const jobId = run.view.state.current_job_id;
    if (jobId) {
      await CancellationScope.nonCancellable(() =>
        run.books.cancelJob({ jobId, reason: 'connection workflow cancelled', at: Date.now() }),
      );
      run.view.jobCancelled();
    }
    // A cancellation stands for a disable: a connection active (or paused) again by now was
    // re-enabled, and its resume's signal came to this run, so no other run would be started.
    if (patched(REENABLED_GOES_ON_PATCH)) {
      const ctx = await CancellationScope.nonCancellable(() => run.books.openCycle(run.connectionId, run.intents, false));
      if (ctx && ctx.status !== 'disabled') {
        log.info('connection enabled again before its cancellation was acted on: the scheduler goes on', { connectionId: run.connectionId });
        return continueAsNew<ConnectionWorkflow>({ connectionId: run.connectionId, carried: run.view.carried(run.intents) });
      }
    }
    run.view.setPhase('stopped');
    throw err;
  }

  if (ended === 'done') run.view.state.cycles += 1;
  await condition(allHandlersFinished);
  await continueAsNew<ConnectionWorkflow>({ connectionId: run.connectionId, carried: run.view.carried(run.intents) });
}

/**
 * One cycle: waits while the connection is paused or its breaker is open, enqueues the next run
 * (planned, or at once for `syncNow`), sleeps until it is due and runs it. Returns `stopped`
 * when the connection is gone or disabled, `done` when the cycle ended (its job ran or was
 * cancelled), `idle` when it waited idle long enough that the run should continue as new.
 */
async function runCycle(run: Run): Promise<'stopped' | 'done' | 'idle'> {
  const { connectionId, intents, view, books } = run;
  let idleWaits = 0;
  let cleanup = true; // the run's first look cleans up after an earlier run
  for (;;) {
    if (idleWaits > 0 && (idleWaits >= MAX_IDLE_WAITS || workflowInfo().continueAsNewSuggested) && patched(IDLE_LOOPS_PATCH)) {
      return 'idle';
    }
    const ctx = await books.openCycle(connectionId, intents, cleanup);
    cleanup = false;
    delete intents.recheck; // answered by the look just taken (absent, it adds nothing to what a run carries)
    if (!ctx || ctx.status === 'disabled') {
      view.setPhase('stopped');
      log.info('connection gone or disabled: connection workflow completes', { connectionId });
      return 'stopped';
    }
    view.showIdentity(ctx.tenantId, ctx.providerSlug);
    if (ctx.status === 'paused') {
      view.setPhase('paused');
      // Woken by resume, or by a `recheck` (the reconcile tick's, when the row says active: a
      // resume whose signal was lost); also re-reads the status hourly in case it was changed
      // without either. A `replan` needs no look while paused: the next look reads the stored
      // schedule anyway.
      await condition(() => intents.status !== null || intents.schedule !== null || intents.recheck === true, PAUSED_RECHECK_MS);
      idleWaits += 1;
      continue;
    }
    if (ctx.pausedUntil !== null) {
      view.setPhase('backing_off');
      view.state.breaker = { paused_until: iso(ctx.pausedUntil) };
      await condition(() => intents.status !== null, ctx.pausedUntil - Date.now());
      idleWaits += 1;
      continue;
    }
    view.state.breaker = null;
    intents.cancelJob = false; // nothing to cancel yet

    const jobId = uuid4();
    const manual = intents.syncNow;
    const plan = manual ? undefined : planFor(ctx);
    const scheduledAt = plan?.scheduledAt ?? Date.now();
    // Only a connection with `full_sync_every` reaches patched(): others record no marker.
    const periodicFull = plan !== undefined && fullSyncPlanned(ctx, plan) && patched(FULL_SYNC_EVERY_PATCH);
    run.inline ??= patched(INLINE_JOB_PATCH);
    const enqueued = await books.enqueueJob({
      jobId,
      connectionId,
      jobType: manual ?? (periodicFull ? 'full' : 'incremental'),
      trigger: manual ? 'manual' : 'schedule',
      scheduledAt,
      at: Date.now(),
      plan: plan && toPlannedRun(plan),
      ...(plan && ctx.scheduleVersion !== undefined && { scheduleVersion: ctx.scheduleVersion }),
      runId: workflowInfo().runId,
      ...(run.inline && { workflowId: workflowInfo().workflowId }),
    });
    if (enqueued.outcome === 'missing') continue;
    if (enqueued.outcome !== 'enqueued') {
      // Locked by a concurrent enqueue, an active job we don't own, or a status change: look again soon.
      view.setPhase('sleeping');
      // The syncNow just refused stays pending and must not end this wait at once (a hot loop).
      const refused = manual && patched(REFUSED_SYNC_NOW_WAITS_PATCH) ? manual : null;
      await condition(() => anyIntentBut(intents, refused), enqueued.outcome === 'locked' ? LOCKED_RETRY_MS : SKIP_RETRY_MS);
      idleWaits += 1;
      continue;
    }
    if (manual) intents.syncNow = null;
    else run.plannedMode = periodicFull ? 'full' : 'incremental';
    view.showPlan(scheduledAt, plan);
    view.state.current_job_id = jobId;

    const due = await sleepUntilDue(run, jobId, plan !== undefined);
    if (due === 'restart') continue;
    if (due === 'cancelled') return 'done';
    await runJob(run, jobId);
    return 'done';
  }
}

/**
 * Sleeps durably until the queued job's `scheduled_at`, acting on signals as they come: a cancel
 * or pause cancels the queued job, a resume is stored (and, when the job is no longer queued, the
 * cycle looks again: a pause it never heard cancelled it), a `replan` (or a legacy schedule change,
 * stored first) re-plans a `planned` job from the schedule as stored (a `syncNow` job keeps its
 * time: it was asked for now), and `syncNow` brings it forward. `run` when it is due, `cancelled`
 * when it was cancelled, `restart` when the cycle must look at the connection again (paused, or no
 * longer active).
 */
async function sleepUntilDue(run: Run, jobId: string, planned: boolean): Promise<'run' | 'cancelled' | 'restart'> {
  const { connectionId, intents, view, books } = run;
  view.setPhase('sleeping');
  for (;;) {
    const remaining = Date.parse(view.state.scheduled_at!) - Date.now();
    const woke = remaining > 0 ? await condition(() => anyIntent(intents), remaining) : anyIntent(intents);
    if (!woke) return 'run';
    if (intents.cancelJob || intents.status === 'paused') {
      const reason = intents.cancelJob ? 'cancelled by signal before it started' : 'connection paused';
      intents.cancelJob = false;
      await books.cancelJob({ jobId, reason, at: Date.now() });
      view.jobCancelled();
      return intents.status === 'paused' ? 'restart' : 'cancelled';
    }
    if (intents.status === 'active') {
      await books.applyIntents(connectionId, intents);
      if (patched(RESUME_REPLANS_CANCELLED_JOB_PATCH) && !(await stillQueued(run, jobId))) {
        view.jobCancelled();
        return 'restart';
      }
      continue;
    }
    if (intents.schedule || intents.replan) {
      // Reads the stored schedule (and stores a legacy change first); clears both intents.
      const fresh = await books.openCycle(connectionId, intents, false);
      if (!fresh || fresh.status !== 'active') {
        // Paused (or disabled, or gone) before its signal came: the queued job must not outlive
        // this look, or it would block every enqueue after the resume.
        if (patched(INACTIVE_REPLAN_PATCH)) {
          await books.cancelJob({ jobId, reason: `connection ${fresh?.status ?? 'deleted'}`, at: Date.now() });
          view.jobCancelled();
        }
        return 'restart';
      }
      if (planned || !patched(MANUAL_JOB_KEEPS_ITS_TIME_PATCH)) {
        const moved = await replan(run, jobId, fresh, planned);
        if (!moved && patched(REPLAN_WITHOUT_JOB_PATCH)) {
          view.jobCancelled();
          return 'restart';
        }
      }
      continue;
    }
    if (intents.syncNow) {
      const mode = intents.syncNow;
      intents.syncNow = null;
      const now = Date.now();
      await books.rescheduleQueuedJob({ jobId, connectionId, scheduledAt: now, jobType: mode, trigger: 'manual' });
      view.state.scheduled_at = iso(now);
      return 'run';
    }
  }
}

/**
 * Whether the run's queued job is still queued: moving it to the time it already has changes
 * nothing and answers false when it is no longer queued (cancelled without this run's knowing).
 */
async function stillQueued(run: Run, jobId: string): Promise<boolean> {
  const at = Date.parse(run.view.state.scheduled_at!);
  return run.books.rescheduleQueuedJob({ jobId, connectionId: run.connectionId, scheduledAt: at });
}

/**
 * Whether `plan`'s run is a full sync under the stored `full_sync_every`: a duration is met by the
 * run nearest it (patch full-sync-every-nearest-run). The nearest-run rule makes full every run
 * the exact one does (its tolerance is never negative), so the patch is asked only where they differ.
 */
function fullSyncPlanned(ctx: ConnectionContext, plan: Plan): boolean {
  if (fullSyncScheduled(ctx, plan.scheduledAt)) return true;
  return fullSyncScheduled(ctx, plan.scheduledAt, plan.baseIntervalSeconds) && patched(FULL_SYNC_NEAREST_RUN_PATCH);
}

/**
 * Moves the queued job to the slot of the changed schedule, full or incremental as that schedule
 * makes it; false when the job is no longer queued.
 */
async function replan(run: Run, jobId: string, ctx: ConnectionContext, planned: boolean): Promise<boolean> {
  const replanned: Plan = planFor(ctx);
  // A planned job is a full sync exactly when the stored schedule makes its new time one.
  const mode = fullSyncPlanned(ctx, replanned) ? 'full' : 'incremental';
  const retype = planned && run.plannedMode !== undefined && mode !== run.plannedMode && patched(REPLAN_DECIDES_MODE_PATCH);
  const moved = await run.books.rescheduleQueuedJob({
    jobId,
    connectionId: run.connectionId,
    scheduledAt: replanned.scheduledAt,
    plan: toPlannedRun(replanned),
    ...(ctx.scheduleVersion !== undefined && { scheduleVersion: ctx.scheduleVersion }),
    ...(retype && { jobType: mode }),
  });
  if (moved) run.view.showPlan(replanned.scheduledAt, replanned);
  if (moved && retype) run.plannedMode = mode;
  return moved;
}

/**
 * Runs the job, inline (its steps in this run) or, in runs recorded before the inline patch, as a
 * child workflow; `cancelJob` cancels it. A cancelled connection workflow waits for the job's own
 * cleanup (its paging activity stopped, the job marked) before it ends.
 */
async function runJob(run: Run, jobId: string): Promise<void> {
  const { connectionId, intents, view } = run;
  view.setPhase('running');
  const scope = new CancellationScope();
  let result: SyncJobResult | undefined;
  let failure: unknown;
  let reading = false; // the inline job has begun reading the provider
  const job = scope
    .run(() =>
      run.inline
        ? runSyncJob({ jobId, connectionId }, run.oneMarker, (mode) => {
            reading = true;
            answerPendingSyncNow(intents, mode);
          })
        : executeChild<SyncJobWorkflow>(SYNC_JOB_WORKFLOW, {
            workflowId: syncJobWorkflowId(jobId),
            args: [{ jobId, connectionId }],
          }),
    )
    .then(
      (r) => (result = r),
      (err) => (failure = err),
    );
  const ended = () => result !== undefined || failure !== undefined;
  let pauseLetGo = false; // a pause before reading that this run, recorded before the patch, let go on
  const pausedBeforeReading = () => run.inline === true && !reading && !pauseLetGo && intents.status === 'paused';
  try {
    for (;;) {
      await condition(() => ended() || intents.cancelJob || pausedBeforeReading());
      if (ended() || intents.cancelJob || patched(PAUSE_CANCELS_WAITING_JOB_PATCH)) break;
      pauseLetGo = true;
    }
  } catch (err) {
    if (run.inline && isCancellation(err)) await job;
    throw err;
  }
  if (!ended()) {
    // Cancelled by signal, or paused before it read anything (the next look stores the pause).
    intents.cancelJob = false;
    scope.cancel();
    await job;
  }
  view.state.last_outcome = result?.status ?? (isCancellation(failure) ? 'cancelled' : 'failed');
  if (failure && !isCancellation(failure)) log.warn('sync job failed', { jobId, error: String(failure) });
  view.state.current_job_id = null;
}

/** Clears a pending `syncNow` that the job about to read the provider answers (see the patch). */
function answerPendingSyncNow(intents: Intents, mode: 'full' | 'incremental'): void {
  const pending = intents.syncNow;
  if (pending === null || (pending === 'full' && mode !== 'full')) return;
  if (patched(JOB_START_ANSWERS_SYNC_NOW_PATCH)) intents.syncNow = null;
}

connectionWorkflow satisfies ConnectionWorkflow;
