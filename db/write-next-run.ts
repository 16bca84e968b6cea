import type { PoolClient } from 'pg';
import type { PlannedRun } from '../policy/schedule';

/**
 * Writes a plan's `next_run_at` and `last_jitter_seconds` into `connections.metadata.sync`,
 * keeping every other key. Called inside the transaction that inserts or moves the job.
 */
export async function writeNextRun(tx: PoolClient, connectionId: string, plan: PlannedRun): Promise<void> {
  await tx.query(
    `update connections
        set metadata = jsonb_set(metadata, '{sync}',
              coalesce(metadata -> 'sync', '{}'::jsonb)
              || jsonb_build_object('next_run_at', $2::text, 'last_jitter_seconds', $3::int))
      where id = $1`,
    [connectionId, new Date(plan.nextRunAt).toISOString(), plan.jitterSeconds],
  );
}
