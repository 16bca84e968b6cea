// An immediate sync's statements run on a pool of their own: a tenant's running jobs holding
// every connection of the scheduled work's pool do not hold up another tenant's waiting caller.
import type { Worker } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../db/pool';
import { startImmediateSync } from '../temporal/client';
import { createImmediateWorker, createWorker } from '../workers/create-worker';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { createDevServerEnv } from './helpers/temporal';
import { synctideBundle } from './helpers/worker';

const QUEUE = 'immediate-pool';
const IMMEDIATE_QUEUE = 'immediate-pool-immediate';

describe("immediate syncs' own pool", () => {
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let scheduledPool: Pool;
  let immediatePool: Pool;
  const workers: { worker: Worker; running: Promise<void> }[] = [];
  beforeAll(async () => {
    [env, db] = await Promise.all([createDevServerEnv(), createTestDatabase()]);
    // The scheduled work's pool has one connection; the test's "running jobs" hold it throughout.
    scheduledPool = createPool(db.url, 1);
    immediatePool = createPool(db.url, 2);
    const { deps } = testActivityDeps({ pool: scheduledPool, temporal: env.client, taskQueue: QUEUE });
    const common = { connection: env.nativeConnection, namespace: 'default', shutdownGraceSeconds: 5, activities: deps };
    const worker = await createWorker({ ...common, workflowBundle: await synctideBundle() });
    const immediate = await createImmediateWorker({ ...common, taskQueue: IMMEDIATE_QUEUE, slots: 1, pool: immediatePool });
    for (const w of [worker, immediate]) workers.push({ worker: w, running: w.run() });
  });
  afterAll(async () => {
    for (const { worker } of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await Promise.all(workers.map((w) => w.running));
    await env?.teardown();
    await Promise.all([scheduledPool?.end(), immediatePool?.end()]);
    await db?.drop();
  });

  it('answers while the scheduled work holds every connection of its own pool', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config)
       values ('quiet', 'demo', 'q1', '{"resource_types": ["items"], "records_per_resource": 3, "page_size": 2}') returning id`,
    );
    const held = await scheduledPool.connect();
    try {
      // Were the sync to need the scheduled pool, it would wait until its execution timeout ends it.
      const handle = await startImmediateSync(env.client, QUEUE, { connectionId: rows[0]!.id, mode: 'full', activityTaskQueue: IMMEDIATE_QUEUE }, 30_000);
      const result = await handle!.result();
      expect(result.resources).toEqual([{ resourceType: 'items', entityCount: 3, writtenCount: 3, pages: 2 }]);
      expect(scheduledPool.totalCount).toBe(1);
      expect(scheduledPool.waitingCount).toBe(0);
    } finally {
      held.release();
    }
    const { rows: stored } = await db.pool.query<{ n: number }>(`select count(*)::int as n from records where connection_id = $1`, [rows[0]!.id]);
    expect(stored[0]!.n).toBe(3);
  });
});
