// The glue between a connection's stored context and the pure planner: the schedule the row mapper
// read (its warnings logged here), and the activation reference of a first run.
import { log, patched } from '@temporalio/workflow';
import { fullSyncDue, fullSyncToleranceMs, parseFullSyncEvery, planNextRun, resolveSchedule, type Plan, type ResolvedSchedule } from '../../policy/schedule';
import type { ConnectionContext } from '../../temporal/activities';

/**
 * The schedule of a context: typed by the activity that read it; a context recorded by an older
 * worker carries the raw `metadata.sync` instead, read here by the same parser (replay only).
 */
function scheduleOf(ctx: ConnectionContext): ResolvedSchedule {
  if (ctx.schedule) return { schedule: ctx.schedule, warnings: ctx.scheduleWarnings ?? [] };
  return resolveSchedule(ctx.sync, ctx.settings);
}

/**
 * Marks the workflow versions in which a cron's lists and ranges of minutes and hours are fixed
 * times of day across DST changes, as a single minute and hour are (`30 2,14 * * *` runs its 02:30
 * once when the clock skips it, at 03:00, and once when it occurs twice); runs recorded before it
 * replay the plans that skipped such a time or ran it twice. Recorded only at a plan the two rules
 * make differently.
 */
export const CRON_FIXED_TIMES_PATCH = 'cron-lists-fixed-times';

/** Plans the connection's next run at workflow time, with the workflow's seeded random source. */
export function planFor(ctx: ConnectionContext): Plan {
  const { schedule, warnings } = scheduleOf(ctx);
  for (const warning of warnings) log.warn(warning, { connectionId: ctx.connectionId });
  // One draw, as a plan takes, whichever rule the plan is made by.
  const draw = Math.random();
  const input = {
    now: Date.now(),
    schedule,
    lastFinishedAt: ctx.lastFinishedAt ?? undefined,
    activationReference: activationReference(ctx),
    jitterPctMin: ctx.settings.jitterPctMin,
    jitterPctMax: ctx.settings.jitterPctMax,
    random: () => draw,
  };
  const plan = planNextRun(input);
  if (schedule.kind !== 'cron') return plan;
  const before = planNextRun({ ...input, cronFixedTimes: 'single-value' });
  if (JSON.stringify(before) === JSON.stringify(plan)) return plan;
  return patched(CRON_FIXED_TIMES_PATCH) ? plan : before;
}

/** `metadata.sync.first_activated_at` when it is a valid time, else the connection's created_at. */
function activationReference(ctx: ConnectionContext): number {
  if (ctx.schedule) return ctx.firstActivatedAt ?? ctx.createdAt;
  const first = (ctx.sync as { first_activated_at?: unknown } | undefined)?.first_activated_at;
  const parsed = typeof first === 'string' ? Date.parse(first) : NaN;
  return Number.isNaN(parsed) ? ctx.createdAt : parsed;
}

/**
 * Whether the planned run at `runAt` is due to be a full sync (with deletion detection) under the
 * schedule's `full_sync_every` (an invalid stored value was left out, with a warning, by the parser);
 * with `baseIntervalSeconds`, a duration is met by the run nearest it (`fullSyncToleranceMs`).
 */
export function fullSyncScheduled(ctx: ConnectionContext, runAt: number, baseIntervalSeconds?: number): boolean {
  const value = scheduleOf(ctx).schedule.fullSyncEvery;
  if (value === undefined || !ctx.fullSync) return false;
  const parsed = parseFullSyncEvery(value);
  const tolerance = baseIntervalSeconds === undefined ? 0 : fullSyncToleranceMs(baseIntervalSeconds);
  return 'every' in parsed && fullSyncDue(parsed.every, ctx.fullSync, runAt, ctx.createdAt, tolerance);
}
