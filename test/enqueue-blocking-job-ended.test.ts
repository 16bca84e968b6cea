// The scheduler's enqueue whose insert a job of its type refuses, when that job ends before the
// enqueue reads it to answer: the ended job answers nothing, so the insert is tried again (the
// enqueue then gets its job), and when each try finds a job of the type that has ended once read,
// it answers `locked` (its run looks again soon), never an exception that fails the activity. The
// job's end is made to fall exactly between the refused insert and the read by a pool that ends it
// just after the insert's statement, from another session, while the enqueue's transaction is open.
// Real Postgres; no Temporal (the activity is called directly).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { enqueueJob } from '../activities/enqueue-job';
import { finishRunningJob } from '../db/models/jobs';
import { withTransaction } from '../db/transaction';
import { DEFAULT_SCHEDULE_SETTINGS, planNextRun, toPlannedRun } from '../policy/schedule';
import type { EnqueueJobInput } from '../temporal/activities';
import { syncJobWorkflowId } from '../temporal/ids';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { poolWithHook } from './helpers/pool-hooks';

const db = useTestDatabase();

async function activeConnection(): Promise<{ id: string; tenant: string }> {
  const tenant = `enqueue-ended-${randomUUID().slice(0, 8)}`;
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, status, metadata)
     values ($1, 'github', 'app', 'active', '{"sync": {"interval_seconds": 900}}') returning id`,
    [tenant],
  );
  return { id: rows[0]!.id, tenant };
}

/** A running incremental job requested over the API: it blocks the scheduler's incremental enqueue. */
async function runningApiJob(conn: { id: string; tenant: string }): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id, started_at)
     values ($1, $2, $3, 'incremental', 'api', 'running', $4, now())`,
    [id, conn.id, conn.tenant, syncJobWorkflowId(id)],
  );
  return id;
}

/** Ends running job `id` as its workflow does, in a transaction of another session. */
const complete = (id: string) => withTransaction(db.pool, (tx) => finishRunningJob(tx, id, 'completed', new Date(), null));

/** The scheduler's enqueue of an incremental job due now, with its plan. */
function scheduledEnqueue(connectionId: string): EnqueueJobInput {
  const now = Date.now();
  const planned = planNextRun({
    now, schedule: { kind: 'interval', intervalSeconds: 900 }, activationReference: now,
    jitterPctMin: DEFAULT_SCHEDULE_SETTINGS.jitterPctMin, jitterPctMax: DEFAULT_SCHEDULE_SETTINGS.jitterPctMax, random: () => 0,
  });
  return { jobId: randomUUID(), connectionId, jobType: 'incremental', trigger: 'schedule', scheduledAt: now, at: now, plan: toPlannedRun(planned) };
}

const INSERT = /^\s*insert into sync_jobs/;

describe("the scheduler's enqueue whose blocking job ends before it is read", () => {
  it('tries the insert again and enqueues its job', async () => {
    const conn = await activeConnection();
    const blocking = await runningApiJob(conn);
    let ended = 0;
    const pool = poolWithHook(db.pool, 'after', INSERT, async () => {
      ended += (await complete(blocking)) ? 1 : 0;
    });
    const input = scheduledEnqueue(conn.id);
    const answer = await enqueueJob(testActivityDeps({ pool }).deps)(input).catch((err: Error) => `enqueue failed: ${err.message}`);

    expect(ended).toBe(1);
    expect(answer).toEqual({ outcome: 'enqueued', jobId: input.jobId });
    const { rows } = await db.pool.query<{ id: string; trigger: string; status: string }>(
      `select id, trigger, status from sync_jobs where connection_id = $1 order by created_at, id`,
      [conn.id],
    );
    expect(rows).toEqual([
      { id: blocking, trigger: 'api', status: 'completed' },
      { id: input.jobId, trigger: 'schedule', status: 'queued' },
    ]);
    const { rows: [row] } = await db.pool.query<{ next_run_at: string | null }>(`select metadata->'sync'->>'next_run_at' as next_run_at from connections where id = $1`, [conn.id]);
    expect(row!.next_run_at).toBe(new Date(input.plan!.nextRunAt).toISOString());
  });

  it('answers locked (look again soon) when each job that refuses its insert has ended when read', async () => {
    const conn = await activeConnection();
    // Before each insert of the enqueue a job of its type starts; after the insert refused, it ends.
    let blocking: string | null = null;
    let started = 0;
    const ending = poolWithHook(db.pool, 'after', INSERT, async () => {
      if (blocking) await complete(blocking);
    }, 1000);
    const pool = poolWithHook(ending, 'before', INSERT, async () => {
      blocking = await runningApiJob(conn);
      started += 1;
    }, 1000);
    const input = scheduledEnqueue(conn.id);
    const answer = await enqueueJob(testActivityDeps({ pool }).deps)(input).catch((err: Error) => `enqueue failed: ${err.message}`);

    expect(answer).toEqual({ outcome: 'locked' });
    expect(started).toBeGreaterThan(1);
    const { rows } = await db.pool.query<{ n: number }>(
      `select count(*)::int as n from sync_jobs where connection_id = $1 and (trigger <> 'api' or status <> 'completed')`,
      [conn.id],
    );
    expect(rows[0]!.n).toBe(0);
    const { rows: [row] } = await db.pool.query<{ sync: unknown }>(`select metadata->'sync' as sync from connections where id = $1`, [conn.id]);
    expect(row!.sync).toEqual({ interval_seconds: 900 });
  });
});
