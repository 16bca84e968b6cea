// Signals only record intent; the connection workflow's loop acts on it. This module owns the
// handlers and the validation of `updateSchedule`; bookkeeping.ts writes intents to Postgres.
import { log, setHandler } from '@temporalio/workflow';
import { DEFAULT_SCHEDULE_SETTINGS, cronProblem, intervalProblem } from '../../policy/schedule';
import {
  cancelJobSignal,
  pauseSignal,
  resumeSignal,
  stateQuery,
  syncNowSignal,
  updateScheduleSignal,
  type ConnectionState,
  type Intents,
  type ScheduleChange,
  type ScheduleChangeRequest,
} from '../../temporal/connection';

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
  setHandler(updateScheduleSignal, (change) => {
    const accepted = acceptScheduleChange(change);
    if (accepted) intents.schedule = accepted;
  });
  setHandler(cancelJobSignal, () => {
    intents.cancelJob = true;
  });
  setHandler(stateQuery, () => ({ ...state, pending: pendingNames(intents) }));
}

/** Whether any signal is waiting to be acted on. */
export function anyIntent(intents: Intents): boolean {
  return intents.syncNow !== null || intents.status !== null || intents.schedule !== null || intents.cancelJob;
}

/** Validates an `updateSchedule` payload; an invalid one is logged and ignored. */
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
  if (intents.cancelJob) names.push('cancelJob');
  return names;
}
