// Bookkeeping edges against a real, freshly migrated Postgres: the backlog count behind
// `sync_scheduler_backlog`, and alerts that must resolve when a connection recovers.
import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { deleteOldJobs } from '../activities/delete-old-jobs';
import { enqueueJob } from '../activities/enqueue-job';
import { finishJob } from '../activities/finish-job';
import { openCycle } from '../activities/open-cycle';
import { markJobRetrying } from '../activities/mark-job-retrying';
import { recordAttemptFailure, recordAttemptSuccess } from '../activities/record-attempt';
import { countOverdueConnections, countStaleConnections } from '../db/models/connections';
import { planNextRun } from '../policy/schedule';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

const MINUTE = 60_000;
const db = useTestDatabase();
beforeEach(async () => {
  await db.pool.query('truncate connections cascade');
});

async function connection(nextRunAt: Date | null, status = 'active'): Promise<string> {
  const sync = nextRunAt ? { interval_seconds: 900, next_run_at: nextRunAt.toISOString() } : { interval_seconds: 900 };
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, status, metadata) values ('acme', 'demo', $1, $2, $3) returning id`,
    [`app_${randomUUID().slice(0, 8)}`, status, { sync }],
  );
  return rows[0]!.id;
}
async function job(connectionId: string, status: string, scheduledAt: Date): Promise<void> {
  await db.pool.query(
    `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, scheduled_at) values ($1, $2, 'acme', 'incremental', 'schedule', $3, $4)`,
    [randomUUID(), connectionId, status, scheduledAt],
  );
}

describe('the backlog of overdue connections', () => {
  it('counts an active connection whose next run has passed and that has no active job', async () => {
    const now = new Date();
    await connection(new Date(now.getTime() - 10 * MINUTE)); // overdue
    await connection(new Date(now.getTime() + 10 * MINUTE)); // not yet due
    await connection(new Date(now.getTime() - 10 * MINUTE), 'paused'); // not active
    const waiting = await connection(new Date(now.getTime() - 10 * MINUTE)); // has its next job, not late
    await job(waiting, 'queued', new Date(now.getTime() + 5 * MINUTE));
    expect(await countOverdueConnections(db.pool, now)).toBe(1);
  });

  it('counts a connection whose queued job is past its scheduled time, and not one whose job runs', async () => {
    const now = new Date();
    const late = await connection(new Date(now.getTime() + 10 * MINUTE));
    await job(late, 'queued', new Date(now.getTime() - 5 * MINUTE));
    const running = await connection(new Date(now.getTime() + 10 * MINUTE));
    await job(running, 'running', new Date(now.getTime() - 5 * MINUTE));
    expect(await countOverdueConnections(db.pool, now)).toBe(1);
  });

  it('leaves out a requested job queued behind a running one of its connection and type (it waits for that one, by design), not one over its tenant\'s limit', async () => {
    const now = new Date();
    const requested = async (connectionId: string, jobType: string, status: string) =>
      db.pool.query(
        `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, scheduled_at) values ($1, $2, 'acme', $3, 'api', $4, $5)`,
        [randomUUID(), connectionId, jobType, status, new Date(now.getTime() - 5 * MINUTE)],
      );
    const behind = await connection(new Date(now.getTime() + 10 * MINUTE));
    await requested(behind, 'full', 'running');
    await requested(behind, 'full', 'queued');
    const behindRetrying = await connection(new Date(now.getTime() + 10 * MINUTE));
    await requested(behindRetrying, 'full', 'retrying');
    await requested(behindRetrying, 'full', 'queued');
    // A running job of another type holds nothing back: this queued one is late.
    const otherType = await connection(new Date(now.getTime() + 10 * MINUTE));
    await requested(otherType, 'incremental', 'running');
    await requested(otherType, 'full', 'queued');
    expect(await countOverdueConnections(db.pool, now)).toBe(1);
  });

  it('ignores a malformed next_run_at instead of failing', async () => {
    await db.pool.query(
      `insert into connections (tenant_id, provider_slug, app_key, metadata) values ('acme', 'demo', 'bad', '{"sync": {"next_run_at": "soon"}}')`,
    );
    expect(await countOverdueConnections(db.pool, new Date())).toBe(0);
  });
});

describe('freshness: connections whose last success is older than twice their interval', () => {
  it('counts them by provider, from creation when never synced, and leaves out paused and cron-scheduled ones', async () => {
    const now = new Date();
    const hourAgo = new Date(now.getTime() - 60 * MINUTE);
    const fresh = await connection(null); // 900 s interval
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, scheduled_at, finished_at) values ($1, $2, 'acme', 'incremental', 'schedule', 'completed', $3, $3)`,
      [randomUUID(), fresh, new Date(now.getTime() - 10 * MINUTE)],
    );
    const stale = await connection(null);
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, scheduled_at, finished_at) values ($1, $2, 'acme', 'incremental', 'schedule', 'completed', $3, $3)`,
      [randomUUID(), stale, new Date(now.getTime() - 31 * MINUTE)],
    );
    const neverSynced = await connection(null);
    const paused = await connection(null, 'paused');
    await db.pool.query(`update connections set created_at = $2 where id = any($1::uuid[])`, [[fresh, stale, neverSynced, paused], hourAgo]);
    await db.pool.query(
      `insert into connections (tenant_id, provider_slug, app_key, metadata, created_at) values ('acme', 'github', 'gh', '{"sync": {"interval_seconds": 600}}', $1),
                                                                                 ('acme', 'github', 'cron', '{"sync": {"cron": "0 3 * * *"}}', $1)`,
      [hourAgo],
    );
    expect(await countStaleConnections(db.pool, now, 900)).toEqual([{ provider: 'demo', n: 2 }, { provider: 'github', n: 1 }]);
  });
});

describe('freshness reads a stored interval as the schedule parser does', () => {
  it('uses a stored integer interval, and the default for a string, a fraction, a value below the minimum or beyond an int, or an object', async () => {
    const now = new Date();
    // Never synced, created 25 minutes ago: stale under a 600 s interval (2 × 600 < 1,500), not under the 900 s default.
    const created = new Date(now.getTime() - 25 * MINUTE);
    const stored = ['600', '"600"', '600.5', '30', '-600', '1e12', '{"seconds": 600}', 'null'];
    for (const [i, value] of stored.entries()) {
      await db.pool.query(
        `insert into connections (tenant_id, provider_slug, app_key, metadata, created_at) values ('acme', 'stored-interval', $1, jsonb_build_object('sync', jsonb_build_object('interval_seconds', $2::jsonb)), $3)`,
        [`interval-${i}`, value, created],
      );
    }
    const counts = await countStaleConnections(db.pool, now, 900);
    expect(counts.find((c) => c.provider === 'stored-interval')).toEqual({ provider: 'stored-interval', n: 1 });
  });
});

describe('alerts resolve when the connection recovers', () => {
  it('a success resolves the open sync_job_failed alert as well as the breaker alert', async () => {
    const id = await connection(null);
    for (const category of ['sync_job_failed', 'sync_circuit_breaker']) {
      await db.pool.query(`insert into alerts (category, severity, connection_id, context) values ($1, 'warning', $2, '{}')`, [category, id]);
    }
    const { deps } = testActivityDeps({ pool: db.pool });
    await recordAttemptSuccess(deps)({ connectionId: id, at: Date.now() });
    const { rows } = await db.pool.query('select category, resolved_at is not null as resolved from alerts where connection_id = $1 order by category', [id]);
    expect(rows).toEqual([
      { category: 'sync_circuit_breaker', resolved: true },
      { category: 'sync_job_failed', resolved: true },
    ]);
  });
});

describe('bookkeeping run twice (a local activity repeated after its workflow task was lost)', () => {
  const deps = () => testActivityDeps({ pool: db.pool }).deps;

  it("a run's start-up cleanup, repeated after the run enqueued, leaves that run's job alone", async () => {
    const id = await connection(null);
    const earlier = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, scheduler_run_id)
       values ($1, $2, 'acme', 'incremental', 'schedule', 'queued', 'run-1')`,
      [earlier, id],
    );
    const open = { connectionId: id, at: Date.now(), cleanup: true, runId: 'run-2' };
    await openCycle(deps())(open);
    const jobId = randomUUID();
    await expect(enqueueJob(deps())({ jobId, connectionId: id, jobType: 'incremental', trigger: 'schedule', scheduledAt: Date.now(), at: Date.now(), runId: 'run-2' }))
      .resolves.toMatchObject({ outcome: 'enqueued' });
    await openCycle(deps())(open); // the same call again
    const { rows } = await db.pool.query('select id, status from sync_jobs where connection_id = $1', [id]);
    expect(Object.fromEntries(rows.map((r) => [r.id, r.status]))).toEqual({ [earlier]: 'failed', [jobId]: 'queued' });
  });

  it('a failed attempt counts toward the breaker once, and a retrying job counts its retry once', async () => {
    const id = await connection(null);
    const failure = { connectionId: id, at: Date.now(), error: 'boom', attemptKey: 'job-1:1000' };
    await recordAttemptFailure(deps())(failure);
    await recordAttemptFailure(deps())(failure);
    await recordAttemptFailure(deps())({ ...failure, attemptKey: 'job-1:2000' });
    const { rows: stats } = await db.pool.query('select consecutive_failures from connector_failure_stats where connection_id = $1', [id]);
    expect(stats[0].consecutive_failures).toBe(2);

    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status) values ($1, $2, 'acme', 'full', 'api', 'running')`,
      [jobId, id],
    );
    const retrying = {
      jobId, at: Date.now(), startedAt: Date.now(), retryAfter: Date.now() + 60_000, kind: 'failure' as const, error: 'boom', failedCount: 1,
      retryCount: 1, rateLimitRetryCount: 0,
    };
    await markJobRetrying(deps())(retrying);
    await markJobRetrying(deps())(retrying);
    const { rows: job } = await db.pool.query('select retry_count, rate_limit_retry_count from sync_jobs where id = $1', [jobId]);
    expect(job[0]).toEqual({ retry_count: 1, rate_limit_retry_count: 0 });
  });
});

describe('the schedule\'s history outlives job retention', () => {
  const DAY = 24 * 60 * MINUTE;
  /** Inserts a running job of `connectionId` and ends it through finishJob at `at`. */
  async function runEnded(connectionId: string, jobType: 'full' | 'incremental', trigger: 'schedule' | 'api', at: number) {
    const id = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, scheduled_at, started_at, created_at)
       values ($1, $2, 'acme', $3, $4, 'running', $5, $5, $5)`,
      [id, connectionId, jobType, trigger, new Date(at - MINUTE)],
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    expect(await finishJob(deps)({ jobId: id, outcome: 'completed', at, startedAt: at - MINUTE })).toBe('completed');
  }

  it('full_sync_every counts runs and the last run stays known after retention deleted their jobs', async () => {
    const now = Date.now();
    // Weekly, a day from now: no slot between the last run (two days ago) and now, whatever the
    // day and hour the test runs (a fixed weekday's slot fell in between two days a week).
    const slot = new Date(now + DAY);
    const cron = `${slot.getUTCMinutes()} ${slot.getUTCHours()} * * ${slot.getUTCDay()}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, metadata, created_at) values ('acme', 'demo', $1, $2, $3) returning id`,
      [`app_${randomUUID().slice(0, 8)}`, { sync: { cron, timezone: 'UTC', full_sync_every: 10 } }, new Date(now - 60 * DAY)],
    );
    const id = rows[0]!.id;
    await runEnded(id, 'full', 'schedule', now - 40 * DAY);
    for (const daysAgo of [33, 26, 19, 12, 5, 2]) await runEnded(id, 'incremental', 'schedule', now - daysAgo * DAY);
    await runEnded(id, 'incremental', 'api', now - 1.5 * DAY); // beside the schedule: not one of its runs
    const { deps } = testActivityDeps({ pool: db.pool });
    await deleteOldJobs(deps)({ at: now, retentionDays: 1 });
    expect((await db.pool.query('select count(*)::int as n from sync_jobs where connection_id = $1', [id])).rows[0].n).toBe(0);

    const ctx = (await openCycle(deps)({ connectionId: id, at: now, cleanup: false, runId: 'test' }))!;
    const plan = planNextRun({
      now, schedule: ctx.schedule!, lastFinishedAt: ctx.lastFinishedAt ?? undefined,
      activationReference: ctx.createdAt, jitterPctMin: 0, jitterPctMax: 0, random: () => 0,
    });
    expect({ schedule: ctx.schedule, lastFinishedAt: ctx.lastFinishedAt, fullSync: ctx.fullSync, mode: plan.mode, atOnce: plan.scheduledAt <= now }).toEqual({
      schedule: { kind: 'cron', cron, timezone: 'UTC', fullSyncEvery: 10 },
      lastFinishedAt: now - 2 * DAY,
      fullSync: { scheduledRunsSinceFull: 6, lastFullAt: now - 40 * DAY },
      mode: 'normal',
      atOnce: false,
    });
  });
});

