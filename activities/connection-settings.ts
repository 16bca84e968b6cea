import { findConnection, setStatusUnlessDisabled, updateConnection } from '../db/models/connections';
import type { Queryable } from '../db/queryable';
import { withTransaction } from '../db/transaction';
import type { Logger } from '../lib/logger';
import { parseSchedule, scheduleFields, type ScheduleSettings } from '../policy/schedule';
import type { Activities } from '../temporal/activities';
import type { ScheduleChange } from '../temporal/connection';
import type { ActivityDeps } from './deps';

/**
 * Stores a legacy `updateSchedule` change: its interval or cron replaces the stored one, keeping
 * the stored `timezone` (with a cron) and `full_sync_every`, through the one parser (with this
 * worker's maximum) and the one writer. A change the parser refuses is logged and not stored.
 */
export async function storeLegacyScheduleChange(
  db: Queryable,
  connectionId: string,
  change: ScheduleChange,
  settings: ScheduleSettings,
  logger: Logger,
): Promise<void> {
  const current = await findConnection(db, connectionId);
  if (!current) return;
  const { interval_seconds: _interval, cron: _cron, timezone, ...kept } = current.schedule ? scheduleFields(current.schedule) : {};
  const raw = { ...kept, ...('cron' in change && timezone !== undefined && { timezone }), ...change };
  const { schedule, problems } = parseSchedule(raw, settings);
  if (!schedule || problems.length > 0) {
    logger.warn({ connection_id: connectionId, problems: problems.map((p) => `${p.key ?? 'schedule'}: ${p.message}`) }, 'updateSchedule not stored');
    return;
  }
  await updateConnection(db, connectionId, { schedule });
}

/** Persists a legacy `updateSchedule` change (see `storeLegacyScheduleChange`). */
export function saveSchedule({ pool, settings, logger }: ActivityDeps): Activities['saveSchedule'] {
  return async (input) => withTransaction(pool, (tx) => storeLegacyScheduleChange(tx, input.connectionId, input.change, settings, logger));
}

/**
 * Pauses or resumes a connection. A disabled connection stays disabled. Returns the status the
 * connection has afterwards, or null when it no longer exists.
 */
export function setConnectionStatus({ pool }: ActivityDeps): Activities['setConnectionStatus'] {
  return async (input) => setStatusUnlessDisabled(pool, input.connectionId, input.status);
}
