import { saveScheduleChange, setStatusUnlessDisabled } from '../db/models/connections';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';

/** Persists a schedule change in `metadata.sync`, replacing any previous interval or cron. */
export function saveSchedule({ pool }: ActivityDeps): Activities['saveSchedule'] {
  return async (input) => saveScheduleChange(pool, input.connectionId, input.change);
}

/**
 * Pauses or resumes a connection. A disabled connection stays disabled. Returns the status the
 * connection has afterwards, or null when it no longer exists.
 */
export function setConnectionStatus({ pool }: ActivityDeps): Activities['setConnectionStatus'] {
  return async (input) => setStatusUnlessDisabled(pool, input.connectionId, input.status);
}
