import type { ActivityDeps } from './deps';

/** A schedule change: either an interval or a cron expression (the other is removed). */
export type ScheduleChange = { interval_seconds: number } | { cron: string };

/** Persists a schedule change in `metadata.sync`, replacing any previous interval or cron. */
export function saveSchedule({ pool }: ActivityDeps) {
  return async (input: { connectionId: string; change: ScheduleChange }): Promise<void> => {
    await pool.query(
      `update connections
          set metadata = jsonb_set(metadata, '{sync}',
                (coalesce(metadata -> 'sync', '{}'::jsonb) - 'interval_seconds' - 'cron') || $2::jsonb)
        where id = $1`,
      [input.connectionId, JSON.stringify(input.change)],
    );
  };
}
