// Runs sync passes by calling the syncTask activity directly (in a MockActivityEnvironment), with
// real Postgres and the real connectors: what a sync job's workflow would do for each resource
// type, without Temporal servers. For tests of the data path (cursors, paging, deletion), fast.
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, beforeAll } from 'vitest';
import { syncTask } from '../../activities/sync-task';
import type { Pool } from '../../db/pool';
import type { SyncTaskResult } from '../../temporal/activities';
import { useTestDatabase, type TestDatabase } from './database';
import { sealedTestCredentials, testActivityDeps } from './deps';
import { closeFakeServers } from './fake-server';

/** A pass to run: its mode, and for a backfill its window. */
export interface PassOptions {
  mode: 'full' | 'incremental';
  window?: { start: Date; end: Date | null };
  /** How many times a task whose attempt failed is run again (the next attempt resumes it, as Temporal's retry would); default 0. */
  retries?: number;
}

/** What a pass did, by resource type. */
export type PassResult = Map<string, SyncTaskResult>;

/** A driver of sync passes over `pool`. */
export function syncDriver(pool: Pool) {
  const { deps, lines } = testActivityDeps({ pool });
  const run = syncTask(deps);

  /** Inserts a connection of `provider` with `config` and `credentials` (sealed, as the API stores them); returns its id. */
  async function connection(provider: string, config: Record<string, unknown>, credentials: Record<string, unknown> | null = null): Promise<string> {
    const id = randomUUID();
    const { rows } = await pool.query<{ id: string }>(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials, metadata)
       values ($5, 'acme', $1, $2, $3, $4, '{"sync": {"interval_seconds": 3600}}') returning id`,
      [provider, `driver-${randomUUID()}`, config, sealedTestCredentials(id, credentials), id],
    );
    return rows[0]!.id;
  }

  /** Replaces a connection's config (as a PATCH would). */
  async function setConfig(connectionId: string, config: Record<string, unknown>): Promise<void> {
    await pool.query('update connections set config = $2 where id = $1', [connectionId, config]);
  }

  /** Runs one job of the connection over `resourceTypes`, task after task; returns each task's result. */
  async function pass(connectionId: string, resourceTypes: string[], opts: PassOptions): Promise<PassResult> {
    const jobId = randomUUID();
    await pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, window_start, window_end)
       values ($1, $2, 'acme', $3, $4, 'running', $5, $6)`,
      [jobId, connectionId, opts.mode, opts.window ? 'backfill' : 'manual', opts.window?.start ?? null, opts.window?.end ?? null],
    );
    const { rows: tasks } = await pool.query<{ id: string; resource_type: string }>(
      `insert into sync_tasks (job_id, resource_type) select $1, unnest($2::text[]) returning id, resource_type`,
      [jobId, resourceTypes],
    );
    const results: PassResult = new Map();
    try {
      for (const task of tasks) {
        const input = { jobId, taskId: task.id, resourceType: task.resource_type, mode: opts.mode };
        for (let attempt = 1; ; attempt++) {
          try {
            results.set(task.resource_type, await new MockActivityEnvironment({ attempt }).run(run, input));
            break;
          } catch (err) {
            if (attempt > (opts.retries ?? 0)) throw err;
          }
        }
      }
    } finally {
      // Ends the job (a connection has one active job per type), as its workflow would.
      await pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [jobId]);
    }
    return results;
  }

  /** The connection's live records of `resourceType`: external id → data. */
  async function live(connectionId: string, resourceType: string): Promise<Map<string, Record<string, unknown>>> {
    const { rows } = await pool.query<{ external_id: string; data: Record<string, unknown> }>(
      'select external_id, data from records where connection_id = $1 and resource_type = $2 and deleted_at is null',
      [connectionId, resourceType],
    );
    return new Map(rows.map((r) => [r.external_id, r.data]));
  }

  /** Ids of the connection's tombstones of `resourceType`. */
  async function tombstones(connectionId: string, resourceType: string): Promise<string[]> {
    const { rows } = await pool.query<{ external_id: string }>(
      'select external_id from records where connection_id = $1 and resource_type = $2 and deleted_at is not null order by external_id',
      [connectionId, resourceType],
    );
    return rows.map((r) => r.external_id);
  }

  return { connection, setConfig, pass, live, tombstones, lines };
}

export type SyncDriver = ReturnType<typeof syncDriver>;

/**
 * Registers the hooks of a file (or describe block) that drives passes against fake providers: a
 * fresh database (`useTestDatabase`), a sync driver on it, and every fake server a test started
 * (`serve`, `startFakeGitHub`, …) closed after it. `db` and `driver` are filled in by the time the
 * file's own later hooks and its tests run.
 */
export function useSyncDriver(): { db: TestDatabase; driver: SyncDriver } {
  const db = useTestDatabase();
  const driver = {} as SyncDriver;
  beforeAll(() => {
    Object.assign(driver, syncDriver(db.pool));
  });
  afterEach(async () => {
    await closeFakeServers();
  });
  return { db, driver };
}
