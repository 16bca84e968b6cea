// Signals only record intent; the connection workflow's loop acts on it. This module owns the
// handlers and the validation of the legacy `updateSchedule`; bookkeeping.ts writes intents to Postgres.
import { log, patched, setHandler } from '@temporalio/workflow';
import { DEFAULT_SCHEDULE_SETTINGS, cronProblem, intervalProblem } from '../../policy/schedule';
import {
  cancelJobSignal,
  pauseSignal,
  recheckSignal,
  replanSignal,
  resumeSignal,
  stateQuery,
  syncNowSignal,
  updateScheduleSignal,
  type ConnectionState,
  type Intents,
  type ScheduleChange,
  type ScheduleChangeRequest,
} from '../../temporal/connection';

/**
 * Marks the workflow versions that act on the payload-free `replan` signal. A run whose worker had
 * no handler for it left the signal unhandled; on replay it stays ignored (no marker), so the
 * history's commands stay the same.
 */
export const SCHEDULE_REPLAN_PATCH = 'schedule-replan';

/**
 * Marks the workflow versions that act on the `recheck` signal: a run waiting paused looks at the
 * stored connection at once instead of at its hourly re-check. A run whose worker had no handler
 * left the signal unhandled; on replay it stays ignored (no marker), so its commands stay the same.
 */
export const PAUSED_RECHECK_PATCH = 'paused-recheck';

/** The intents a run starts with: those carried over, or none. */
export function initialIntents(carried: Intents | undefined): Intents {
  return carried ?? { syncNow: null, status: null, schedule: null, cancelJob: false };
}

/** Installs the signal handlers (recording intents) and the `state` query. */
export function listenForIntents(intents: Intents, state: ConnectionState): void {
  setHandler(syncNowSignal, (arg) => {
    intents.syncNow = arg?.mode === 'full' ? 'full' : 'incremental';
  });
  setHandler(pauseSignal, () => {
    intents.status = 'paused';
  });
  setHandler(resumeSignal, () => {
    intents.status = 'active';
  });
  setHandler(replanSignal, () => {
    if (patched(SCHEDULE_REPLAN_PATCH)) intents.replan = true;
  });
  setHandler(updateScheduleSignal, (change) => {
    const accepted = acceptScheduleChange(change);
    if (accepted) intents.schedule = accepted;
  });
  setHandler(cancelJobSignal, () => {
    intents.cancelJob = true;
  });
  setHandler(recheckSignal, () => {
    if (patched(PAUSED_RECHECK_PATCH)) intents.recheck = true;
  });
  setHandler(stateQuery, () => ({ ...state, pending: pendingNames(intents) }));
}

/** Whether any signal is waiting to be acted on. */
export function anyIntent(intents: Intents): boolean {
  return intents.syncNow !== null || intents.status !== null || intents.schedule !== null || intents.replan === true || intents.cancelJob;
}

/**
 * Whether any signal is waiting to be acted on, leaving out a pending `syncNow` of mode `refused`
 * (one an enqueue just refused, which is tried again after the wait); null leaves out nothing.
 */
export function anyIntentBut(intents: Intents, refused: Intents['syncNow']): boolean {
  if (refused === null || intents.syncNow !== refused) return anyIntent(intents);
  return intents.status !== null || intents.schedule !== null || intents.replan === true || intents.cancelJob;
}

/**
 * Validates a legacy `updateSchedule` payload; an invalid one is logged and ignored. (Its storing
 * activity parses it again with the worker's maximum, through the one parser.)
 */
function acceptScheduleChange(change: ScheduleChangeRequest | undefined): ScheduleChange | null {
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
  if (intents.replan) names.push('replan');
  if (intents.cancelJob) names.push('cancelJob');
  if (intents.recheck) names.push('recheck');
  return names;
}
