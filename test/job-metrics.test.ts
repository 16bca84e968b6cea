// Job-lifecycle metrics: sync_jobs_total{status,provider},
// sync_job_duration_seconds{outcome} and sync_jobs_queue_depth{status}, recorded by the activities
// that change a job's status and read from a real, freshly migrated Postgres database. Activities
// are called directly (no Temporal), each twice where Temporal could retry them.
import { randomUUID } from 'node:crypto';
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { cancelJob } from '../activities/cancel-job';
import { claimJob } from '../activities/claim-job';
import type { ActivityDeps } from '../activities/deps';
import { enqueueJob } from '../activities/enqueue-job';
import type { EnqueueJobInput } from '../temporal/activities';
import { failAbandonedJobs } from '../activities/fail-abandoned-jobs';
import { finishJob } from '../activities/finish-job';
import { reapStaleTasks } from '../activities/reap-stale-tasks';
import type { Pool } from '../db/pool';
import { countActiveJobsByStatus } from '../db/models/jobs';
import { registerQueueDepthGauge } from '../lib/metrics';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

const SECOND = 1000;

const db = useTestDatabase();

interface Conn {
  id: string;
  tenant: string;
}

async function newConnection(provider = 'github', pool: Pool = db.pool): Promise<Conn> {
  const tenant = `tenant-${randomUUID().slice(0, 8)}`;
  const { rows } = await pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key) values ($1, $2, $3) returning id`,
    [tenant, provider, `app_${randomUUID().slice(0, 8)}`],
  );
  return { id: rows[0]!.id, tenant };
}

/** A job row in `status`, started at `startedAt` (null: never started), in `pool`'s database. */
async function insertJob(
  conn: Conn,
  opts: { status: string; jobType?: string; startedAt?: number | null; pool?: Pool },
): Promise<string> {
  const { rows } = await (opts.pool ?? db.pool).query<{ id: string }>(
    `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at)
     values ($1, $2, $3, 'manual', $4, $5) returning id`,
    [conn.id, conn.tenant, opts.jobType ?? 'incremental', opts.status, opts.startedAt ? new Date(opts.startedAt) : null],
  );
  return rows[0]!.id;
}

function enqueueInput(conn: Conn, jobType: 'incremental' | 'full' = 'incremental'): EnqueueJobInput {
  const now = Date.now();
  return { jobId: randomUUID(), connectionId: conn.id, jobType, trigger: 'manual', scheduledAt: now, at: now };
}

/**
 * The value of one sample (`metricName` is e.g. `sync_job_duration_seconds_count` for a histogram)
 * whose labels include `labels`; 0 when there is none.
 */
async function sample(registry: Registry, metricName: string, labels: Record<string, string>): Promise<number> {
  const found = (await registry.getMetricsAsJSON())
    .flatMap((m) => m.values.map((v) => ({ ...v, metricName: (v as { metricName?: string }).metricName ?? m.name })))
    .filter((v) => v.metricName === metricName)
    .filter((v) => Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want));
  return found.reduce((sum, v) => sum + v.value, 0);
}

/** The samples of one metric family as the scrape text shows them (without HELP/TYPE lines). */
async function scraped(registry: Registry, name: string): Promise<string[]> {
  const text = await registry.getSingleMetricAsString(name);
  return text.split('\n').filter((line) => line.startsWith(name));
}

function harness(): { deps: ActivityDeps; registry: Registry } {
  const { deps, registry } = testActivityDeps({ pool: db.pool });
  return { deps, registry };
}

describe('sync_jobs_total and sync_job_duration_seconds', () => {
  it('counts enqueue → completed once per job, even when each activity is retried', async () => {
    const { deps, registry } = harness();
    const conn = await newConnection('github');
    const input = enqueueInput(conn);

    // A retried enqueue finds the job it inserted: still one queued job.
    await expect(enqueueJob(deps)(input)).resolves.toMatchObject({ outcome: 'enqueued' });
    await expect(enqueueJob(deps)(input)).resolves.toMatchObject({ outcome: 'enqueued' });
    expect(await sample(registry, 'sync_jobs_total', { status: 'queued', provider: 'github' })).toBe(1);

    const startedAt = Date.now();
    await claimJob(deps)({ jobId: input.jobId, workflowId: `sync-job:${input.jobId}`, at: startedAt });
    const finish = { jobId: input.jobId, outcome: 'completed' as const, at: startedAt + 42 * SECOND, startedAt };
    await expect(finishJob(deps)(finish)).resolves.toBe('completed');
    // A retried finish changes nothing and answers the status the job has.
    await expect(finishJob(deps)(finish)).resolves.toBe('completed');

    expect(await sample(registry, 'sync_jobs_total', { status: 'completed', provider: 'github' })).toBe(1);
    expect(await sample(registry, 'sync_job_duration_seconds_count', { outcome: 'completed' })).toBe(1);
    expect(await sample(registry, 'sync_job_duration_seconds_sum', { outcome: 'completed' })).toBeCloseTo(42, 3);
    expect(await scraped(registry, 'sync_jobs_total')).toEqual([
      'sync_jobs_total{status="queued",provider="github"} 1',
      'sync_jobs_total{status="completed",provider="github"} 1',
    ]);
    expect(await scraped(registry, 'sync_job_duration_seconds')).toContain(
      'sync_job_duration_seconds_count{outcome="completed"} 1',
    );
  });

  it('counts a finish the job ends as failed under the status it wrote, with its provider', async () => {
    const { deps, registry } = harness();
    const conn = await newConnection('demo');
    const startedAt = Date.now() - 10 * SECOND;
    const jobId = await insertJob(conn, { status: 'running', startedAt });
    await db.pool.query('update sync_jobs set failed_tasks = 1 where id = $1', [jobId]);

    // Asked to complete, but a task failed: the job fails, and is counted as failed.
    await expect(finishJob(deps)({ jobId, outcome: 'completed', at: startedAt + 5 * SECOND, startedAt })).resolves.toBe('failed');
    expect(await sample(registry, 'sync_jobs_total', { status: 'failed', provider: 'demo' })).toBe(1);
    expect(await sample(registry, 'sync_jobs_total', { status: 'completed' })).toBe(0);
    expect(await sample(registry, 'sync_job_duration_seconds_sum', { outcome: 'failed' })).toBeCloseTo(5, 3);
  });

  it('counts a cancellation once and times a job that never started from its creation', async () => {
    const { deps, registry } = harness();
    const conn = await newConnection('github');
    const jobId = await insertJob(conn, { status: 'queued', startedAt: null });
    const { rows } = await db.pool.query<{ created_at: Date }>('select created_at from sync_jobs where id = $1', [jobId]);
    const at = rows[0]!.created_at.getTime() + 7 * SECOND;

    await expect(cancelJob(deps)({ jobId, reason: 'test', at })).resolves.toBe(true);
    await expect(cancelJob(deps)({ jobId, reason: 'test', at })).resolves.toBe(false);

    expect(await sample(registry, 'sync_jobs_total', { status: 'cancelled', provider: 'github' })).toBe(1);
    expect(await sample(registry, 'sync_job_duration_seconds_count', { outcome: 'cancelled' })).toBe(1);
    expect(await sample(registry, 'sync_job_duration_seconds_sum', { outcome: 'cancelled' })).toBeCloseTo(7, 3);
  });

  it('counts each job failed by the abandoned-job cleanup once', async () => {
    const { deps, registry } = harness();
    const conn = await newConnection('github');
    await insertJob(conn, { status: 'running', jobType: 'incremental', startedAt: Date.now() - 60 * SECOND });
    await insertJob(conn, { status: 'queued', jobType: 'full', startedAt: null });

    const cleanup = { connectionId: conn.id, at: Date.now() };
    await expect(failAbandonedJobs(deps)(cleanup)).resolves.toHaveLength(2);
    await expect(failAbandonedJobs(deps)(cleanup)).resolves.toEqual([]);

    expect(await sample(registry, 'sync_jobs_total', { status: 'failed', provider: 'github' })).toBe(2);
    expect(await sample(registry, 'sync_job_duration_seconds_count', { outcome: 'failed' })).toBe(2);
  });

  it('counts a job the stale-task reaper fails once', async () => {
    const { deps, registry } = harness();
    const conn = await newConnection('github');
    const now = Date.now();
    const jobId = await insertJob(conn, { status: 'running', startedAt: now - 20 * 60 * SECOND });
    await db.pool.query(
      `insert into sync_tasks (job_id, resource_type, status, started_at, heartbeat_at) values ($1, 'issues', 'processing', $2, $2)`,
      [jobId, new Date(now - 10 * 60 * SECOND)],
    );

    await expect(reapStaleTasks(deps)({ at: now })).resolves.toEqual({ tasks: 1, jobs: 1 });
    await expect(reapStaleTasks(deps)({ at: now })).resolves.toEqual({ tasks: 0, jobs: 0 });

    expect(await sample(registry, 'sync_jobs_total', { status: 'failed', provider: 'github' })).toBe(1);
    expect(await sample(registry, 'sync_job_duration_seconds_sum', { outcome: 'failed' })).toBeCloseTo(20 * 60, 3);
  });
});

describe('sync_jobs_queue_depth', () => {
  // A database of its own: the counts are of every job in it.
  const depthDb = useTestDatabase();

  // No cache (0 ms) here: these tests are about the counts; the cache has its own test.
  it('reports the real count of each active status at every scrape, 0 included', async () => {
    const registry = new Registry();
    registerQueueDepthGauge(registry, () => countActiveJobsByStatus(depthDb.pool), 0);
    expect(await scraped(registry, 'sync_jobs_queue_depth')).toEqual([
      'sync_jobs_queue_depth{status="queued"} 0',
      'sync_jobs_queue_depth{status="running"} 0',
      'sync_jobs_queue_depth{status="retrying"} 0',
    ]);

    // At most one active job per connection and type: spread them over connections.
    const plan = { queued: 3, running: 2, retrying: 0, completed: 4, failed: 1, cancelled: 1 };
    for (const [status, n] of Object.entries(plan)) {
      for (let i = 0; i < n; i += 1) await insertJob(await newConnection('github', depthDb.pool), { status, pool: depthDb.pool });
    }
    const text = await registry.metrics();
    expect(text).toContain('sync_jobs_queue_depth{status="queued"} 3');
    expect(text).toContain('sync_jobs_queue_depth{status="running"} 2');
    expect(text).toContain('sync_jobs_queue_depth{status="retrying"} 0');

    // Kept current: the next scrape sees a job that moved on.
    await depthDb.pool.query(`update sync_jobs set status = 'retrying' where id = (select id from sync_jobs where status = 'running' limit 1)`);
    expect(await scraped(registry, 'sync_jobs_queue_depth')).toEqual([
      'sync_jobs_queue_depth{status="queued"} 3',
      'sync_jobs_queue_depth{status="running"} 1',
      'sync_jobs_queue_depth{status="retrying"} 1',
    ]);
  });

  it('keeps the previous values and the rest of the scrape when the database fails or hangs', async () => {
    let mode: 'up' | 'error' | 'hang' = 'up';
    const pool = {
      query: (text: string, values: unknown[]) => {
        if (mode === 'error') return Promise.reject(new Error('connection refused'));
        if (mode === 'hang') return new Promise(() => undefined);
        return depthDb.pool.query(text, values);
      },
    } as unknown as Pool;
    const registry = new Registry();
    registerQueueDepthGauge(registry, () => countActiveJobsByStatus(pool), 0);
    new Counter({ name: 'other_total', help: 'another metric of the same registry', registers: [registry] }).inc();

    const before = await scraped(registry, 'sync_jobs_queue_depth');
    expect(before).toHaveLength(3);

    mode = 'error';
    const failed = await registry.metrics();
    expect(failed).toContain('other_total 1');
    expect(await scraped(registry, 'sync_jobs_queue_depth')).toEqual(before);

    mode = 'hang';
    const started = Date.now();
    expect(await scraped(registry, 'sync_jobs_queue_depth')).toEqual(before);
    expect(Date.now() - started).toBeLessThan(5 * SECOND);
  });
});
