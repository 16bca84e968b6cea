// The scheduling scenarios of the enqueue activity (and the two activities that share its job rows),
// run against a real, freshly migrated Postgres database. The activity factories are called
// directly with hand-built deps: no Temporal involved.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { type Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { ActivityDeps } from '../activities/deps';
import { enqueueJob } from '../activities/enqueue-job';
import { lockConnectionSkipLocked } from '../db/models/connections';
import { insertJob as insertJobRow } from '../db/models/jobs';
import type { EnqueueJobInput } from '../temporal/activities';
import { ABANDONED_REASON, failAbandonedJobs } from '../activities/fail-abandoned-jobs';
import { openCycle } from '../activities/open-cycle';
import { rescheduleQueuedJob } from '../activities/reschedule-queued-job';
import { DEFAULT_SCHEDULE_SETTINGS, planNextRun, toPlannedRun, type Plan } from '../policy/schedule';
import { countingPool, ownPool, useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

type LogLine = Record<string, unknown> & { msg?: string; level?: number };

interface Harness {
  deps: ActivityDeps;
  registry: Registry;
  lines: LogLine[];
}

const at = (iso: string): number => new Date(iso).getTime();
const SECOND = 1000;

const db = useTestDatabase();

/** Deps with an in-memory log stream and a registry of its own. */
function harness(pool: pg.Pool = db.pool): Harness {
  const { deps, registry, lines } = testActivityDeps({ pool });
  return { deps, registry, lines: lines as LogLine[] };
}

interface Conn {
  id: string;
  tenant: string;
  provider: string;
}

async function newConnection(
  opts: { status?: string; metadata?: Record<string, unknown>; provider?: string } = {},
): Promise<Conn> {
  const tenant = `tenant-${randomUUID().slice(0, 8)}`;
  const provider = opts.provider ?? 'github';
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, status, metadata)
     values ($1, $2, $3, $4, $5) returning id`,
    [tenant, provider, `app_${randomUUID().slice(0, 8)}`, opts.status ?? 'active', JSON.stringify(opts.metadata ?? {})],
  );
  return { id: rows[0]!.id, tenant, provider };
}

async function insertJob(
  conn: Conn,
  opts: { jobType?: string; status?: string; finishedAt?: number; scheduledAt?: number; trigger?: string } = {},
): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at, finished_at)
     values ($1, $2, $3, $4, $5, $6, $7) returning id`,
    [
      conn.id,
      conn.tenant,
      opts.jobType ?? 'incremental',
      opts.trigger ?? 'schedule',
      opts.status ?? 'queued',
      new Date(opts.scheduledAt ?? Date.now()),
      opts.finishedAt === undefined ? null : new Date(opts.finishedAt),
    ],
  );
  return rows[0]!.id;
}

async function jobsOf(connectionId: string) {
  const { rows } = await db.pool.query(
    `select id, job_type, trigger, status, scheduled_at, workflow_id, tenant_id, finished_at, abandoned_at, last_error
       from sync_jobs where connection_id = $1 order by created_at, id`,
    [connectionId],
  );
  return rows;
}

async function connectionRow(connectionId: string) {
  const { rows } = await db.pool.query(`select metadata, updated_at from connections where id = $1`, [connectionId]);
  return rows[0] as { metadata: { sync?: Record<string, unknown> }; updated_at: Date };
}


/** A plan from the real planner with a pinned random source. */
function plan(now: number, lastFinishedAt: number | undefined, random: number, intervalSeconds = 900): Plan {
  return planNextRun({
    now,
    schedule: { kind: 'interval', intervalSeconds },
    lastFinishedAt,
    activationReference: lastFinishedAt ?? now,
    jitterPctMin: DEFAULT_SCHEDULE_SETTINGS.jitterPctMin,
    jitterPctMax: DEFAULT_SCHEDULE_SETTINGS.jitterPctMax,
    random: () => random,
  });
}

function scheduledInput(conn: Conn, p: Plan, now: number, jobId = randomUUID()): EnqueueJobInput {
  return {
    jobId,
    connectionId: conn.id,
    jobType: 'incremental',
    trigger: 'schedule',
    scheduledAt: p.scheduledAt,
    at: now,
    plan: toPlannedRun(p),
  };
}

function simpleInput(conn: Conn, overrides: Partial<EnqueueJobInput> = {}): EnqueueJobInput {
  const now = Date.now();
  return {
    jobId: randomUUID(),
    connectionId: conn.id,
    jobType: 'incremental',
    trigger: 'schedule',
    scheduledAt: now,
    at: now,
    ...overrides,
  };
}

