// Runs the sync activity directly (no Temporal server: MockActivityEnvironment) against real
// Postgres: for connections of the `http` connector, one job and one task per pass, as the job
// workflow would create them (fast enough for property tests with many passes); for any
// connection, tasks of a running job as workers with their own pools run them, two at once to
// race for a credential renewal.
import { MockActivityEnvironment } from '@temporalio/testing';
import { syncTask } from '../../activities/sync-task';
import type { ActivityDeps } from '../../activities/deps';
import { upsertRecords } from '../../db/models/records';
import type { Pool } from '../../db/pool';
import type { SyncTaskInput, SyncTaskResult } from '../../temporal/activities';
import { testActivityDeps } from './deps';
import { paginationOf, RECORDS_PATH, type FakeHttpProvider } from './fake-http-provider';
import { serve } from './fake-server';
import type { LogLines } from './logs';

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
  heartbeats?: unknown[],
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
  // The details of each heartbeat of the run, when asked for.
  if (heartbeats) env.on('heartbeat', (details: unknown) => heartbeats.push(details));
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

/** A running job of `jobType` of the connection, with one task per resource type of `resources`: its id and the task ids, in that order. */
export async function runningJob(pool: Pool, connectionId: string, resources: string[], jobType: 'full' | 'incremental'): Promise<{ jobId: string; tasks: string[] }> {
  const { rows } = await pool.query<{ id: string }>(
    `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at) values ($1, 'acme', $2, 'manual', 'running', now()) returning id`,
    [connectionId, jobType],
  );
  const jobId = rows[0]!.id;
  const tasks: string[] = [];
  for (const r of resources) {
    const t = await pool.query<{ id: string }>('insert into sync_tasks (job_id, resource_type) values ($1, $2) returning id', [jobId, r]);
    tasks.push(t.rows[0]!.id);
  }
  return { jobId, tasks };
}

/** Marks the job completed (a connection has one active job of a type at a time). */
export async function completeJob(pool: Pool, jobId: string): Promise<void> {
  await pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [jobId]);
}

/** Starts the sync activity on one task of a job, as a worker on `pool` runs its attempt `attempt`: the worker's log lines, and the result. */
export function startTask(
  pool: Pool,
  task: { jobId: string; taskId: string; resourceType: string; mode: 'full' | 'incremental' },
  attempt = 1,
): { lines: LogLines; heartbeats: unknown[]; result: Promise<SyncTaskResult> } {
  const { deps, lines } = testActivityDeps({ pool });
  const input: SyncTaskInput = { jobId: task.jobId, taskId: task.taskId, resourceType: task.resourceType, mode: task.mode };
  const env = new MockActivityEnvironment({ attempt });
  const heartbeats: unknown[] = [];
  env.on('heartbeat', (details: unknown) => heartbeats.push(details));
  return { lines, heartbeats, result: env.run(syncTask(deps), input) as Promise<SyncTaskResult> };
}

/**
 * Both resource types of a new running job of the connection synced at once by two workers (one
 * on each pool), the provider's token answers held (`hold` sets the fake provider's gate) until
 * one run waits for the other's renewal lease, a token is asked for twice, or both have ended (a
 * run with a fresh cached token takes no lock at all: then there is nothing to hold). The job is
 * ended after. Their results and log lines, and how many token requests (`requests()`) they made.
 */
export async function renewalOnTwoWorkers(opts: {
  pools: [Pool, Pool];
  connectionId: string;
  resources: [string, string];
  mode: 'full' | 'incremental';
  hold(gate: Promise<void> | null): void;
  requests(): number;
}): Promise<{ results: [SyncTaskResult, SyncTaskResult]; lines: LogLines; requests: number }> {
  const { jobId, tasks } = await runningJob(opts.pools[0], opts.connectionId, opts.resources, opts.mode);
  const before = opts.requests();
  let release!: () => void;
  opts.hold(new Promise<void>((resolve) => (release = resolve)));
  const first = startTask(opts.pools[0], { jobId, taskId: tasks[0]!, resourceType: opts.resources[0], mode: opts.mode });
  const second = startTask(opts.pools[1], { jobId, taskId: tasks[1]!, resourceType: opts.resources[1], mode: opts.mode });
  let settled = false;
  void Promise.allSettled([first.result, second.result]).then(() => (settled = true));
  for (;;) {
    const waiting = [...first.lines, ...second.lines].some((l) => l.msg === 'waiting for the credential renewal of another worker');
    if (waiting || opts.requests() - before >= 2 || settled) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  release();
  const results = await Promise.all([first.result, second.result]);
  opts.hold(null);
  await completeJob(opts.pools[0], jobId);
  return { results, lines: [...first.lines, ...second.lines], requests: opts.requests() - before };
}

/**
 * An http connection reading `items` by cursor paging, ten a page, from `provider` (with
 * `updated_at` and `since`, unless `changeTimes` is false), whose items were stored by a pass at
 * `storedAt`, as `provider` has them now: fetched and written then (`synced_at` set back to it
 * after the write, which takes the database's clock, so passes the scenario starts after
 * `storedAt` but before now judge them). Returns the connection's id.
 */
export async function cursorConnectionStoredAt(pool: Pool, provider: FakeHttpProvider, appKey: string, storedAt: Date, changeTimes = true): Promise<string> {
  const connectionId = await createHttpConnection(
    pool,
    {
      base_url: provider.baseUrl,
      pagination: paginationOf('cursor', 10),
      resources: { items: { path: '/cursor/items', records: RECORDS_PATH.cursor, id: 'id', ...(changeTimes && { updated_at: 'updated_at', since: { param: 'updated_since' } }) } },
    },
    appKey,
  );
  await upsertRecords(
    pool,
    { connectionId, resourceType: 'items', jobId: null, fetchedAt: storedAt },
    provider.list().map((i) => ({ externalId: i.id, updatedAt: changeTimes ? i.updated_at : null, data: { ...i } })),
  );
  await pool.query('update records set synced_at = $2 where connection_id = $1', [connectionId, storedAt]);
  return connectionId;
}


/**
 * An http connection (app key `appKey`) whose feed holds three records, `a`, `b` and `c`, changed
 * two hours ago, stored by one full pass against a fake provider that is closed afterwards: a
 * feed to read with nothing syncing beside it. Returns the connection's id.
 */
export async function connectionWithThreeRecords(pool: Pool, appKey: string): Promise<string> {
  const old = new Date(Date.now() - 2 * 3_600_000).toISOString();
  const fake = await serve((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ items: ['a', 'b', 'c'].map((id) => ({ id, updated_at: old })) }));
  });
  try {
    const id = await createHttpConnection(
      pool,
      { base_url: fake.url, pagination: { type: 'none' }, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      appKey,
    );
    await runPass(testActivityDeps({ pool }).deps, id, 'items', 'full');
    return id;
  } finally {
    await fake.close();
  }
}
