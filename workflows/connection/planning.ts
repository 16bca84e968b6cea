// The glue between a connection's stored context and the pure planner: which schedule applies
// (with warnings for ignored values), and the activation reference of a first run.
import { log } from '@temporalio/workflow';
import { fullSyncDue, parseFullSyncEvery, planNextRun, resolveSchedule, type Plan } from '../../policy/schedule';
import type { ConnectionContext } from '../../temporal/activities';

/** Plans the connection's next run at workflow time, with the workflow's seeded random source. */
export function planFor(ctx: ConnectionContext): Plan {
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

/**
 * Whether the planned run at `runAt` is due to be a full sync (with deletion detection) under
 * `metadata.sync.full_sync_every`; an invalid value is ignored with a warning.
 */
export function fullSyncScheduled(ctx: ConnectionContext, runAt: number): boolean {
  const value = (ctx.sync as { full_sync_every?: unknown } | undefined)?.full_sync_every;
  if (value === undefined || value === null || !ctx.fullSync) return false;
  const parsed = parseFullSyncEvery(value);
  if ('problem' in parsed) {
    log.warn(`metadata.sync.full_sync_every ${JSON.stringify(value)} ignored: ${parsed.problem}`, { connectionId: ctx.connectionId });
    return false;
  }
  return fullSyncDue(parsed.every, ctx.fullSync, runAt, ctx.createdAt);
}
