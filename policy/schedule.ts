// Schedule planning for one connection. Pure and deterministic: no I/O, the
// clock and the random source are arguments, so workflows can call it with their replay-safe
// Date.now() and Math.random().
import { Cron } from 'croner';

/** Settings that bound every connection's schedule (from configuration). */
export interface ScheduleSettings {
  defaultIntervalSeconds: number;
  maxOverriddenIntervalSeconds: number;
  jitterPctMin: number;
  jitterPctMax: number;
}

/** Default schedule bounds: 900 s interval, overrides up to 86,400 s, 0–20 % jitter. */
export const DEFAULT_SCHEDULE_SETTINGS: ScheduleSettings = {
  defaultIntervalSeconds: 900,
  maxOverriddenIntervalSeconds: 86400,
  jitterPctMin: 0,
  jitterPctMax: 0.2,
};

/** Smallest interval a connection may set. */
export const MIN_INTERVAL_SECONDS = 60;

/**
 * A connection's schedule, the one typed owner of it: a fixed interval or a 5-field cron expression
 * evaluated in `timezone` (an IANA name; UTC when absent), and how often a scheduled run is a full
 * sync (`fullSyncEvery`, as given: a number of runs or a duration such as "7d"). `parseSchedule`
 * makes one from the API's, the command's or the stored spelling; `scheduleFields` spells it back.
 */
export type Schedule = ({ kind: 'interval'; intervalSeconds: number } | { kind: 'cron'; cron: string; timezone?: string }) & {
  fullSyncEvery?: number | string;
};

/** A schedule as the API and `metadata.sync` spell it. */
export interface ScheduleFields {
  interval_seconds?: number;
  cron?: string;
  timezone?: string;
  full_sync_every?: number | string;
}

/** The keys of `metadata.sync` a schedule owns (the rest is the planner's bookkeeping). */
export const SCHEDULE_KEYS = ['interval_seconds', 'cron', 'timezone', 'full_sync_every'] as const;

/** One thing wrong with a schedule, under the key it concerns (none: the whole schedule). */
export interface ScheduleProblem {
  key?: (typeof SCHEDULE_KEYS)[number];
  message: string;
  /** The value given at `key`. */
  given?: unknown;
  /**
   * `value`: the value itself is invalid (it is left out of the schedule); `combination`: valid
   * values that do not go together (both or neither of interval and cron, a time zone without cron).
   */
  kind: 'value' | 'combination';
}

/** `parseSchedule`'s answer: what the valid values make, and every problem. */
export interface ParsedSchedule {
  /** A valid cron wins over a valid interval; null when neither is given and valid. */
  schedule: Schedule | null;
  problems: ScheduleProblem[];
}

const given = (value: unknown) => value !== undefined && value !== null;

/**
 * The one schedule parser, used by the API's zod schema, the commands and the stored row's reader.
 * A schedule is exactly one of `interval_seconds` (60 ≤ n ≤ `maxOverriddenIntervalSeconds`) and
 * `cron`, an optional `timezone` (only with cron) and an optional `full_sync_every`. A request
 * with any problem is refused; a stored value is read leniently (`resolveSchedule`).
 */
