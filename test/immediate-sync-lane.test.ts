// Immediate syncs have a lane of their own in every worker process: their own task queue (their
// workflow tasks and their activity), slots, workflow thread and database pool. A caller waiting
// on one does not queue behind scheduled work, however much of it is backed up, nor wait for a
// connection that a tenant's running jobs hold. Here the scheduled work's queue has no worker at
// all and every connection of its pool is held: the API still answers an immediate sync.
import type { Worker } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../db/pool';
import { createImmediateWorker } from '../workers/create-worker';
import { startTestApi, type TestApi } from './helpers/api';
import type { TestDatabase } from './helpers/database';
import { useServers } from './helpers/stack';
import { testActivityDeps } from './helpers/deps';
import { synctideBundle } from './helpers/worker';

const QUEUE = 'lane-scheduled';
const IMMEDIATE_QUEUE = 'lane-immediate';

describe("immediate syncs' own lane", () => {
  const servers = useServers();
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let scheduledPool: Pool;
  let immediatePool: Pool;
  let immediate: { worker: Worker; running: Promise<void> } | undefined;
  let api: TestApi;
  beforeAll(async () => {
    ({ env, db } = servers);
    // The scheduled work's pool has one connection, which the test's "running jobs" hold.
    scheduledPool = createPool(db.url, 1);
    immediatePool = createPool(db.url, 2);
    const { deps, registry } = testActivityDeps({ pool: scheduledPool, temporal: env.client, taskQueue: QUEUE });
    const worker = await createImmediateWorker({
      connection: env.nativeConnection,
      namespace: 'default',
      shutdownGraceSeconds: 5,
      workflowBundle: await synctideBundle(),
      activities: deps,
      taskQueue: IMMEDIATE_QUEUE,
      slots: 1,
      pool: immediatePool,
    });
    immediate = { worker, running: worker.run() };
    // No worker polls QUEUE: whatever the API started there would wait until its deadline (5 s).
    api = await startTestApi({ env, db, worker, registry, metrics: deps.metrics, lines: [] }, QUEUE, {
      immediateTaskQueue: IMMEDIATE_QUEUE,
      immediateSyncTimeoutMs: 5000,
    });
  });
  afterAll(async () => {
    await api?.server.close();
    if (immediate?.worker.getState() === 'RUNNING') immediate.worker.shutdown();
    await immediate?.running;
    await Promise.all([scheduledPool?.end(), immediatePool?.end()]);
  });

  it("answers while nothing serves the scheduled work's queue and its pool is held", async () => {
    const created = await api.call('POST', '/connections', {
      tenant_id: 'quiet',
      app_key: 'q1',
      provider: 'demo',
      config: { resource_types: ['items'], records_per_resource: 3, page_size: 2 },
      schedule: { interval_seconds: 86_400 },
      status: 'paused',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await db.pool.query(`update connections set status = 'active' where id = $1`, [created.body.id]);
    const held = await scheduledPool.connect();
    try {
      const res = await api.call('POST', '/sync', { app_key: 'q1', tenant_id: 'quiet', mode: 'full', immediate: true });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(JSON.stringify(res.body)).toContain('"items"');
      expect(scheduledPool.totalCount).toBe(1);
      expect(scheduledPool.waitingCount).toBe(0);
    } finally {
      held.release();
    }
    const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from records where connection_id = $1`, [created.body.id]);
    expect(rows[0]!.n).toBe(3);
    // Its workflow ran on the immediate syncs' queue.
    const described = await env.client.workflow.getHandle(`immediate-sync:${created.body.id}`).describe();
    expect(described.taskQueue).toBe(IMMEDIATE_QUEUE);
  });
});