describe('enqueueJob', () => {
  it('active connection receives an incremental job at the jittered time and next_run_at moves on', async () => {
    const L = at('2025-01-01T12:00:00Z');
    const now = at('2025-01-01T12:15:00Z');
    const conn = await newConnection({ metadata: { sync: { next_run_at: '2025-01-01T12:15:00.000Z' } } });
    await insertJob(conn, { status: 'completed', scheduledAt: L - 60 * SECOND, finishedAt: L });

    const p = plan(now, L, 0.5);
    // L + B = 12:15 is not > now (12:15): catch-up, one job at once, next slot 12:30.
    expect(p).toMatchObject({
      mode: 'catch_up',
      jitterSeconds: 90,
      nextDueAt: at('2025-01-01T12:30:00Z'),
      scheduledAt: at('2025-01-01T12:16:30Z'),
      nextRunAt: at('2025-01-01T12:30:00Z'),
    });

    const { deps } = harness();
    const input = scheduledInput(conn, p, now);
    await expect(enqueueJob(deps)(input)).resolves.toEqual({ outcome: 'enqueued', jobId: input.jobId });

    const jobs = await jobsOf(conn.id);
    expect(jobs).toHaveLength(2);
    const job = jobs.find((j) => j.id === input.jobId)!;
    expect(job).toMatchObject({
      status: 'queued',
      job_type: 'incremental',
      trigger: 'schedule',
      tenant_id: conn.tenant,
      workflow_id: `sync-job:${input.jobId}`,
    });
    expect((job.scheduled_at as Date).getTime()).toBe(p.scheduledAt);

    const { metadata } = await connectionRow(conn.id);
    expect(metadata.sync).toEqual({ next_run_at: '2025-01-01T12:30:00.000Z', last_jitter_seconds: 90 });
    expect(new Date(metadata.sync!.next_run_at as string).getTime()).toBeGreaterThan(p.scheduledAt);
  });

  it('prevents a duplicate pending job: a queued or running incremental is returned instead (never queued behind a running one, which requested jobs may be)', async () => {
    for (const [status, trigger] of [['queued', 'schedule'], ['running', 'schedule'], ['running', 'api'], ['retrying', 'api']] as const) {
      const conn = await newConnection({ metadata: { sync: { next_run_at: '2025-01-01T10:15:00.000Z' } } });
      const existingId = await insertJob(conn, { status, trigger });
      const before = await connectionRow(conn.id);
      const now = at('2025-01-01T10:14:00Z');
      const p = plan(now, at('2025-01-01T10:00:00Z'), 0.3);
      const { deps, lines } = harness();

      const result = await enqueueJob(deps)(scheduledInput(conn, p, now));
      expect(result).toEqual({ outcome: 'existing', jobId: existingId, status });
      const jobs = await jobsOf(conn.id);
      expect(jobs.map((j) => j.id)).toEqual([existingId]);
      // Skipped: the schedule metadata is not touched.
      expect(await connectionRow(conn.id)).toEqual(before);
      expect(lines.filter((l) => l.msg === 'sync job enqueued')).toHaveLength(0);
    }
  });

  it('enqueues a full job beside a queued incremental one', async () => {
    const conn = await newConnection();
    const incrementalId = await insertJob(conn, { status: 'queued' });
    const { deps } = harness();
    const input = simpleInput(conn, { jobType: 'full', trigger: 'manual' });
    await expect(enqueueJob(deps)(input)).resolves.toEqual({ outcome: 'enqueued', jobId: input.jobId });
    const jobs = await jobsOf(conn.id);
    expect(jobs.map((j) => [j.id, j.job_type, j.status]).sort()).toEqual(
      [
        [incrementalId, 'incremental', 'queued'],
        [input.jobId, 'full', 'queued'],
      ].sort(),
    );
  });

  it('is idempotent under activity retry: same input twice → one row, metadata written once', async () => {
    const conn = await newConnection();
    const L = at('2025-01-01T10:00:00Z');
    const now = at('2025-01-01T10:14:00Z');
    await insertJob(conn, { status: 'completed', scheduledAt: L - 60 * SECOND, finishedAt: L });
    const p = plan(now, L, 0.1);
    const { deps, registry, lines } = harness();
    const enqueue = enqueueJob(deps);
    const input = scheduledInput(conn, p, now);

    const first = await enqueue(input);
    const afterFirst = await connectionRow(conn.id);
    const second = await enqueue(input);
    const afterSecond = await connectionRow(conn.id);

    expect(first).toEqual({ outcome: 'enqueued', jobId: input.jobId });
    expect(second).toEqual({ outcome: 'enqueued', jobId: input.jobId });
    const active = (await jobsOf(conn.id)).filter((j) => j.status === 'queued');
    expect(active.map((j) => j.id)).toEqual([input.jobId]);
    expect(afterFirst.metadata.sync).toEqual({
      next_run_at: new Date(p.nextRunAt).toISOString(),
      last_jitter_seconds: p.jitterSeconds,
    });
    // Same values, and no second write (the updated_at trigger would have moved updated_at).
    expect(afterSecond).toEqual(afterFirst);
    // Counted and logged once.
    expect(lines.filter((l) => l.msg === 'sync job enqueued')).toHaveLength(1);
    const counter = (await registry.getMetricsAsJSON()).find((m) => m.name === 'sync_scheduler_jobs_scheduled_total')!;
    expect(counter.values.reduce((sum, v) => sum + v.value, 0)).toBe(1);
  });

  it('an id whose job has since ended is not answered as enqueued: the run would sleep on a job that never runs', async () => {
    // A workflow task enqueued a job and then failed (a signal came while it completed: UnhandledCommand,
    // or its worker died); its retry draws the same ids (the run's seeded random), took another path
    // (the connection was paused meanwhile, its queued job cancelled) and enqueues later under the
    // id the first attempt used. That job is no longer the run's to wait for.
    const conn = await newConnection();
    const { deps } = harness();
    const enqueue = enqueueJob(deps);
    const input = simpleInput(conn);
    await expect(enqueue(input)).resolves.toEqual({ outcome: 'enqueued', jobId: input.jobId });
    await db.pool.query(`update sync_jobs set status = 'cancelled', finished_at = now() where id = $1`, [input.jobId]);
    await expect(enqueue(input)).resolves.toEqual({ outcome: 'existing', jobId: input.jobId, status: 'cancelled' });
    expect((await jobsOf(conn.id)).map((j) => j.status)).toEqual(['cancelled']);
  });

  it('a retry whose first attempt committed still gets its job while the connection row is locked elsewhere', async () => {
    // The first attempt committed but its result was lost (worker crash / start-to-close timeout);
    // the retry then runs while another transaction (e.g. a reconcile tick's batch, which holds
    // its rows FOR UPDATE across Temporal calls) locks the connection row. The job is ours, so the
    // answer must be 'enqueued': the workflow only treats 'enqueued' as its own job, and on a later
    // attempt with a fresh jobId it would get 'existing' for this job and never run it.
    const conn = await newConnection();
    const { deps } = harness();
    const enqueue = enqueueJob(deps);
    const input = simpleInput(conn);
    await expect(enqueue(input)).resolves.toEqual({ outcome: 'enqueued', jobId: input.jobId });

    const other = await db.pool.connect();
    try {
      await other.query('begin');
      await other.query('select id from connections where id = $1 for update', [conn.id]);
      await expect(enqueue(input)).resolves.toEqual({ outcome: 'enqueued', jobId: input.jobId });
    } finally {
      await other.query('rollback').catch(() => undefined);
      other.release();
    }
  });

  describe('skips', () => {
    it.each(['paused', 'disabled'])('a %s connection → inactive, no job', async (status) => {
      const conn = await newConnection({ status });
      const before = await connectionRow(conn.id);
      const now = at('2025-01-01T10:14:00Z');
      const { deps } = harness();
      const result = await enqueueJob(deps)(scheduledInput(conn, plan(now, at('2025-01-01T10:00:00Z'), 0.5), now));
      expect(result).toEqual({ outcome: 'inactive', status });
      expect(await jobsOf(conn.id)).toEqual([]);
      expect(await connectionRow(conn.id)).toEqual(before);
    });

    it('a breaker paused past input.at → paused with that time, no job', async () => {
      const conn = await newConnection();
      const now = at('2025-01-01T10:14:00Z');
      const pausedUntil = at('2025-01-01T10:44:00Z');
      await db.pool.query(
        `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, last_failure_at, paused_until)
         values ($1, $2, 5, $3, $4)`,
        [conn.id, conn.provider, new Date(now - 60 * SECOND), new Date(pausedUntil)],
      );
      const { deps } = harness();
      const result = await enqueueJob(deps)(simpleInput(conn, { at: now, scheduledAt: now }));
      expect(result).toEqual({ outcome: 'paused', pausedUntil });
      expect(await jobsOf(conn.id)).toEqual([]);
    });

    it('a breaker whose paused_until is before input.at does not block', async () => {
      const conn = await newConnection();
      const now = at('2025-01-01T10:14:00Z');
      await db.pool.query(
        `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, paused_until)
         values ($1, $2, 5, $3)`,
        [conn.id, conn.provider, new Date(now - SECOND)],
      );
      const { deps } = harness();
      const input = simpleInput(conn, { at: now, scheduledAt: now });
      await expect(enqueueJob(deps)(input)).resolves.toEqual({ outcome: 'enqueued', jobId: input.jobId });
      expect((await jobsOf(conn.id)).map((j) => j.id)).toEqual([input.jobId]);
    });

    it('an unknown connection id → missing, no job', async () => {
      const connectionId = randomUUID();
      const { deps } = harness();
      const result = await enqueueJob(deps)(simpleInput({ id: connectionId, tenant: 'x', provider: 'github' }));
      expect(result).toEqual({ outcome: 'missing' });
      expect(await jobsOf(connectionId)).toEqual([]);
    });
  });

  it('returns locked quickly while another transaction holds the connection row, then enqueues', async () => {
    const conn = await newConnection();
    const other = await db.pool.connect();
    const { deps } = harness();
    const input = simpleInput(conn);
    try {
      await other.query('begin');
      await other.query('select id from connections where id = $1 for update', [conn.id]);

      const started = performance.now();
      const result = await enqueueJob(deps)(input);
      const elapsed = performance.now() - started;
      expect(result).toEqual({ outcome: 'locked' });
      expect(elapsed).toBeLessThan(2000);
      expect(await jobsOf(conn.id)).toEqual([]);

      await other.query('commit');
    } finally {
      await other.query('rollback').catch(() => undefined);
      other.release();
    }
    await expect(enqueueJob(deps)(input)).resolves.toEqual({ outcome: 'enqueued', jobId: input.jobId });
    expect((await jobsOf(conn.id)).map((j) => j.id)).toEqual([input.jobId]);
  });

  describe('jitter persistence: next_run_at and last_jitter_seconds stored with the job', () => {
    const L = at('2025-01-01T10:00:00Z');
    const now = at('2025-01-01T10:14:00Z');
    // floor(0.25 · 181) = 45 s of jitter on a 900 s base.
    const p45 = () => plan(now, L, 0.25);

    it('writes scheduled_at = next_due + 45 s, last_jitter_seconds = 45 and the subsequent run', async () => {
      const p = p45();
      expect(p).toMatchObject({
        mode: 'normal',
        jitterSeconds: 45,
        nextDueAt: at('2025-01-01T10:15:00Z'),
        scheduledAt: at('2025-01-01T10:15:45Z'),
        nextRunAt: at('2025-01-01T10:30:00Z'),
      });
      const conn = await newConnection({ metadata: { sync: { interval_seconds: 900 } } });
      await insertJob(conn, { status: 'completed', scheduledAt: L - 60 * SECOND, finishedAt: L });
      const { deps } = harness();
      const input = scheduledInput(conn, p, now);
      await expect(enqueueJob(deps)(input)).resolves.toEqual({ outcome: 'enqueued', jobId: input.jobId });

      const job = (await jobsOf(conn.id)).find((j) => j.id === input.jobId)!;
      expect((job.scheduled_at as Date).getTime()).toBe(p.nextDueAt + 45 * SECOND);
      const { metadata } = await connectionRow(conn.id);
      expect(metadata.sync).toEqual({
        interval_seconds: 900,
        last_jitter_seconds: 45,
        next_run_at: '2025-01-01T10:30:00.000Z',
      });
    });

    it('rolls the metadata back with the job when the transaction fails after the metadata write', async () => {
      const original = { interval_seconds: 900, next_run_at: '2025-01-01T10:15:00.000Z', last_jitter_seconds: 7 };
      const conn = await newConnection({ metadata: { sync: original } });
      await insertJob(conn, { status: 'completed', scheduledAt: L - 60 * SECOND, finishedAt: L });
      const before = await connectionRow(conn.id);
      const doomedJobId = randomUUID();
      // Deferred to commit, so it fires after both the insert and the metadata update have run.
      await db.pool.query(`
        create function test_reject_job() returns trigger language plpgsql as $$
        begin
          if new.id = '${doomedJobId}'::uuid then raise exception 'test: job % rejected', new.id; end if;
          return null;
        end $$;
        create constraint trigger test_reject_job after insert on sync_jobs
          deferrable initially deferred for each row execute function test_reject_job();`);
      try {
        const { deps, lines, registry } = harness();
        const input = scheduledInput(conn, p45(), now, doomedJobId);
        await expect(enqueueJob(deps)(input)).rejects.toThrow(/rejected/);

        expect(await connectionRow(conn.id)).toEqual(before);
        expect((await connectionRow(conn.id)).metadata.sync).toEqual(original);
        expect((await jobsOf(conn.id)).map((j) => j.id)).not.toContain(doomedJobId);
        expect(lines.filter((l) => l.msg === 'sync job enqueued')).toHaveLength(0);
        const counter = (await registry.getMetricsAsJSON()).find((m) => m.name === 'sync_scheduler_jobs_scheduled_total')!;
        expect(counter.values.reduce((sum, v) => sum + v.value, 0)).toBe(0);
      } finally {
        await db.pool.query(`drop trigger test_reject_job on sync_jobs; drop function test_reject_job();`);
      }

      // Without the trigger, the same job goes through.
      const { deps } = harness();
      await expect(enqueueJob(deps)(scheduledInput(conn, p45(), now, doomedJobId))).resolves.toEqual({
        outcome: 'enqueued',
        jobId: doomedJobId,
      });
      expect((await connectionRow(conn.id)).metadata.sync).toEqual({
        interval_seconds: 900,
        last_jitter_seconds: 45,
        next_run_at: '2025-01-01T10:30:00.000Z',
      });
    });

    it('rolls the job back when the metadata write fails', async () => {
      const conn = await newConnection({ metadata: { sync: { next_run_at: '2025-01-01T10:15:00.000Z' } } });
      await insertJob(conn, { status: 'completed', scheduledAt: L - 60 * SECOND, finishedAt: L });
      const before = await connectionRow(conn.id);
      await db.pool.query(`
        create function test_reject_metadata() returns trigger language plpgsql as $$
        begin
          if new.id = '${conn.id}'::uuid then raise exception 'test: metadata of % rejected', new.id; end if;
          return new;
        end $$;
        create trigger test_reject_metadata before update on connections
          for each row execute function test_reject_metadata();`);
      const input = scheduledInput(conn, p45(), now);
      try {
        const { deps } = harness();
        await expect(enqueueJob(deps)(input)).rejects.toThrow(/rejected/);
      } finally {
        await db.pool.query(`drop trigger test_reject_metadata on connections; drop function test_reject_metadata();`);
      }
      expect(await connectionRow(conn.id)).toEqual(before);
      expect((await jobsOf(conn.id)).map((j) => j.id)).not.toContain(input.jobId);
    });
  });

  it('logs one "sync job enqueued" line with the plan and records the metrics', async () => {
    const L = at('2025-01-01T10:00:00Z');
    const now = at('2025-01-01T10:14:00Z');
    const conn = await newConnection({ provider: 'github' });
    const neighbour = await newConnection({ provider: 'gitlab' });
    await insertJob(conn, { status: 'completed', scheduledAt: L - 60 * SECOND, finishedAt: L });
    const p = plan(now, L, 0.25);
    const { deps, lines, registry } = harness();
    const enqueue = enqueueJob(deps);

    // Another label pair first, so the assertion below is about exactly this pair.
    await enqueue(simpleInput(neighbour));
    const jitterCount = async () =>
      (await registry.getMetricsAsJSON())
        .find((m) => m.name === 'sync_scheduler_jitter_seconds')!
        .values.find((v) => (v as { metricName?: string }).metricName === 'sync_scheduler_jitter_seconds_count')
        ?.value ?? 0;
    const scheduledFor = async (c: Conn) =>
      (await registry.getMetricsAsJSON())
        .find((m) => m.name === 'sync_scheduler_jobs_scheduled_total')!
        .values.find((v) => v.labels.provider === c.provider && v.labels.tenant_id === c.tenant)?.value ?? 0;
    const countBefore = await scheduledFor(conn);
    const jitterBefore = await jitterCount();
    const neighbourBefore = await scheduledFor(neighbour);
    lines.length = 0;

    const input = scheduledInput(conn, p, now);
    await expect(enqueue(input)).resolves.toEqual({ outcome: 'enqueued', jobId: input.jobId });

    const enqueued = lines.filter((l) => l.msg === 'sync job enqueued');
    expect(enqueued).toHaveLength(1);
    expect(enqueued[0]).toMatchObject({
      connection_id: conn.id,
      job_id: input.jobId,
      jitter_seconds: 45,
      base_interval_seconds: 900,
      next_due_at: '2025-01-01T10:15:00.000Z',
      next_run_at: '2025-01-01T10:30:00.000Z',
      jitter_min_seconds: 0,
      jitter_max_seconds: 180,
    });

    expect(countBefore).toBe(0);
    expect(await scheduledFor(conn)).toBe(1);
    expect(await scheduledFor(neighbour)).toBe(neighbourBefore);
    expect(await jitterCount()).toBe(jitterBefore + 1);
    const jitterText = await registry.getSingleMetricAsString('sync_scheduler_jitter_seconds');
    expect(jitterText).toMatch(/sync_scheduler_jitter_seconds_sum 45\b/);

    // A skip ('existing') neither counts nor logs an enqueue.
    lines.length = 0;
    await expect(enqueue(scheduledInput(conn, p, now))).resolves.toMatchObject({ outcome: 'existing', jobId: input.jobId });
    expect(await scheduledFor(conn)).toBe(1);
    expect(await jitterCount()).toBe(jitterBefore + 1);
    expect(lines.map((l) => l.msg)).toEqual(['enqueue skipped']);
  });

  it('an API job inserted while an enqueue holds the connection row is no deadlock', async () => {
    // Found in CI: an enqueue locks its connection row, an API request inserts a job of the same
    // type (its foreign-key check wants a KEY SHARE lock on that row), then the enqueue's insert
    // meets the API job's unfinished row in the one-active-job index and waits for it. A FOR
    // UPDATE lock made the API insert wait for the enqueue too: Postgres ended one with
    // "deadlock detected" and the request was answered 500.
    const conn = await newConnection();
    const enqueuer = await db.pool.connect();
    const apiPool = ownPool({ connectionString: db.url, max: 1 });
    try {
      await enqueuer.query('begin');
      expect(await lockConnectionSkipLocked(enqueuer, conn.id)).not.toBeNull();
      const apiJob = randomUUID();
      const apiInsert = insertJobRow(apiPool, {
        id: apiJob, workflowId: `sync-job:${apiJob}`, connectionId: conn.id, tenantId: conn.tenant,
        jobType: 'incremental', trigger: 'api', scheduledAt: null,
      }).then((inserted) => ({ inserted }), (err: Error) => ({ err }));
      // Until the API insert has finished or waits on a lock.
      for (;;) {
        const settled = await Promise.race([apiInsert, new Promise<null>((r) => setTimeout(r, 20, null))]);
        if (settled) break;
        const { rows } = await db.pool.query(
          "select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like 'insert into sync_jobs%'");
        if (rows.length > 0) break;
      }
      const schedulerJob = randomUUID();
      const enqueued = await insertJobRow(enqueuer, {
        id: schedulerJob, workflowId: `sync-job:${schedulerJob}`, connectionId: conn.id, tenantId: conn.tenant,
        jobType: 'incremental', trigger: 'schedule', scheduledAt: null,
      }).then((inserted) => ({ inserted }), (err: Error) => ({ err }));
      await enqueuer.query('err' in enqueued ? 'rollback' : 'commit');
      const api = await apiInsert;
      expect({ api, enqueued }).toEqual({ api: { inserted: true }, enqueued: { inserted: false } });
      const jobs = await jobsOf(conn.id);
      expect(jobs.map((j) => j.id)).toEqual([apiJob]);
    } finally {
      await enqueuer.query('rollback').catch(() => undefined);
      enqueuer.release();
      await apiPool.end();
    }
  });

  it('parallel schedulers remain race-free: one job per connection over 50 rounds', async () => {
    const secondPool = ownPool({ connectionString: db.url, max: 2 });
    try {
      // Open connections up front so the two calls really start together.
      await Promise.all([db.pool.query('select 1'), secondPool.query('select 1')]);
      const a = enqueueJob(harness(db.pool).deps);
      const b = enqueueJob(harness(secondPool).deps);
      for (let round = 0; round < 50; round += 1) {
        const conn = await newConnection();
        const now = Date.now();
        const [ra, rb] = await Promise.all([
          a(simpleInput(conn, { at: now, scheduledAt: now })),
          b(simpleInput(conn, { at: now, scheduledAt: now })),
        ]);
        const winnerIds = [ra, rb].flatMap((r) => (r.outcome === 'enqueued' ? [r.jobId] : []));
        expect(winnerIds, `round ${round}: ${JSON.stringify([ra, rb])}`).toHaveLength(1);
        const loser = [ra, rb].find((r) => r.outcome !== 'enqueued')!;
        expect(['locked', 'existing']).toContain(loser.outcome);
        if (loser.outcome === 'existing') expect(loser.jobId).toBe(winnerIds[0]);
        const jobs = await jobsOf(conn.id);
        expect(jobs.filter((j) => ['queued', 'running', 'retrying'].includes(j.status as string))).toHaveLength(1);
        expect(jobs).toHaveLength(1);
        expect(jobs[0]!.id).toBe(winnerIds[0]);
      }
    } finally {
      await secondPool.end();
    }
  });
});