export function parseSchedule(raw: unknown, limits: Pick<ScheduleSettings, 'maxOverriddenIntervalSeconds'>): ParsedSchedule {
  if (!given(raw)) return { schedule: null, problems: [] };
  if (typeof raw !== 'object' || Array.isArray(raw)) return { schedule: null, problems: [{ message: 'must be an object', kind: 'value' }] };
  const { interval_seconds: interval, cron, timezone, full_sync_every: every } = raw as Record<string, unknown>;
  const problems: ScheduleProblem[] = [];
  const value = (key: ScheduleProblem['key'], problem: string | undefined, v: unknown) => {
    if (problem !== undefined) problems.push({ key, message: problem, given: v, kind: 'value' });
    return problem === undefined;
  };
  const cronOk = given(cron) && value('cron', cronProblem(cron), cron);
  const intervalOk = given(interval) && value('interval_seconds', intervalProblem(interval, limits), interval);
  const zoneOk = given(timezone) && value('timezone', timezoneProblem(timezone), timezone);
  const everyParsed = given(every) ? parseFullSyncEvery(every) : undefined;
  const everyOk = everyParsed !== undefined && value('full_sync_every', 'problem' in everyParsed ? everyParsed.problem : undefined, every);
  if (given(cron) === given(interval)) problems.push({ message: 'give exactly one of interval_seconds or cron', kind: 'combination' });
  if (given(timezone) && !given(cron)) problems.push({ key: 'timezone', message: 'only applies to a cron schedule', given: timezone, kind: 'combination' });

  const extra = everyOk ? { fullSyncEvery: every as number | string } : {};
  let schedule: Schedule | null = null;
  if (cronOk) schedule = { kind: 'cron', cron: (cron as string).trim(), ...(zoneOk && { timezone: timezone as string }), ...extra };
  else if (intervalOk) schedule = { kind: 'interval', intervalSeconds: interval as number, ...extra };
  return { schedule, problems };
}

/** A schedule in the spelling of the API and `metadata.sync`. */
export function scheduleFields(schedule: Schedule): ScheduleFields {
  const timing: ScheduleFields =
    schedule.kind === 'cron'
      ? { cron: schedule.cron, ...(schedule.timezone !== undefined && { timezone: schedule.timezone }) }
      : { interval_seconds: schedule.intervalSeconds };
  return { ...timing, ...(schedule.fullSyncEvery !== undefined && { full_sync_every: schedule.fullSyncEvery }) };
}

/** `resolveSchedule`'s answer: the schedule to use and why any stored value was ignored. */
export interface ResolvedSchedule {
  schedule: Schedule;
  /** One message per ignored value, naming the validation failure. */
  warnings: string[];
}

/**
 * Reads a stored `metadata.sync` with `parseSchedule` and returns the schedule to use. `cron` wins
 * over `interval_seconds` when both are valid. An out-of-range or malformed value (metadata can be
 * edited by hand) is ignored with a warning that names the failure: the default interval is used,
 * UTC for a bad time zone, incremental runs for a bad `full_sync_every`.
 */
export function resolveSchedule(sync: unknown, settings: ScheduleSettings): ResolvedSchedule {
  const { schedule, problems } = parseSchedule(sync, settings);
  const warnings: string[] = [];
  for (const p of problems) {
    if (p.kind !== 'value') continue;
    const what = `metadata.sync.${p.key} ${JSON.stringify(p.given)} ignored: ${p.message}`;
    if (p.key === undefined) warnings.push('metadata.sync must be an object; using the default interval');
    else if (p.key === 'cron' || p.key === 'full_sync_every') warnings.push(what);
    else if (p.key === 'interval_seconds' && schedule?.kind !== 'cron') warnings.push(`${what}; using the default ${settings.defaultIntervalSeconds} s`);
    else if (p.key === 'timezone' && schedule?.kind === 'cron') warnings.push(`${what}; using UTC`);
  }
  if (schedule) return { schedule, warnings };
  // No valid interval or cron: the default interval, still with a valid full_sync_every.
  const every = !problems.some((p) => p.kind === 'value' && (p.key === 'full_sync_every' || p.key === undefined))
    ? (sync as { full_sync_every?: unknown } | null | undefined)?.full_sync_every
    : undefined;
  const fallback: Schedule = {
    kind: 'interval',
    intervalSeconds: settings.defaultIntervalSeconds,
    ...(given(every) && { fullSyncEvery: every as number | string }),
  };
  return { schedule: fallback, warnings };
}

