// Runs the sync activity directly (no Temporal server: MockActivityEnvironment) for connections of
// the `http` connector, against real Postgres: one job and one task per pass, as the job workflow
// would create them. Fast enough for property tests with many passes.
import { MockActivityEnvironment } from '@temporalio/testing';
import { syncTask } from '../../activities/sync-task';
import type { ActivityDeps } from '../../activities/deps';
import type { Pool } from '../../db/pool';
import type { SyncTaskInput, SyncTaskResult } from '../../temporal/activities';

export type PassKind = 'full' | 'incremental' | 'backfill';

/** Inserts an active `http` connection with `config` (no credentials) and returns its id. */
export async function createHttpConnection(pool: Pool, config: Record<string, unknown>, appKey: string): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'http', $1, $2) returning id`,
    [appKey, config],
  );
  return rows[0]!.id;
}

/**
 * One pass of `resourceType` for the connection: a running job of `kind` (a backfill is an
 * incremental job with window [windowStart, windowEnd)), its task, and the sync activity run on it
 * to the end. Returns the task's id and result.
 */
export async function runPass(
  deps: ActivityDeps,
  connectionId: string,
  resourceType: string,
  kind: PassKind,
  window?: { start: Date; end: Date | null },
  passStart?: Date,
): Promise<{ taskId: string; result: SyncTaskResult }> {
  const { rows } = await deps.pool.query<{ id: string }>(
    `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at, window_start, window_end)
     select $1, tenant_id, $2, $3, 'running', now(), $4, $5 from connections where id = $1 returning id`,
    [connectionId, kind === 'full' ? 'full' : 'incremental', kind === 'backfill' ? 'backfill' : 'manual', window?.start ?? null, window?.end ?? null],
  );
  const jobId = rows[0]!.id;
  // `passStart`: the task's start on a test's own timeline (the provider's clock), which the pass
  // keeps as its start (cursor cap, deletion bound); else the database's now at its claim.
  const task = await deps.pool.query<{ id: string }>(
    `insert into sync_tasks (job_id, resource_type, started_at) values ($1, $2, $3) returning id`,
    [jobId, resourceType, passStart ?? null],
  );
  const taskId = task.rows[0]!.id;
  const env = new MockActivityEnvironment({ attempt: 1 });
  try {
    const input: SyncTaskInput = { jobId, taskId, resourceType, mode: kind === 'full' ? 'full' : 'incremental' };
    const result = (await env.run(syncTask(deps), input)) as SyncTaskResult;
    return { taskId, result };
  } finally {
    // Ended whatever happened: a connection has one active job of a type at a time.
    await deps.pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [jobId]);
  }
}

export interface StoredRecord {
  external_id: string;
  data: Record<string, unknown>;
  deleted_at: Date | null;
}

/** The connection's stored records of `resourceType`, live and tombstoned, by external id. */
export async function storedRecords(pool: Pool, connectionId: string, resourceType: string): Promise<Map<string, StoredRecord>> {
  const { rows } = await pool.query<StoredRecord>(
    'select external_id, data, deleted_at from records where connection_id = $1 and resource_type = $2',
    [connectionId, resourceType],
  );
  return new Map(rows.map((r) => [r.external_id, r]));
}