describe('failAbandonedJobs', () => {
  it('fails the active jobs of a connection and their unfinished tasks; completed ones are untouched', async () => {
    const conn = await newConnection();
    const other = await newConnection();
    const running = await insertJob(conn, { jobType: 'incremental', status: 'running' });
    const queued = await insertJob(conn, { jobType: 'full', status: 'queued', trigger: 'manual' });
    const completedAt = at('2025-01-01T09:00:00Z');
    const completed = await insertJob(conn, { jobType: 'incremental', status: 'completed', finishedAt: completedAt });
    const otherRunning = await insertJob(other, { status: 'running' });
    await db.pool.query(
      `insert into sync_tasks (job_id, resource_type, status) values
         ($1, 'issues', 'processing'), ($1, 'pulls', 'completed'), ($2, 'issues', 'pending'),
         ($3, 'issues', 'completed'), ($4, 'issues', 'processing')`,
      [running, queued, completed, otherRunning],
    );
    const now = at('2025-01-01T12:00:00Z');
    const { deps, lines } = harness();
    const fail = failAbandonedJobs(deps);

    const ids = await fail({ connectionId: conn.id, at: now });
    expect([...ids].sort()).toEqual([running, queued].sort());

    const jobs = new Map((await jobsOf(conn.id)).map((j) => [j.id as string, j]));
    for (const id of [running, queued]) {
      const job = jobs.get(id)!;
      expect(job.status).toBe('failed');
      expect((job.abandoned_at as Date).getTime()).toBe(now);
      expect((job.finished_at as Date).getTime()).toBe(now);
      expect(job.last_error).toMatch(/^abandoned:/);
      expect(job.last_error).toBe(ABANDONED_REASON);
    }
    expect(jobs.get(completed)).toMatchObject({ status: 'completed', abandoned_at: null, last_error: null });
    expect((jobs.get(completed)!.finished_at as Date).getTime()).toBe(completedAt);

    const { rows: tasks } = await db.pool.query(
      `select job_id, resource_type, status, error_message from sync_tasks order by job_id, resource_type`,
    );
    const task = (jobId: string, resource: string) => tasks.find((t) => t.job_id === jobId && t.resource_type === resource);
    expect(task(running, 'issues')).toMatchObject({ status: 'failed', error_message: ABANDONED_REASON });
    expect(task(running, 'pulls')).toMatchObject({ status: 'completed', error_message: null });
    expect(task(queued, 'issues')).toMatchObject({ status: 'failed' });
    expect(task(completed, 'issues')).toMatchObject({ status: 'completed', error_message: null });
    // Another connection's job and task are left alone.
    expect(task(otherRunning, 'issues')).toMatchObject({ status: 'processing' });
    expect((await jobsOf(other.id))[0]).toMatchObject({ status: 'running' });
    expect(lines.filter((l) => l.msg === 'failed abandoned sync jobs')).toHaveLength(1);

    await expect(fail({ connectionId: conn.id, at: now + 60 * SECOND })).resolves.toEqual([]);
  });
});

