// A schedule change racing a syncNow job's enqueue, on Temporal's time-skipping server with real
// Postgres. A file of its own: it holds a table lock that stalls the worker's local activities for
// a while, and a test after it in the same file and worker must not wait behind what it leaves.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { updateConnection } from '../db/models/connections';
import { connectionWorkflowId } from '../temporal/ids';
import type { TestDatabase } from './helpers/database';
import { useConnectionWorkflows } from './helpers/connection-workflows';
import { useWorkerStack } from './helpers/stack';
import { recordHistory } from './helpers/histories';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'connection-replan-race';
const MINUTE = 60_000;

describe('connection workflow: a schedule change while a syncNow job is enqueued (time-skipping)', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  beforeAll(() => {
    ({ env, db } = stack);
  });

  const { newConnection, waitForState } = useConnectionWorkflows(stack, TASK_QUEUE);

  it('a schedule change that arrives while a syncNow job is being enqueued leaves that job to run now, not at the next slot', async () => {
    const { id, handle } = await newConnection({ sync: { interval_seconds: 3600 } });
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await db.pool.query(`update connections set status = 'paused' where id = $1`, [id]);
    await handle.signal('pause');
    await waitForState(id, (s) => s.phase === 'paused' && s.pending.length === 0);
    const racedRun = (await handle.describe()).runId;
    // Holds the enqueue of the next job (its first statement reads sync_jobs) until the schedule
    // change has reached the workflow: the change arrives while the syncNow job is being enqueued.
    const blocker = await db.pool.connect();
    let requestedAt: number;
    let manual: { id: string; scheduled_at: Date; status: string } | undefined;
    try {
      await blocker.query('begin');
      await blocker.query('lock table sync_jobs in access exclusive mode');
      await db.pool.query(`update connections set status = 'active' where id = $1`, [id]);
      requestedAt = await env.currentTimeMs();
      await handle.signal('syncNow', { mode: 'incremental' });
      await handle.signal('resume');
      await eventually(async () => {
        const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from pg_locks
            where database = (select oid from pg_database where datname = current_database()) and relation = 'sync_jobs'::regclass and not granted`);
        return rows[0]!.n > 0 ? true : undefined;
      });
      await updateConnection(db.pool, id, { schedule: { kind: 'interval', intervalSeconds: 7200 } });
      await handle.signal('replan');
      // A slow enqueue (here a held lock; in production a Postgres blip and the local activity's
      // retries) outlasts its workflow task, which the worker renews: the renewal delivers the signal.
      await eventually(async () => {
        const events = (await handle.fetchHistory()).events ?? [];
        const signalled = events.findIndex((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'replan');
        return signalled >= 0 && events.slice(signalled).some((e) => e.workflowTaskStartedEventAttributes) ? true : undefined;
      });
    } finally {
      await blocker.query('rollback');
      blocker.release();
    }
    // The syncNow job either runs (a second cycle) or was moved to the next slot, hours away.
    await eventually(async () => {
      const { rows } = await db.pool.query(
        `select id, scheduled_at, status from sync_jobs where connection_id = $1 and trigger = 'manual'`,
        [id],
      );
      manual = rows[0];
      if (!manual) return undefined;
      return manual.status === 'completed' || manual.scheduled_at.getTime() > requestedAt + 30 * MINUTE ? true : undefined;
    });
    await recordHistory(env.client, 'connection-replan-while-sync-now-enqueued', connectionWorkflowId(id), racedRun);
    expect({ status: manual!.status, scheduledWithinMinutesOfRequest: manual!.scheduled_at.getTime() - requestedAt! < 30 * MINUTE }).toEqual({
      status: 'completed',
      scheduledWithinMinutesOfRequest: true,
    });
  });
});
