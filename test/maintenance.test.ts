// Maintenance activities (retention cleanup and the stale-task reaper) against a
// real, freshly migrated Postgres database. Factories are called directly with hand-built deps.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { deleteOldJobs } from '../activities/delete-old-jobs';
import type { ActivityDeps } from '../activities/deps';
import { reapStaleTasks, staleTaskMessage } from '../activities/reap-stale-tasks';
import { ownPool, useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

type LogLine = Record<string, unknown> & { msg?: string; level?: string };

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const AT = new Date('2025-03-10T12:00:00Z').getTime();

const db = useTestDatabase();

// Both activities work on the whole database, so every test starts from empty tables.
beforeEach(async () => {
  await db.pool.query('truncate connections, sync_seen cascade');
});

/** Deps with an in-memory log stream. */
function harness(pool: pg.Pool = db.pool): { deps: ActivityDeps; lines: LogLine[] } {
  const { deps, lines } = testActivityDeps({ pool });
  return { deps, lines: lines as LogLine[] };
}

interface Conn {
  id: string;
  tenant: string;
}

async function newConnection(): Promise<Conn> {
  const tenant = `tenant-${randomUUID().slice(0, 8)}`;
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key) values ($1, 'github', $2) returning id`,
    [tenant, `app_${randomUUID().slice(0, 8)}`],
  );
  return { id: rows[0]!.id, tenant };
}

interface JobOpts {
  status: string;
  jobType?: string;
  createdAt?: number;
  startedAt?: number;
  finishedAt?: number;
  failedTasks?: number;
}

/** A job on a connection of its own (so any number may be active: one active per connection and type). */
async function insertJob(opts: JobOpts, conn?: Conn): Promise<string> {
  const c = conn ?? (await newConnection());
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, created_at, started_at, finished_at, failed_tasks)
     values ($1, $2, $3, 'schedule', $4, $5, $6, $7, $8) returning id`,
    [
      c.id,
      c.tenant,
      opts.jobType ?? 'incremental',
      opts.status,
      new Date(opts.createdAt ?? AT - HOUR),
      opts.startedAt === undefined ? null : new Date(opts.startedAt),
      opts.finishedAt === undefined ? null : new Date(opts.finishedAt),
      opts.failedTasks ?? 0,
    ],
  );
  return rows[0]!.id;
}

async function insertTask(
  jobId: string,
  resourceType: string,
  opts: { status: string; heartbeatAt?: number; startedAt?: number },
): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into sync_tasks (job_id, resource_type, status, heartbeat_at, started_at) values ($1, $2, $3, $4, $5) returning id`,
    [
      jobId,
      resourceType,
      opts.status,
      opts.heartbeatAt === undefined ? null : new Date(opts.heartbeatAt),
      opts.startedAt === undefined ? null : new Date(opts.startedAt),
    ],
  );
  return rows[0]!.id;
}

async function count(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from (${sql}) q`, params);
  return rows[0]!.n;
}

async function job(id: string) {
  const { rows } = await db.pool.query<{
    status: string;
    finished_at: Date | null;
    last_error: string | null;
    failed_tasks: number;
  }>(`select status, finished_at, last_error, failed_tasks from sync_jobs where id = $1`, [id]);
  return rows[0];
}

async function task(id: string) {
  const { rows } = await db.pool.query<{ status: string; error_message: string | null; completed_at: Date | null }>(
    `select status, error_message, completed_at from sync_tasks where id = $1`,
    [id],
  );
  return rows[0];
}