/** Why an interval override is invalid, or undefined when it is valid. */
export function intervalProblem(value: unknown, settings: Pick<ScheduleSettings, 'maxOverriddenIntervalSeconds'>): string | undefined {
  if (typeof value !== 'number' || !Number.isInteger(value)) return 'must be an integer number of seconds';
  if (value < MIN_INTERVAL_SECONDS) return `must be at least ${MIN_INTERVAL_SECONDS}`;
  if (value > settings.maxOverriddenIntervalSeconds) {
    return `exceeds MAX_OVERRIDDEN_INTERVAL_SECONDS (${settings.maxOverriddenIntervalSeconds})`;
  }
  return undefined;
}

/**
 * Why `value` is not a time zone a cron schedule can use, or undefined: an IANA name such as
 * `Europe/Berlin` (or `UTC`), as the runtime's time-zone database knows it.
 */
export function timezoneProblem(value: unknown): string | undefined {
  const message = 'must be an IANA time zone name such as Europe/Berlin';
  if (typeof value !== 'string' || value.trim() === '' || value !== value.trim()) return message;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
  } catch {
    return `${message} (unknown zone ${JSON.stringify(value)})`;
  }
  return undefined;
}

/** The fields of a 5-field cron expression, in order, with the numbers each allows (weekday 7 is Sunday). */
const CRON_FIELDS = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12 },
  { name: 'day of week', min: 0, max: 7 },
] as const;

/**
 * A value's modifier, which qualifies a number without being part of it: the nearest weekday
 * (`15W`) in day of month, the nth (`5#2`) and the last (`5L`) weekday in day of week.
 */
