// A connection's first sync reads everything (no cursor yet), as a full sync does, and is recorded
// and counted as the full sync it is: on Temporal's time-skipping server with real Postgres and
// the demo connector, `full_sync_every` counts its runs from that first sync.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { prepareJob } from '../activities/prepare-job';
import type { TestDatabase } from './helpers/database';
import { useConnectionWorkflows } from './helpers/connection-workflows';
import { testActivityDeps } from './helpers/deps';
import { useWorkerStack } from './helpers/stack';

const TASK_QUEUE = 'first-sync-full';
const MINUTE = 60_000;

describe('first sync of a connection (time-skipping)', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  beforeAll(() => {
    ({ env, db } = stack);
  });

  const { newConnection, jobs, waitForState } = useConnectionWorkflows(stack, TASK_QUEUE);

  it('is recorded as full, and full_sync_every: 3 makes the third run after it the next full sync', async () => {
    const { id } = await newConnection({ sync: { interval_seconds: 900, full_sync_every: 3 } });
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const { rows: runs } = await db.pool.query(`select runs_since_full, last_full_at from connection_schedule_runs where connection_id = $1`, [id]);
    const afterFirst = { runsSinceFull: runs[0]?.runs_since_full, lastFullRecorded: runs[0]?.last_full_at != null };
    await env.sleep(75 * MINUTE);
    await waitForState(id, (s) => s.cycles >= 5 && s.phase === 'sleeping');
    const done = (await jobs(id)).filter((j) => j.trigger === 'schedule' && j.status === 'completed').map((j) => j.job_type);
    expect({ afterFirst, runs: done.slice(0, 5) }).toEqual({
      afterFirst: { runsSinceFull: 0, lastFullRecorded: true },
      runs: ['full', 'incremental', 'incremental', 'full', 'incremental'],
    });
  });

  it('stays incremental when another full job of the connection is active (one active job per connection and type): that one is the full sync', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config, metadata) values ('acme', 'demo', 'no-workflow', '{}', '{}') returning id`,
    );
    const connectionId = rows[0]!.id;
    const [full, incremental] = [randomUUID(), randomUUID()];
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status) values ($1, $3, 'acme', 'full', 'api', 'running'), ($2, $3, 'acme', 'incremental', 'api', 'queued')`,
      [full, incremental, connectionId],
    );
    const prepared = await prepareJob(testActivityDeps({ pool: db.pool }).deps)({ jobId: incremental, at: Date.now() });
    const { rows: types } = await db.pool.query(`select id, job_type from sync_jobs where connection_id = $1`, [connectionId]);
    expect({ mode: prepared.mode, types: Object.fromEntries(types.map((t) => [t.id, t.job_type])) }).toEqual({
      mode: 'incremental',
      types: { [full]: 'full', [incremental]: 'incremental' },
    });
  });
});