describe('deleteOldJobs', () => {
  it('deletes finished jobs past retention with their tasks and logs, keeps recent and active ones', async () => {
    const conn = await newConnection();
    const oldDone = await insertJob({ status: 'completed', createdAt: AT - 8 * DAY - HOUR, finishedAt: AT - 8 * DAY }, conn);
    const oldTask = await insertTask(oldDone, 'issues', { status: 'completed' });
    await insertTask(oldDone, 'pulls', { status: 'failed' });
    await db.pool.query(
      `insert into sync_job_logs (job_id, connection_id, attempt, finished_at, outcome) values ($1, $2, 1, $3, 'completed')`,
      [oldDone, conn.id, new Date(AT - 8 * DAY)],
    );
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, last_seen_job_id) values ($1, 'issues', '1', '{}', $2)`,
      [conn.id, oldDone],
    );
    // No finished_at: its created_at counts.
    const oldCancelled = await insertJob({ status: 'cancelled', createdAt: AT - 9 * DAY }, conn);
    const recentDone = await insertJob({ status: 'failed', createdAt: AT - 6 * DAY - HOUR, finishedAt: AT - 6 * DAY }, conn);
    await insertTask(recentDone, 'issues', { status: 'failed' });
    // Created long ago but finished yesterday: retention runs from finished_at.
    const longRetried = await insertJob({ status: 'completed', createdAt: AT - 10 * DAY, finishedAt: AT - DAY }, conn);
    // Exactly at the cutoff: not older than it.
    const atCutoff = await insertJob({ status: 'completed', createdAt: AT - 7 * DAY - HOUR, finishedAt: AT - 7 * DAY }, conn);
    const oldRunning = await insertJob({ status: 'running', createdAt: AT - 8 * DAY, startedAt: AT - 8 * DAY });
    const runningTask = await insertTask(oldRunning, 'issues', { status: 'processing' });
    // A full pass's seen-set, of a task that retention deletes and of one still running.
    await db.pool.query(
      `insert into sync_seen (task_id, external_id) values ($1, 'a'), ($1, 'b'), ($2, 'a')`,
      [oldTask, runningTask],
    );
    const oldQueued = await insertJob({ status: 'queued', createdAt: AT - 30 * DAY });
    const oldRetrying = await insertJob({ status: 'retrying', createdAt: AT - 30 * DAY });

    const { deps, lines } = harness();
    await expect(deleteOldJobs(deps)({ at: AT, retentionDays: 7 })).resolves.toBe(2);

    const { rows } = await db.pool.query<{ id: string }>('select id from sync_jobs');
    expect(rows.map((r) => r.id).sort()).toEqual(
      [recentDone, longRetried, atCutoff, oldRunning, oldQueued, oldRetrying].sort(),
    );
    expect(rows.map((r) => r.id)).not.toContain(oldCancelled);
    // Cascade: the deleted job's tasks and log rows are gone, the others' tasks stay.
    expect(await count('select 1 from sync_tasks where job_id = $1', [oldDone])).toBe(0);
    expect(await count('select 1 from sync_job_logs where job_id = $1', [oldDone])).toBe(0);
    expect(await count('select 1 from sync_tasks where job_id = any($1::uuid[])', [[recentDone, oldRunning]])).toBe(2);
    // sync_seen (no foreign key): the deleted task's rows went with it, the running task's stay.
    expect(await count('select task_id from sync_seen')).toBe(1);
    expect(await count('select 1 from sync_seen where task_id = $1', [runningTask])).toBe(1);
    // Synced data is never touched by retention.
    expect(await count('select 1 from records where connection_id = $1', [conn.id])).toBe(1);

    const logged = lines.filter((l) => l.msg === 'old sync jobs deleted');
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ deleted: 2, retention_days: 7 });

    await expect(deleteOldJobs(deps)({ at: AT, retentionDays: 7 })).resolves.toBe(0);
  });

  it('purges record tombstones past TOMBSTONE_RETENTION_DAYS and remembers how far the feed was purged', async () => {
    const conn = await newConnection();
    const insert = (id: string, deletedDaysAgo: number | null) =>
      db.pool.query(
        `insert into records (connection_id, resource_type, external_id, data, deleted_at, change)
         values ($1, 'issues', $2, '{}', $3, $4) returning change_seq::text`,
        [conn.id, id, deletedDaysAgo === null ? null : new Date(AT - deletedDaysAgo * DAY), deletedDaysAgo === null ? 'insert' : 'delete'],
      ).then((r) => r.rows[0].change_seq as string);
    const oldTombstone = await insert('gone-long-ago', 31);
    await insert('gone-yesterday', 1);
    await insert('live', null);
    const { deps, lines } = harness();
    await deleteOldJobs({ ...deps, tombstoneRetentionDays: 30 })({ at: AT, retentionDays: 7 });
    const { rows } = await db.pool.query('select external_id from records where connection_id = $1 order by 1', [conn.id]);
    expect(rows.map((r) => r.external_id)).toEqual(['gone-yesterday', 'live']);
    const { rows: purged } = await db.pool.query('select resource_type, purged_seq::text from feed_purges where connection_id = $1', [conn.id]);
    expect(purged).toEqual([{ resource_type: 'issues', purged_seq: oldTombstone }]);
    expect(lines.find((l) => l.msg === 'old record tombstones purged')).toMatchObject({ purged: 1, tombstone_retention_days: 30 });
    // A later purge of the same resource type replaces the log row it covers; another type gets its own.
    const later = await insert('gone-long-ago-too', 40);
    const { rows: other } = await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, deleted_at, change)
       values ($1, 'pulls', 'p', '{}', $2, 'delete') returning change_seq::text`,
      [conn.id, new Date(AT - 40 * DAY)],
    );
    await deleteOldJobs({ ...deps, tombstoneRetentionDays: 30 })({ at: AT, retentionDays: 7 });
    const { rows: log } = await db.pool.query('select resource_type, purged_seq::text from feed_purges where connection_id = $1 order by 1', [conn.id]);
    expect(log).toEqual([{ resource_type: 'issues', purged_seq: later }, { resource_type: 'pulls', purged_seq: other[0].change_seq }]);
  });

  it('deletes webhook events past RETENTION_DAYS once none of their deliveries is pending', async () => {
    const conn = await newConnection();
    const { rows: hook } = await db.pool.query<{ id: string }>(
      `insert into webhooks (tenant_id, url, event_types, secret) values ('acme', 'http://127.0.0.1:9/', '{sync.completed}', 's') returning id`,
    );
    const event = async (name: string, daysAgo: number, status: string) => {
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into webhook_events (tenant_id, connection_id, event_type, payload, created_at) values ('acme', $1, 'sync.completed', $2, $3) returning id`,
        [conn.id, { name }, new Date(AT - daysAgo * DAY)],
      );
      await db.pool.query('insert into webhook_deliveries (webhook_id, event_id, status) values ($1, $2, $3)', [hook[0]!.id, rows[0]!.id, status]);
    };
    await event('old-delivered', 8, 'delivered');
    await event('old-failed', 8, 'failed');
    await event('old-pending', 8, 'pending');
    await event('recent', 1, 'delivered');
    const { deps } = harness();
    await deleteOldJobs(deps)({ at: AT, retentionDays: 7 });
    const { rows } = await db.pool.query(`select payload ->> 'name' as name from webhook_events order by 1`);
    expect(rows.map((r) => r.name)).toEqual(['old-pending', 'recent']);
    expect((await db.pool.query('select count(*)::int as n from webhook_deliveries')).rows[0].n).toBe(2);
  });

  it('deletes audit_log rows past AUDIT_LOG_RETENTION_DAYS, in batches', async () => {
    const entry = (daysAgo: number, n: number) =>
      db.pool.query(
        `insert into audit_log (at, actor, tenant_id, method, path, status) select $1, 'admin', 'acme', 'POST', '/x/' || i, 200 from generate_series(1, $2::int) i`,
        [new Date(AT - daysAgo * DAY), n],
      );
    await db.pool.query('truncate audit_log');
    await entry(400, 5);
    await entry(91, 3);
    await entry(89, 2);
    const { deps, lines } = harness();
    await deleteOldJobs({ ...deps, auditRetentionDays: 90 })({ at: AT, retentionDays: 7, batchSize: 2 });
    const { rows } = await db.pool.query<{ n: number; oldest: Date }>('select count(*)::int as n, min(at) as oldest from audit_log');
    expect(rows[0]!.n).toBe(2);
    expect(rows[0]!.oldest.getTime()).toBe(AT - 89 * DAY);
    expect(lines.find((l) => l.msg === 'old audit log entries deleted')).toMatchObject({ audit_entries: 8, audit_retention_days: 90 });
  });

  it('deletes a large backlog in batches', async () => {
    const conn = await newConnection();
    const ids: string[] = [];
    for (let i = 0; i < 25; i += 1) {
      const id = await insertJob({ status: i % 2 ? 'failed' : 'completed', createdAt: AT - 20 * DAY + i * MINUTE, finishedAt: AT - 10 * DAY }, conn);
      await insertTask(id, 'issues', { status: 'completed' });
      ids.push(id);
    }
    const keep = await insertJob({ status: 'completed', createdAt: AT - HOUR, finishedAt: AT - HOUR }, conn);
    const { deps, lines } = harness();

    await expect(deleteOldJobs(deps)({ at: AT, retentionDays: 7, batchSize: 10 })).resolves.toBe(25);
    // 10 + 10 + 5: the short third batch ends the loop.
    expect(lines.filter((l) => l.msg === 'old sync jobs deleted')[0]).toMatchObject({ deleted: 25, batches: 3 });
    expect(await count('select 1 from sync_jobs')).toBe(1);
    expect(await count('select 1 from sync_jobs where id = $1', [keep])).toBe(1);
    expect(await count('select 1 from sync_tasks')).toBe(0);

    // A full last batch needs one more (empty) statement to see it was the last.
    for (let i = 0; i < 20; i += 1) await insertJob({ status: 'completed', createdAt: AT - 20 * DAY, finishedAt: AT - 10 * DAY }, conn);
    lines.length = 0;
    await expect(deleteOldJobs(deps)({ at: AT, retentionDays: 7, batchSize: 10 })).resolves.toBe(20);
    expect(lines[0]).toMatchObject({ msg: 'old sync jobs deleted', deleted: 20, batches: 3 });
  });

  it('rejects a negative retention or a batch size below 1', async () => {
    const { deps } = harness();
    await expect(deleteOldJobs(deps)({ at: AT, retentionDays: -1 })).rejects.toThrow(RangeError);
    await expect(deleteOldJobs(deps)({ at: AT, retentionDays: 7, batchSize: 0 })).rejects.toThrow(RangeError);
  });
});

describe('reapStaleTasks', () => {
  const stale = AT - 5 * MINUTE - SECOND;
  const fresh = AT - 10 * SECOND;

  it('fails stale processing tasks, and their jobs once nothing of them is left open', async () => {
    // Only stale task, a completed sibling → job fails.
    const j1 = await insertJob({ status: 'running', startedAt: AT - HOUR });
    const t1 = await insertTask(j1, 'issues', { status: 'processing', heartbeatAt: stale, startedAt: AT - HOUR });
    const t1done = await insertTask(j1, 'pulls', { status: 'completed' });
    // Fresh heartbeat → untouched.
    const j2 = await insertJob({ status: 'running' });
    const t2 = await insertTask(j2, 'issues', { status: 'processing', heartbeatAt: fresh });
    // One stale, one live processing task → task fails, job keeps running.
    const j3 = await insertJob({ status: 'running', failedTasks: 1 });
    const t3 = await insertTask(j3, 'issues', { status: 'processing', heartbeatAt: stale });
    const t3live = await insertTask(j3, 'pulls', { status: 'processing', heartbeatAt: fresh });
    // Never heartbeated: started_at counts. A pending sibling keeps the retrying job alive.
    const j4 = await insertJob({ status: 'retrying' });
    const t4 = await insertTask(j4, 'issues', { status: 'processing', startedAt: AT - 400 * SECOND });
    const t4pending = await insertTask(j4, 'pulls', { status: 'pending' });
    // Exactly 5 minutes: not older than the threshold.
    const j5 = await insertJob({ status: 'running' });
    const t5 = await insertTask(j5, 'issues', { status: 'processing', heartbeatAt: AT - 5 * MINUTE });
    // Two stale tasks of one job → both counted on it.
    const j6 = await insertJob({ status: 'running', startedAt: AT - HOUR });
    const t6a = await insertTask(j6, 'pulls', { status: 'processing', heartbeatAt: stale });
    const t6b = await insertTask(j6, 'issues', { status: 'processing', heartbeatAt: AT - HOUR });
    await insertTask(j6, 'users', { status: 'completed' });

    const { deps, lines } = harness();
    const reap = reapStaleTasks(deps);
    await expect(reap({ at: AT })).resolves.toEqual({ tasks: 5, jobs: 2 });

    const message = staleTaskMessage(300);
    expect(message).toBe('no heartbeat for 300 s: the worker running it stopped');
    for (const id of [t1, t3, t4, t6a, t6b]) {
      const t = (await task(id))!;
      expect(t).toMatchObject({ status: 'failed', error_message: message });
      expect(t.completed_at!.getTime()).toBe(AT);
    }
    expect(await task(t1done)).toMatchObject({ status: 'completed' });
    for (const id of [t2, t3live, t5]) expect(await task(id)).toMatchObject({ status: 'processing', error_message: null });
    expect(await task(t4pending)).toMatchObject({ status: 'pending' });

    const failed1 = (await job(j1))!;
    expect(failed1).toMatchObject({ status: 'failed', failed_tasks: 1 });
    expect(failed1.finished_at!.getTime()).toBe(AT);
    expect(failed1.last_error).toBe('1 task (issues) sent no heartbeat for 300 s and was failed: the worker running it stopped');
    const failed6 = (await job(j6))!;
    expect(failed6).toMatchObject({ status: 'failed', failed_tasks: 2 });
    expect(failed6.last_error).toBe('2 tasks (issues, pulls) sent no heartbeat for 300 s and were failed: the worker running them stopped');
    // No ids or other internals in the user-facing summaries.
    for (const e of [failed1.last_error, failed6.last_error]) expect(e).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/);

    expect(await job(j2)).toMatchObject({ status: 'running', failed_tasks: 0, finished_at: null });
    expect(await job(j3)).toMatchObject({ status: 'running', failed_tasks: 2, finished_at: null });
    expect(await job(j4)).toMatchObject({ status: 'retrying', failed_tasks: 1, finished_at: null });
    expect(await job(j5)).toMatchObject({ status: 'running', failed_tasks: 0 });

    // The failed jobs' attempts are logged as finishJob logs them.
    const { rows: logs } = await db.pool.query(
      `select job_id, attempt, outcome, failed_count, error_summary, finished_at from sync_job_logs order by error_summary`,
    );
    expect(logs).toHaveLength(2);
    expect(logs.map((l) => l.job_id).sort()).toEqual([j1, j6].sort());
    expect(logs[0]).toMatchObject({ job_id: j1, attempt: 1, outcome: 'failed', failed_count: '1', error_summary: failed1.last_error });

    const warned = lines.filter((l) => l.msg === 'reaped stale sync tasks');
    expect(warned).toHaveLength(1);
    expect(warned[0]!.level).toBe('warn');
    expect((warned[0]!.task_ids as string[]).sort()).toEqual([t1, t3, t4, t6a, t6b].sort());
    expect((warned[0]!.failed_job_ids as string[]).sort()).toEqual([j1, j6].sort());

    // Idempotent: nothing new at the same time.
    await expect(reap({ at: AT })).resolves.toEqual({ tasks: 0, jobs: 0 });
    expect(lines.filter((l) => l.msg === 'reaped stale sync tasks')).toHaveLength(1);

    // Later the live tasks go silent too (j3's, j2's and j5's): now j3 has nothing open and fails.
    await expect(reap({ at: AT + 291 * SECOND })).resolves.toEqual({ tasks: 3, jobs: 3 });
    expect(await task(t3live)).toMatchObject({ status: 'failed' });
    expect(await job(j3)).toMatchObject({ status: 'failed', failed_tasks: 3 });
    expect(await job(j2)).toMatchObject({ status: 'failed', failed_tasks: 1 });
    expect(await job(j5)).toMatchObject({ status: 'failed', failed_tasks: 1 });
    expect(await job(j4)).toMatchObject({ status: 'retrying', failed_tasks: 1 });
  });

  it('honours staleAfterSeconds', async () => {
    const j = await insertJob({ status: 'running' });
    const t = await insertTask(j, 'issues', { status: 'processing', heartbeatAt: AT - 61 * SECOND });
    const { deps } = harness();
    await expect(reapStaleTasks(deps)({ at: AT })).resolves.toEqual({ tasks: 0, jobs: 0 });
    await expect(reapStaleTasks(deps)({ at: AT, staleAfterSeconds: 60 })).resolves.toEqual({ tasks: 1, jobs: 1 });
    expect(await task(t)).toMatchObject({ status: 'failed', error_message: 'no heartbeat for 60 s: the worker running it stopped' });
  });

  it('reaps a stale task of a finished job but leaves the job as it is', async () => {
    const j = await insertJob({ status: 'cancelled', finishedAt: AT - HOUR });
    const t = await insertTask(j, 'issues', { status: 'processing', heartbeatAt: stale });
    const { deps } = harness();
    await expect(reapStaleTasks(deps)({ at: AT })).resolves.toEqual({ tasks: 1, jobs: 0 });
    expect(await task(t)).toMatchObject({ status: 'failed' });
    const after = (await job(j))!;
    expect(after).toMatchObject({ status: 'cancelled', last_error: null, failed_tasks: 1 });
    expect(after.finished_at!.getTime()).toBe(AT - HOUR);
    expect(await count('select 1 from sync_job_logs')).toBe(0);
  });

  it('does nothing and logs no warning when nothing is stale', async () => {
    const j = await insertJob({ status: 'running' });
    await insertTask(j, 'issues', { status: 'processing', heartbeatAt: fresh });
    await insertTask(j, 'pulls', { status: 'pending' });
    const { deps, lines } = harness();
    await expect(reapStaleTasks(deps)({ at: AT })).resolves.toEqual({ tasks: 0, jobs: 0 });
    expect(lines.filter((l) => ['warn', 'error', 'fatal'].includes(l.level ?? ''))).toEqual([]);
  });

  it('never waits on a lock: a job or task held elsewhere is left for the next run', async () => {
    const lockedJob = await insertJob({ status: 'running' });
    const t1 = await insertTask(lockedJob, 'issues', { status: 'processing', heartbeatAt: stale });
    const busyJob = await insertJob({ status: 'running' });
    const t2 = await insertTask(busyJob, 'issues', { status: 'processing', heartbeatAt: stale });
    const { deps } = harness();
    const other = await db.pool.connect();
    try {
      await other.query('begin');
      // E.g. cancelJob between its job and task updates, and a worker writing a page.
      await other.query(`update sync_jobs set last_error = 'x' where id = $1`, [lockedJob]);
      await other.query(`update sync_tasks set heartbeat_at = heartbeat_at where id = $1`, [t2]);
      const started = performance.now();
      await expect(reapStaleTasks(deps)({ at: AT })).resolves.toEqual({ tasks: 0, jobs: 0 });
      expect(performance.now() - started).toBeLessThan(2000);
      await other.query('rollback');
    } finally {
      await other.query('rollback').catch(() => undefined);
      other.release();
    }
    await expect(reapStaleTasks(deps)({ at: AT })).resolves.toEqual({ tasks: 2, jobs: 2 });
    expect(await task(t1)).toMatchObject({ status: 'failed' });
  });

  it('two reapers at once reap each stale task exactly once', async () => {
    const secondPool = ownPool({ connectionString: db.url, max: 2 });
    try {
      await Promise.all([db.pool.query('select 1'), secondPool.query('select 1')]);
      const a = reapStaleTasks(harness(db.pool).deps);
      const b = reapStaleTasks(harness(secondPool).deps);
      for (let round = 0; round < 10; round += 1) {
        const expected = new Map<string, number>();
        let staleTasks = 0;
        for (let j = 0; j < 8; j += 1) {
          const jobId = await insertJob({ status: 'running' });
          const n = (j % 3) + 1;
          for (let k = 0; k < n; k += 1) await insertTask(jobId, `r${k}`, { status: 'processing', heartbeatAt: stale - k * SECOND });
          // Every other job also has a live task, so it must stay running.
          if (j % 2) await insertTask(jobId, 'live', { status: 'processing', heartbeatAt: fresh });
          expected.set(jobId, n);
          staleTasks += n;
        }
        const [ra, rb] = await Promise.all([a({ at: AT }), b({ at: AT })]);
        const tag = `round ${round}: ${JSON.stringify([ra, rb])}`;
        expect(ra.tasks + rb.tasks, tag).toBe(staleTasks);
        expect(ra.jobs + rb.jobs, tag).toBe(4);
        const { rows } = await db.pool.query<{ id: string; status: string; failed_tasks: number }>(
          'select id, status, failed_tasks from sync_jobs where id = any($1::uuid[])',
          [[...expected.keys()]],
        );
        for (const row of rows) expect(row.failed_tasks, tag).toBe(expected.get(row.id));
        expect(rows.filter((r) => r.status === 'failed'), tag).toHaveLength(4);
        expect(await count(`select 1 from sync_tasks where status = 'processing' and resource_type <> 'live'`)).toBe(0);
      }
      expect(await count('select 1 from sync_job_logs')).toBe(40);
    } finally {
      await secondPool.end();
    }
  });
});