describe('a legacy updateSchedule change (an older API, the CLI) is stored through the one parser and writer', () => {
  it('over the maximum it is not stored; a cron keeps the stored time zone and full_sync_every', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, metadata) values ('acme', 'demo', $1, $2) returning id`,
      [`app_${randomUUID().slice(0, 8)}`, { sync: { cron: '0 3 * * *', timezone: 'Europe/Berlin', full_sync_every: '7d' } }],
    );
    const id = rows[0]!.id;
    const { deps } = testActivityDeps({ pool: db.pool });
    const open = (schedule: { interval_seconds: number } | { cron: string }) =>
      openCycle(deps)({ connectionId: id, at: Date.now(), cleanup: false, runId: 'test', schedule });
    const sync = async () => (await db.pool.query(`select metadata -> 'sync' as sync from connections where id = $1`, [id])).rows[0].sync;

    const refused = await open({ interval_seconds: deps.settings.maxOverriddenIntervalSeconds + 1 });
    expect({ schedule: refused?.schedule, sync: await sync() }).toEqual({
      schedule: { kind: 'cron', cron: '0 3 * * *', timezone: 'Europe/Berlin', fullSyncEvery: '7d' },
      sync: { cron: '0 3 * * *', timezone: 'Europe/Berlin', full_sync_every: '7d' },
    });
    const cron = await open({ cron: ' 30 2 * * * ' });
    expect(cron?.schedule).toEqual({ kind: 'cron', cron: '30 2 * * *', timezone: 'Europe/Berlin', fullSyncEvery: '7d' });
    const interval = await open({ interval_seconds: 600 });
    expect({ schedule: interval?.schedule, sync: await sync() }).toEqual({
      schedule: { kind: 'interval', intervalSeconds: 600, fullSyncEvery: '7d' },
      sync: { interval_seconds: 600, full_sync_every: '7d' },
    });
  });
});
