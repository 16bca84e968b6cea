// What the scheduler's enqueue excludes by locking its connection's row FOR NO KEY UPDATE (SKIP
// LOCKED) until it commits, and why no weaker mode will do while the enqueue writes `next_run_at`
// into that row: a disable that comes while the enqueue holds the row waits for it (so the disable's
// cancel of queued jobs sees the enqueued one: FOR KEY SHARE would let it commit between the
// enqueue's status check and its insert), and a requested job of the same type waits for it too
// (so the enqueue's write of the row never waits for the request, itself waiting for the
// enqueue's job in the one-active-job index: under FOR SHARE the two deadlocked). Real Postgres;
// the enqueue is held at a point of its transaction, the other side seen waiting in pg_stat_activity.
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { describe, expect, it } from 'vitest';
import { enqueueJob } from '../activities/enqueue-job';
import { writeDisabled } from '../commands/connections';
import { findConnection } from '../db/models/connections';
import { insertRequestedJob } from '../db/models/jobs';
import type { Pool } from '../db/pool';
import { withTransaction } from '../db/transaction';
import { DEFAULT_SCHEDULE_SETTINGS, planNextRun, toPlannedRun } from '../policy/schedule';
import type { EnqueueJobInput } from '../temporal/activities';
import { syncJobWorkflowId } from '../temporal/ids';
import { useTestDatabase } from './helpers/database';
import { TEST_KEYRING, testActivityDeps } from './helpers/deps';
import { feedCursors } from '../lib/feed-cursors';
import { eventually } from './helpers/worker';

const db = useTestDatabase();

async function activeConnection(): Promise<{ id: string; tenant: string }> {
  const tenant = `enqueue-lock-${randomUUID().slice(0, 8)}`;
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, status, metadata)
     values ($1, 'github', 'app', 'active', '{"sync": {"interval_seconds": 900}}') returning id`,
    [tenant],
  );
  return { id: rows[0]!.id, tenant };
}

/** The scheduler's enqueue of an incremental job due now, with its plan (written into the row). */
function scheduledEnqueue(connectionId: string): EnqueueJobInput {
  const now = Date.now();
  const planned = planNextRun({
    now, schedule: { kind: 'interval', intervalSeconds: 900 }, activationReference: now,
    jitterPctMin: DEFAULT_SCHEDULE_SETTINGS.jitterPctMin, jitterPctMax: DEFAULT_SCHEDULE_SETTINGS.jitterPctMax, random: () => 0,
  });
  return { jobId: randomUUID(), connectionId, jobType: 'incremental', trigger: 'schedule', scheduledAt: now, at: now, plan: toPlannedRun(planned) };
}

/**
 * `db.pool` whose transactions stop before their first statement matching `gate` until `open()`;
 * `reached` resolves when one does.
 */
function gatedPool(gate: RegExp): { pool: Pool; reached: Promise<void>; open: () => void } {
  let arrive!: () => void;
  const reached = new Promise<void>((resolve) => (arrive = resolve));
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const bound = <T extends object>(target: T, prop: string | symbol) => {
    const value = Reflect.get(target, prop, target) as unknown;
    return typeof value === 'function' ? value.bind(target) : value;
  };
  const pool = new Proxy(db.pool, {
    get: (target, prop) => prop !== 'connect' ? bound(target, prop) : async () => {
      const client = await target.connect();
      return new Proxy(client, {
        get: (c: PoolClient, key) => key !== 'query' ? bound(c, key) : async (text: unknown, ...rest: unknown[]) => {
          if (typeof text === 'string' && gate.test(text)) {
            arrive();
            await opened;
          }
          return (c.query as (...args: unknown[]) => Promise<unknown>)(text, ...rest);
        },
      });
    },
  });
  return { pool, reached, open };
}

/** Resolves once another session of this database waits for a lock in a statement like `like`. */
const waitingFor = (like: string) => eventually(async () => {
  const { rows } = await db.pool.query(
    `select 1 from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock' and query ilike $1 and pid <> pg_backend_pid()`,
    [like],
  );
  return rows.length > 0 ? true : undefined;
});

describe("the scheduler's enqueue holds its connection's row against", () => {
  it('a disable, which waits for it and then cancels the job it enqueued', async () => {
    const conn = await activeConnection();
    const row = (await findConnection(db.pool, conn.id))!;
    // The enqueue has found the connection active and not paused; it stops before its insert.
    const gated = gatedPool(/^\s*insert into sync_jobs/);
    const { deps } = testActivityDeps({ pool: gated.pool });
    const enqueue = enqueueJob(deps)(scheduledEnqueue(conn.id)).then((r) => r.outcome, (err: Error) => `enqueue failed: ${err.message}`);
    await gated.reached;
    const disable = withTransaction(db.pool, (tx) => writeDisabled(tx, row, feedCursors(TEST_KEYRING))).then(() => 'disabled', (err: Error) => `disable failed: ${err.message}`);
    // The disable waits for the enqueue's lock (or, were the lock too weak, commits at once).
    await Promise.race([disable, waitingFor('%update connections%')]);
    gated.open();
    expect([await enqueue, await disable]).toEqual(['enqueued', 'disabled']);
    const { rows } = await db.pool.query<{ status: string; last_error: string }>('select status, last_error from sync_jobs where connection_id = $1', [conn.id]);
    expect(rows).toEqual([{ status: 'cancelled', last_error: 'connection disabled' }]);
  });

  it("a requested job of the same type, which waits for it, so the enqueue's write of next_run_at never waits for the request", async () => {
    const conn = await activeConnection();
    // The enqueue has inserted its job; it stops before writing next_run_at into the row.
    const gated = gatedPool(/^\s*update connections\s+set metadata/);
    const { deps } = testActivityDeps({ pool: gated.pool });
    const enqueue = enqueueJob(deps)(scheduledEnqueue(conn.id)).then((r) => r.outcome, (err: Error) => `enqueue failed: ${err.message}`);
    await gated.reached;
    const id = randomUUID();
    const request = insertRequestedJob(db.pool, {
      id, workflowId: syncJobWorkflowId(id), connectionId: conn.id, tenantId: conn.tenant, jobType: 'incremental', trigger: 'api', scheduledAt: null,
    }).then((job) => (job ? 'inserted' : 'not inserted'), (err: Error) => `request failed: ${err.message}`);
    await waitingFor('%insert into sync_jobs%');
    gated.open();
    // The request then finds the enqueued job active: it writes nothing (the API answers with that job).
    expect([await enqueue, await request]).toEqual(['enqueued', 'not inserted']);
    const { rows } = await db.pool.query<{ trigger: string; status: string }>('select trigger, status from sync_jobs where connection_id = $1', [conn.id]);
    expect(rows).toEqual([{ trigger: 'schedule', status: 'queued' }]);
  });
});
