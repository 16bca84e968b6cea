// WORKER_TARGET_CPU on a real worker: the scheduled lane's activity (and workflow-task) slots come
// from Temporal's resource-based supplier, which hands out its minimum whatever the CPU use and more
// only while the measured CPU use is under the target. With a target no machine running these tests stays under
// (1 %), the first jobs of eight slow connections created at once run a few at a time instead of
// all eight together, and every one of them still runs to the end.
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIN_SCHEDULED_ACTIVITY_SLOTS } from '../workers/create-worker';
import { startTestApi, type TestApi } from './helpers/api';
import { useServers } from './helpers/stack';
import { createTestWorker, eventually } from './helpers/worker';

const QUEUE = 'cpu-target';
const JOBS = 8;
/** Six pages 250 ms apart: each job's activity runs about 1.5 s, so that all eight would overlap. */
const SLOW = { resource_types: ['items'], records_per_resource: 6, page_size: 1, latency_ms: 250 };

describe('WORKER_TARGET_CPU', () => {
  const servers = useServers();
  let worker: Worker;
  let running: Promise<void>;
  let api: TestApi;
  beforeAll(async () => {
    const { env, db } = servers;
    const created = await createTestWorker({ connection: env.nativeConnection, client: env.client, pool: db.pool, taskQueue: QUEUE, activitySlots: JOBS, targetCpu: 0.01 });
    worker = created.worker;
    running = worker.run();
    api = await startTestApi({ env, db, worker, registry: created.registry, metrics: created.metrics, lines: created.lines }, QUEUE);
  });
  afterAll(async () => {
    await api?.server.close();
    if (worker?.getState() === 'RUNNING') worker.shutdown();
    await running;
  });

  it('holds the scheduled lane to its minimum of activities while the CPU is over the target, and runs every job to the end', async () => {
    // Created active, each connection's workflow runs its first (bootstrap) job at once.
    const ids: string[] = [];
    for (let i = 1; i <= JOBS; i++) {
      const res = await api.call('POST', '/connections', { tenant_id: 'busy', app_key: `slow-${i}`, provider: 'demo', config: SLOW, schedule: { interval_seconds: 86_400 } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      ids.push(res.body.id);
    }
    let most = 0;
    const sampler = setInterval(() => {
      most = Math.max(most, worker.getStatus().numInFlightNonLocalActivities);
    }, 20);
    try {
      await eventually(
        async () => {
          const { rows } = await servers.db.pool.query<{ n: number }>(`select count(distinct connection_id)::int as n from sync_jobs where connection_id = any($1::uuid[]) and status = 'completed'`, [ids]);
          return rows[0]!.n === JOBS ? true : undefined;
        },
        {
          timeoutMs: 60_000,
          describe: () => servers.db.pool.query(`select connection_id, status, last_error from sync_jobs where connection_id = any($1::uuid[])`, [ids]).then((r) => r.rows),
        },
      );
    } finally {
      clearInterval(sampler);
    }
    // The minimum always runs (progress on a saturated node); the rest waited for CPU under the target.
    expect(most).toBeGreaterThanOrEqual(MIN_SCHEDULED_ACTIVITY_SLOTS);
    expect(most).toBeLessThan(JOBS);
    const { rows } = await servers.db.pool.query<{ n: number }>(`select count(*)::int as n from records where connection_id = any($1::uuid[])`, [ids]);
    expect(rows[0]!.n).toBe(JOBS * SLOW.records_per_resource);
  }, 90_000);
});
