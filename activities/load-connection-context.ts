import { findSchedulingRow, type SchedulingRow } from '../db/models/connections';
import type { ScheduleSettings } from '../policy/schedule';
import type { Activities, ConnectionContext } from '../temporal/activities';
import type { ActivityDeps } from './deps';

/** Reads one connection's scheduling context; null when the connection no longer exists. */
export function loadConnectionContext({ pool, settings }: ActivityDeps): Activities['loadConnectionContext'] {
  return async (connectionId, at) => {
    const row = await findSchedulingRow(pool, connectionId, new Date(at), settings);
    return row && contextOf(row, settings);
  };
}

/** A connection's scheduling row as the workflow plans from it, with the worker's schedule bounds. */
export function contextOf(row: SchedulingRow, settings: ScheduleSettings): ConnectionContext {
  return {
    connectionId: row.id,
    tenantId: row.tenant_id,
    providerSlug: row.provider_slug,
    status: row.status,
    schedule: row.schedule.schedule,
    scheduleWarnings: row.schedule.warnings,
    firstActivatedAt: row.first_activated_at?.getTime() ?? null,
    createdAt: row.created_at.getTime(),
    lastFinishedAt: row.last_finished_at?.getTime() ?? null,
    pausedUntil: row.paused_until?.getTime() ?? null,
    settings,
    scheduleVersion: row.schedule_version,
    ...(row.runs_since_full !== null && {
      fullSync: { scheduledRunsSinceFull: row.runs_since_full, lastFullAt: row.last_full_at?.getTime() ?? null },
    }),
  };
}
