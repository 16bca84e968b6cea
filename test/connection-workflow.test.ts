// The connection scheduler on Temporal's time-skipping server with real Postgres (seed 000 at the
// workflow level). Time advances only through env.sleep, after a query shows the workflow waits.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureConnectionWorkflow } from '../lib/connection-workflows';
import type { ConnectionState } from '../workflows/connection';
import { connectionWorkflowId } from '../workflows/ids';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { createTimeSkippingEnv } from './helpers/temporal';
import { createTestWorker, eventually, type LogLines } from './helpers/worker';

const TASK_QUEUE = 'connection-wf';
const MINUTE = 60_000;

describe('connection workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let worker: Worker;
  let lines: LogLines;
  let running: Promise<void>;

  beforeAll(async () => {
    [env, db] = await Promise.all([createTimeSkippingEnv(), createTestDatabase()]);
    ({ worker, lines } = await createTestWorker({
      connection: env.nativeConnection,
      client: env.client,
      pool: db.pool,
      taskQueue: TASK_QUEUE,
    }));
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await env?.teardown();
    await db?.drop();
  });

  let seq = 0;
  async function newConnection(sync: Record<string, unknown> = { interval_seconds: 900 }) {
    seq += 1;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, metadata, created_at)
       values ('acme', 'demo', $1, $2, $3) returning id`,
      [`app${seq}`, { sync }, new Date(await env.currentTimeMs())],
    );
    const id = rows[0]!.id;
    const handle = await ensureConnectionWorkflow(env.client, TASK_QUEUE, { id, tenantId: 'acme', providerSlug: 'demo' });
    return { id, handle };
  }

  const query = (id: string) =>
    env.client.workflow.getHandle(connectionWorkflowId(id)).query<ConnectionState>('state');

  /** Waits (real time, no skipping) until the workflow's query satisfies `ok`. */
  const waitForState = (id: string, ok: (s: ConnectionState) => boolean) =>
    eventually(async () => {
      const s = await query(id).catch(() => undefined);
      return s && ok(s) ? s : undefined;
    });

  async function jobs(connectionId: string) {
    const { rows } = await db.pool.query(
      `select id, job_type, trigger, status, scheduled_at, started_at, finished_at, last_error, abandoned_at
         from sync_jobs where connection_id = $1 order by created_at, scheduled_at`,
      [connectionId],
    );
    return rows;
  }

  it('bootstraps at once, then runs 4 cycles in one simulated hour with jitter in bounds', async () => {
    const { id } = await newConnection();
    // Bootstrap job runs at once; then the workflow sleeps until L + 15 min + jitter.
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await env.sleep(58 * MINUTE);
    const state = await waitForState(id, (s) => s.phase === 'sleeping' && s.cycles >= 4);
    const rows = await jobs(id);
    const done = rows.filter((r) => r.status === 'completed');
    expect(done).toHaveLength(4);
    expect(state.cycles).toBe(4);
    expect(rows.filter((r) => r.status === 'queued')).toHaveLength(1);
    for (let i = 1; i < done.length; i++) {
      const gapSeconds = (done[i].scheduled_at.getTime() - done[i - 1].finished_at.getTime()) / 1000;
      expect(gapSeconds).toBeGreaterThanOrEqual(900);
      expect(gapSeconds).toBeLessThanOrEqual(900 + 180);
    }
    expect(state.last_jitter_seconds).toBeGreaterThanOrEqual(0);
    expect(state.last_jitter_seconds).toBeLessThanOrEqual(180);
    expect(state.last_outcome).toBe('completed');
    const { rows: meta } = await db.pool.query(`select metadata -> 'sync' as sync from connections where id = $1`, [id]);
    expect(meta[0].sync.last_jitter_seconds).toBe(state.last_jitter_seconds);
    expect(meta[0].sync.next_run_at).toBe(state.next_run_at);
    expect(lines.some((l) => l.msg === 'sync job enqueued' && l.connection_id === id)).toBe(true);
  });
});
