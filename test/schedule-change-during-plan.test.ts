// A schedule stored over the API between a run's read of its connection and the enqueue of the job
// it planned from that read, with the API's `replan` lost: on Temporal's time-skipping server with
// real Postgres. A file of its own: it holds back the worker's enqueue.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { updateConnection } from '../db/models/connections';
import type { TestDatabase } from './helpers/database';
import { useConnectionWorkflows } from './helpers/connection-workflows';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'schedule-change-during-plan';
const HOUR = 3600_000;

describe('a schedule change between a run\'s read and its enqueue (time-skipping)', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  beforeAll(() => {
    ({ env, db } = stack);
  });

  const { newConnection, waitForState } = useConnectionWorkflows(stack, TASK_QUEUE);
  const queued = async (id: string) =>
    (await db.pool.query<{ scheduled_at: Date }>(`select scheduled_at from sync_jobs where connection_id = $1 and status = 'queued'`, [id])).rows[0];

  it('the next reconcile tick sends `replan` and the queued job moves to the stored schedule', async () => {
    const { id, handle } = await newConnection({ sync: { interval_seconds: 86_400 } });
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await db.pool.query(`update connections set status = 'paused' where id = $1`, [id]);
    await handle.signal('pause');
    await waitForState(id, (s) => s.phase === 'paused' && s.pending.length === 0);
    // The resumed run reads the daily schedule; its enqueue's transaction has not begun (held before
    // it takes a connection) when the API stores every 15 minutes, and the API's `replan` is lost.
    const pool = db.pool;
    const connect = pool.connect.bind(pool);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let held!: () => void;
    const enqueueHeld = new Promise<void>((resolve) => (held = resolve));
    pool.connect = ((...args: Parameters<typeof connect>) => {
      if (!/enqueue-job/.test(new Error().stack ?? '')) return connect(...args);
      held();
      return released.then(() => connect(...args));
    }) as typeof pool.connect;
    try {
      await pool.query(`update connections set status = 'active' where id = $1`, [id]);
      await handle.signal('resume');
      await enqueueHeld;
      await updateConnection(pool, id, { schedule: { kind: 'interval', intervalSeconds: 900 } });
    } finally {
      release();
      pool.connect = connect as typeof pool.connect;
    }
    await waitForState(id, (s) => s.phase === 'sleeping' && s.scheduled_at !== null);
    const now = await env.currentTimeMs();
    const planned = (await queued(id))!.scheduled_at.getTime();
    // The job was planned from the daily schedule the run read.
    expect(planned - now).toBeGreaterThan(12 * HOUR);
    // More than a minute later (both times moved back, their order kept), the tick looks.
    await db.pool.query(
      `update connections set schedule_changed_at = schedule_changed_at - interval '2 minutes', schedule_planned_at = schedule_planned_at - interval '2 minutes' where id = $1`,
      [id],
    );
    const tick = await stack.tick();
    expect(tick.replanned ?? 0).toBe(1);
    await eventually(async () => ((await queued(id))?.scheduled_at.getTime() ?? Infinity) < now + HOUR ? true : undefined);
    // Re-planned from the stored schedule: the next tick has nothing to send.
    await waitForState(id, (s) => s.phase === 'sleeping' && s.pending.length === 0);
    expect((await stack.tick()).replanned ?? 0).toBe(0);
  });
});