describe("a connection run's start-up cleanup (openCycle)", () => {
  it("cancels the queued scheduler job an earlier run left of a paused or disabled connection, and fails as abandoned an active connection's and every begun one", async () => {
    const now = at('2025-01-01T12:00:00Z');
    const { deps } = harness();
    const outcome: Record<string, unknown> = {};
    for (const status of ['active', 'needs_reauth', 'paused', 'disabled']) {
      const conn = await newConnection({ status });
      const queued = await insertJob(conn, { status: 'queued' });
      const begun = await insertJob(conn, { status: 'running', jobType: 'full' });
      const ended = await openCycle(deps)({ connectionId: conn.id, at: now, cleanup: true, runId: 'a-new-run' }).then(() => jobsOf(conn.id));
      const shape = (id: string) => {
        const job = ended.find((j) => j.id === id)!;
        return { status: job.status, error: job.last_error, abandoned: job.abandoned_at && (job.abandoned_at as Date).getTime() };
      };
      outcome[status] = { queued: shape(queued), begun: shape(begun) };
    }
    const abandoned = { status: 'failed', error: ABANDONED_REASON, abandoned: now };
    expect(outcome).toEqual({
      active: { queued: abandoned, begun: abandoned },
      needs_reauth: { queued: abandoned, begun: abandoned },
      paused: { queued: { status: 'cancelled', error: 'connection paused', abandoned: null }, begun: abandoned },
      disabled: { queued: { status: 'cancelled', error: 'connection disabled', abandoned: null }, begun: abandoned },
    });
  });

  it("costs an active connection one statement: the connection's status is read by the statement that ends the jobs", async () => {
    const conn = await newConnection();
    const counting = countingPool(db.pool);
    const { deps } = harness(counting.pool);
    await openCycle(deps)({ connectionId: conn.id, at: Date.now(), cleanup: false, runId: 'a-run' });
    const without = counting.statements.splice(0);
    await openCycle(deps)({ connectionId: conn.id, at: Date.now(), cleanup: true, runId: 'a-run' });
    // The cleanup's statements are those the same look without it does not run (begin, the look, commit are shared).
    expect({ without: without.length, cleanup: counting.statements.length - without.length }).toEqual({ without: without.length, cleanup: 1 });
  });
});