const CRON_MODIFIER = /(?:[wW]|#\d*|[lL])$/;

/**
 * The first number of a cron field (a value or a range bound, with or without its modifier; not a
 * step) outside its field's range, named as given. Checked before croner, whose own message names
 * the value counted from 0 for day of month and month (32 reads "Invalid value for day: 31", a
 * valid day; 32W "Invalid value for nearestWeekdays: 31").
 */
function cronRangeProblem(fields: string[]): string | undefined {
  for (const [i, field] of fields.entries()) {
    const { name, min, max } = CRON_FIELDS[i]!;
    for (const part of field.split(',')) {
      for (const value of part.split('/')[0]!.split('-')) {
        const bound = value.replace(CRON_MODIFIER, '');
        if (!/^\d+$/.test(bound)) continue;
        const n = Number(bound);
        // The text itself: a number past a double's exact integers would be named rounded (or Infinity).
        if (n < min || n > max) return `${name} ${bound} is out of range ${min}–${max}`;
      }
    }
  }
  return undefined;
}

/** Why a cron expression is invalid (we accept standard 5-field expressions), or undefined. */
export function cronProblem(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.trim() === '') return 'must be a 5-field cron expression';
  const fields = value.trim().split(/\s+/);
  if (fields.length !== 5) return 'must have exactly 5 fields (minute hour day month weekday)';
  const outOfRange = cronRangeProblem(fields);
  if (outOfRange) return outOfRange;
  try {
    if (cronOf(value).nextRun(new Date(0)) === null) return 'never fires';
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

/**
 * Which cron expressions are fixed times of day across DST changes (croner's `fixedTimeRule`):
 * `no-wildcard`, every one without a wildcard or step in minute and hour (single values, lists and
 * ranges: `30 2 * * *`, `30 2,14 * * *`, `30 1-3 * * *`); `single-value`, only those with one
 * minute and one hour (runs recorded before patch `cron-lists-fixed-times`).
 */
export type CronFixedTimes = 'no-wildcard' | 'single-value';

/**
 * A cron evaluated in `timezone`. A fixed time (see CronFixedTimes) the clock skips (spring
 * forward) runs once, when the clock has jumped (03:00; times of the skipped hour meet there and
 * run once), and a time that occurs twice (fall back) runs once, at its first occurrence.
 * Expressions with a wildcard or step in minute or hour are interval jobs: they skip the missing
 * hour and run in both passes of a repeated one, as their wall clock says.
 */
function cronOf(expression: string, timezone = 'UTC', fixedTimes: CronFixedTimes = 'no-wildcard'): Cron {
  // No callback: croner only computes dates and never starts a timer. A day of month and a day of
  // week both restricted match a day either one matches (cron's OR), said here rather than left
  // to croner's default: recorded plans replay only while every worker reads them alike.
  return new Cron(expression.trim(), { mode: '5-part', timezone, fixedTimeRule: fixedTimes, domAndDow: false });
}

/** Bootstrap: never ran; normal: next due time still ahead; catch_up: due time already passed. */
export type PlanMode = 'bootstrap' | 'normal' | 'catch_up';

/** What planning needs to know about one connection (all times in epoch milliseconds). */
export interface PlanInput {
  now: number;
  schedule: Schedule;
  /** The schedule's last run: finish time of its latest finished (or cancelled) job, if any. */
  lastFinishedAt?: number;
  /** `metadata.sync.first_activated_at`, else the connection's `created_at`. */
  activationReference: number;
  jitterPctMin: number;
  jitterPctMax: number;
  /** Uniform source in [0, 1): the workflow's seeded Math.random(). */
  random: () => number;
  /** Which cron expressions are fixed times of day across DST changes; `no-wildcard` when absent. */
  cronFixedTimes?: CronFixedTimes;
}

/** The next run of one connection. */
export interface Plan {
  mode: PlanMode;
  /** When the job should run: a due time plus jitter (at once for bootstrap and catch-up). */
  scheduledAt: number;
  /** The due time the jitter was added to (the unjittered slot). */
  nextDueAt: number;
  /** The subsequent run time, persisted as `metadata.sync.next_run_at`. */
  nextRunAt: number;
  jitterSeconds: number;
  /** The interval, or for cron the gap between the fires the jitter is a percentage of. */
  baseIntervalSeconds: number;
  jitterBounds: { minSeconds: number; maxSeconds: number };
}

/**
 * Plans the next run (B = base interval, L = lastFinishedAt, or now when that is later):
 * - bootstrap (no L): run now; next_run_at = activation + B + jitter;
 * - normal (L + B > now): next_due = L + B; scheduled = next_due + jitter; next_run_at = next_due + B;
 * - catch-up (L + B ≤ now): next_due = L + k·B, the first such value > now; exactly one job at
 *   scheduled = (next_due − B) + jitter; next_run_at = next_due.
 * Cron schedules use "next fire after t" in place of t + B, with jitter bounded by the gap
 * between the fire and the one after it.
 */
export function planNextRun(input: PlanInput): Plan {
  // A last run later than now is a clock ahead of the planner's (a pause over the API cancels the
  // queued job, its slot's run, at the API host's time): it counts as a run now, so the next run is
  // one interval (the next fire) after now, never a whole clock difference later.
  const last = input.lastFinishedAt === undefined ? undefined : Math.min(input.lastFinishedAt, input.now);
  const planned = { ...input, lastFinishedAt: last };
  return planned.schedule.kind === 'interval'
    ? planInterval(planned, planned.schedule.intervalSeconds)
    : planCron(planned, cronOf(planned.schedule.cron, planned.schedule.timezone, input.cronFixedTimes));
}

/** The part of a plan that is persisted and logged with the job it scheduled. */
export type PlannedRun = Omit<Plan, 'scheduledAt'>;

/** Drops `scheduledAt` (stored on the job row itself) from a plan. */
export function toPlannedRun({ scheduledAt: _scheduledAt, ...rest }: Plan): PlannedRun {
  return rest;
}

/**
 * Inclusive integer jitter bounds in seconds for a base of `baseSeconds`. When no whole second
 * lies between pctMin·B and pctMax·B (a very narrow range), both bounds are the nearest second,
 * but never a whole base: with pctMax < 1 a jitter stays under B, so a run never lands on the
 * next one's slot.
 */
export function jitterBounds(baseSeconds: number, pctMin: number, pctMax: number) {
  const minSeconds = Math.ceil(pctMin * baseSeconds);
  const maxSeconds = Math.floor(pctMax * baseSeconds);
  if (minSeconds <= maxSeconds) return { minSeconds, maxSeconds };
  const nearest = Math.min(Math.round(((pctMin + pctMax) / 2) * baseSeconds), Math.max(0, Math.ceil(baseSeconds) - 1));
  return { minSeconds: nearest, maxSeconds: nearest };
}

/** Samples an integer number of seconds uniformly from inclusive bounds. */
export function sampleJitter(bounds: { minSeconds: number; maxSeconds: number }, random: () => number): number {
  const span = Math.max(0, bounds.maxSeconds - bounds.minSeconds);
  return bounds.minSeconds + Math.min(span, Math.floor(random() * (span + 1)));
}

const SECOND = 1000;

function planInterval(input: PlanInput, intervalSeconds: number): Plan {
  const b = intervalSeconds * SECOND;
  const bounds = jitterBounds(intervalSeconds, input.jitterPctMin, input.jitterPctMax);
  const jitterSeconds = sampleJitter(bounds, input.random);
  const jitter = jitterSeconds * SECOND;
  const common = { jitterSeconds, baseIntervalSeconds: intervalSeconds, jitterBounds: bounds };
  const { now, lastFinishedAt: last } = input;

  if (last === undefined) {
    const nextDueAt = input.activationReference + b;
    return { mode: 'bootstrap', scheduledAt: now, nextDueAt, nextRunAt: nextDueAt + jitter, ...common };
  }
  if (last + b > now) {
    const nextDueAt = last + b;
    return { mode: 'normal', scheduledAt: nextDueAt + jitter, nextDueAt, nextRunAt: nextDueAt + b, ...common };
  }
  const k = Math.floor((now - last) / b) + 1;
  const nextDueAt = last + k * b;
  return { mode: 'catch_up', scheduledAt: nextDueAt - b + jitter, nextDueAt, nextRunAt: nextDueAt, ...common };
}

function planCron(input: PlanInput, cron: Cron): Plan {
  const next = (t: number): number => {
    const d = cron.nextRun(new Date(t));
    if (!d) throw new RangeError('cron schedule never fires again');
    return d.getTime();
  };
  const sampleAround = (fire: number) => {
    const gapSeconds = Math.round((next(fire) - fire) / SECOND);
    const bounds = jitterBounds(gapSeconds, input.jitterPctMin, input.jitterPctMax);
    return { jitterSeconds: sampleJitter(bounds, input.random), baseIntervalSeconds: gapSeconds, jitterBounds: bounds };
  };
  const { now, lastFinishedAt: last } = input;

  if (last === undefined) {
    const nextDueAt = next(input.activationReference);
    const j = sampleAround(nextDueAt);
    return { mode: 'bootstrap', scheduledAt: now, nextDueAt, nextRunAt: nextDueAt + j.jitterSeconds * SECOND, ...j };
  }
  const firstFire = next(last);
  if (firstFire > now) {
    const j = sampleAround(firstFire);
    return {
      mode: 'normal',
      scheduledAt: firstFire + j.jitterSeconds * SECOND,
      nextDueAt: firstFire,
      nextRunAt: next(firstFire),
      ...j,
    };
  }
  // Catch-up: the latest missed fire (≤ now) runs once, at once; the schedule resumes after now.
  const nextDueAt = next(now);
  const missed = cron.previousRuns(1, new Date(nextDueAt))[0]?.getTime() ?? firstFire;
  const j = sampleAround(missed);
  return { mode: 'catch_up', scheduledAt: missed + j.jitterSeconds * SECOND, nextDueAt, nextRunAt: nextDueAt, ...j };
}

// ---------------------------------------------------------------------------------------------
// Periodic full syncs

/**
 * `metadata.sync.full_sync_every`: every Nth scheduled run is a full sync (`runs`), or a scheduled
 * run is a full sync once the last completed full sync is at least `seconds` old.
 */
export type FullSyncEvery = { runs: number } | { seconds: number };

const DURATION_UNITS: Record<string, number> = { m: 60, h: 3600, d: 86400, w: 604800 };

/**
 * Reads a `full_sync_every`: a whole number of runs (≥ 1), or a duration such as `"12h"`, `"7d"`,
 * `"2w"` (units m, h, d, w; at least one hour). Answers the value or the problem, in words.
 */
export function parseFullSyncEvery(value: unknown): { every: FullSyncEvery } | { problem: string } {
  if (typeof value === 'number') {
    if (Number.isInteger(value) && value >= 1) return { every: { runs: value } };
    return { problem: 'must be a whole number of runs (at least 1) or a duration such as "7d"' };
  }
  if (typeof value === 'string') {
    const match = /^(\d+)\s*([mhdw])$/.exec(value.trim());
    if (match) {
      const seconds = Number(match[1]) * DURATION_UNITS[match[2]!]!;
      if (seconds >= 3600) return { every: { seconds } };
      return { problem: 'must be at least one hour ("60m", "1h")' };
    }
  }
  return { problem: 'must be a whole number of runs (at least 1) or a duration such as "12h", "7d" or "2w" (units m, h, d, w)' };
}

/** What deciding on a periodic full sync needs to know about earlier jobs. */
export interface FullSyncHistory {
  /** Scheduled runs completed since the last completed full sync (all of them when there was none). */
  scheduledRunsSinceFull: number;
  /** When the last full sync (of any trigger) completed, epoch milliseconds; null: never. */
  lastFullAt: number | null;
}

/**
 * Whether the scheduled run at `runAt` is a full sync under `every`: with `{ runs: n }` when n − 1
 * scheduled runs completed since the last full one (every nth run), with `{ seconds }` when the last
 * full sync (or, before any, the connection's `createdAt`) is at least that old at `runAt`, less
 * `toleranceMs`.
 */
export function fullSyncDue(every: FullSyncEvery, history: FullSyncHistory, runAt: number, createdAt: number, toleranceMs = 0): boolean {
  if ('runs' in every) return history.scheduledRunsSinceFull >= every.runs - 1;
  return runAt - (history.lastFullAt ?? createdAt) >= every.seconds * 1000 - toleranceMs;
}

/**
 * How much younger than a duration `full_sync_every` the last full sync may be at a planned run
 * that is still full: half the schedule's base interval (for cron, the gap between the run's fire
 * and the next). Run times carry jitter (up to a fifth of that gap by default) and the last full
 * sync's age counts from its finish, so the run that falls on the duration often finds it a little
 * younger: measured exactly, a weekly cron with "7d" would skip about every other weekly full sync,
 * an hourly one with "1d" would make every 24th or 25th run full, moving round the clock. With
 * half a base interval's tolerance the run nearest the duration is full, and no earlier one.
 */
export function fullSyncToleranceMs(baseIntervalSeconds: number): number {
  return (baseIntervalSeconds * 1000) / 2;
}

/** The widest gap between two starts of a cold start's spread: a few missing workflows start within a second. */
export const COLD_START_MAX_GAP_MS = 200;

/**
 * The start delay, in milliseconds, of the k-th (from 0) of `count` connection workflows one
 * reconcile tick starts. A tick that finds many missing (a cold start: a new Temporal namespace, a
 * restore, connections inserted in bulk) would otherwise start them together, and each starts with
 * a sync at once (a bootstrap or a catch-up): every first sync would run in one burst, and the
 * later cycles would come due in bursts as narrow. So they start evenly over one tick (`tickMs`),
 * as a fleet at steady state comes due, but never more than COLD_START_MAX_GAP_MS apart: one
 * missing workflow starts at once, five within a second, 300 over 60 s, 2,000 over 60 s, and the
 * last of any number within one tick, before the next tick looks.
 */
export function coldStartDelayMs(k: number, count: number, tickMs: number): number {
  const tick = Math.max(0, tickMs);
  // The smaller gap of the two, in integers (no rounding error below a whole millisecond).
  return count * COLD_START_MAX_GAP_MS > tick ? Math.floor((k * tick) / Math.max(1, count)) : k * COLD_START_MAX_GAP_MS;
}