describe('rescheduleQueuedJob', () => {
  it('moves a queued job, writing the plan into metadata', async () => {
    const conn = await newConnection({ metadata: { sync: { next_run_at: '2025-01-01T10:15:00.000Z' } } });
    const jobId = await insertJob(conn, { status: 'queued', scheduledAt: at('2025-01-01T10:15:30Z') });
    const p = plan(at('2025-01-01T10:05:00Z'), at('2025-01-01T10:00:00Z'), 0.25, 300);
    const { deps } = harness();
    await expect(
      rescheduleQueuedJob(deps)({ jobId, connectionId: conn.id, scheduledAt: p.scheduledAt, plan: toPlannedRun(p) }),
    ).resolves.toBe(true);
    const job = (await jobsOf(conn.id))[0]!;
    expect((job.scheduled_at as Date).getTime()).toBe(p.scheduledAt);
    expect(job).toMatchObject({ job_type: 'incremental', trigger: 'schedule' });
    expect((await connectionRow(conn.id)).metadata.sync).toEqual({
      next_run_at: new Date(p.nextRunAt).toISOString(),
      last_jitter_seconds: p.jitterSeconds,
    });
  });

  it('turns a queued incremental job into a manual full one when no full job is active', async () => {
    const conn = await newConnection();
    const jobId = await insertJob(conn, { status: 'queued', scheduledAt: at('2025-01-01T10:15:30Z') });
    const now = at('2025-01-01T10:05:00Z');
    const { deps } = harness();
    await expect(
      rescheduleQueuedJob(deps)({ jobId, connectionId: conn.id, scheduledAt: now, jobType: 'full', trigger: 'manual' }),
    ).resolves.toBe(true);
    const job = (await jobsOf(conn.id))[0]!;
    expect(job).toMatchObject({ id: jobId, job_type: 'full', trigger: 'manual', status: 'queued' });
    expect((job.scheduled_at as Date).getTime()).toBe(now);
  });

  it('keeps the job type when a full job is already active', async () => {
    const conn = await newConnection();
    const jobId = await insertJob(conn, { status: 'queued' });
    await insertJob(conn, { jobType: 'full', status: 'running', trigger: 'manual' });
    const now = at('2025-01-01T10:05:00Z');
    const { deps } = harness();
    await expect(
      rescheduleQueuedJob(deps)({ jobId, connectionId: conn.id, scheduledAt: now, jobType: 'full', trigger: 'manual' }),
    ).resolves.toBe(true);
    const job = (await jobsOf(conn.id)).find((j) => j.id === jobId)!;
    expect(job).toMatchObject({ job_type: 'incremental', trigger: 'manual' });
    expect((job.scheduled_at as Date).getTime()).toBe(now);
  });

  it('returns false for a job that is already running and leaves it alone', async () => {
    const conn = await newConnection({ metadata: { sync: { next_run_at: '2025-01-01T10:15:00.000Z' } } });
    const scheduledAt = at('2025-01-01T10:15:30Z');
    const jobId = await insertJob(conn, { status: 'running', scheduledAt });
    const before = await connectionRow(conn.id);
    const p = plan(at('2025-01-01T10:05:00Z'), at('2025-01-01T10:00:00Z'), 0.25);
    const { deps } = harness();
    await expect(
      rescheduleQueuedJob(deps)({
        jobId,
        connectionId: conn.id,
        scheduledAt: at('2025-01-01T10:05:00Z'),
        jobType: 'full',
        trigger: 'manual',
        plan: toPlannedRun(p),
      }),
    ).resolves.toBe(false);
    const job = (await jobsOf(conn.id))[0]!;
    expect(job).toMatchObject({ job_type: 'incremental', trigger: 'schedule', status: 'running' });
    expect((job.scheduled_at as Date).getTime()).toBe(scheduledAt);
    expect(await connectionRow(conn.id)).toEqual(before);
  });
});
