// WORKER_TARGET_CPU on real workers: the scheduled and the immediate worker of a process share one
// LaneGate. While an immediate sync runs and the CPU use is over the target, no more than
// MIN_SCHEDULED_ACTIVITIES scheduled activities start (the others wait in the worker); with no
// immediate sync about, every one starts at once; held back, each tenant still starts its share
// (one tenant's long syncs do not keep another's waiting). The target here (0.1 %) is one no
// machine running these tests stays under.
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { activityTenant } from '../activities/activity-tenant';
import { cpuUsage, type CpuUsage } from '../infra/cpu-usage';
import { connectionWorkflowId, syncJobWorkflowId } from '../temporal/ids';
import { MIN_SCHEDULED_ACTIVITIES } from '../policy/lanes';
import { createImmediateWorker } from '../workers/create-worker';
import { LaneGate } from '../workers/lane-gate';
import { startTestApi, type TestApi } from './helpers/api';
import { testActivityDeps } from './helpers/deps';
import { useServers } from './helpers/stack';
import { createTestWorker, eventually, synctideBundle } from './helpers/worker';

const QUEUE = 'lanes';
const IMMEDIATE_QUEUE = 'lanes-immediate';
/** A tenant's slow jobs; the worker has twice as many activity slots, as a deployment has room beyond one tenant's running-job limit (50 of 100). */
const JOBS = 8;
/** Ten pages 250 ms apart: each job's activity runs about 2.5 s, so that all eight would overlap. */
const SLOW = { resource_types: ['items'], records_per_resource: 10, page_size: 1, latency_ms: 250 };
/** An immediate sync of about 8 s (32 pages 250 ms apart): it runs while the jobs above come due. */
const LONG_IMMEDIATE = { resource_types: ['items'], records_per_resource: 32, page_size: 1, latency_ms: 250 };

describe('the lanes of a worker process (WORKER_TARGET_CPU)', () => {
  const servers = useServers();
  const workers: { worker: Worker; running: Promise<void> }[] = [];
  let scheduled: Worker;
  let cpu: CpuUsage;
  let api: TestApi;
  let lanes: LaneGate;
  beforeAll(async () => {
    const { env, db } = servers;
    cpu = cpuUsage();
    lanes = new LaneGate(0.001, cpu.current);
    const created = await createTestWorker({ connection: env.nativeConnection, client: env.client, pool: db.pool, taskQueue: QUEUE, activitySlots: 2 * JOBS, lanes });
    scheduled = created.worker;
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: QUEUE });
    const immediate = await createImmediateWorker({
      connection: env.nativeConnection,
      namespace: 'default',
      shutdownGraceSeconds: 5,
      taskQueue: IMMEDIATE_QUEUE,
      slots: 2,
      lanes,
      activities: deps,
      pool: db.pool,
      workflowBundle: await synctideBundle(),
    });
    for (const w of [scheduled, immediate]) workers.push({ worker: w, running: w.run() });
    api = await startTestApi({ env, db, worker: scheduled, registry: created.registry, metrics: created.metrics, lines: created.lines }, QUEUE, { immediateTaskQueue: IMMEDIATE_QUEUE });
  });
  afterAll(async () => {
    await api?.server.close();
    for (const { worker } of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await Promise.all(workers.map((w) => w.running));
    cpu?.stop();
  });

  let seq = 0;
  /**
   * Creates JOBS slow connections of `tenant` (each runs its first job at once) and returns the ids
   * and the most of their jobs seen paging at once (some records stored, not all) until `until` settles.
   */
  async function slowJobs(tenant: string, until: (ids: string[]) => Promise<unknown>): Promise<{ most: number; ids: string[] }> {
    const ids: string[] = [];
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        if (ids.length > 0) {
          const { rows } = await servers.db.pool.query<{ n: number }>(
            `select count(*)::int as n from (select connection_id from records where connection_id = any($1::uuid[]) group by connection_id having count(*) between 1 and $2) paging`,
            [ids, SLOW.records_per_resource - 1],
          );
          most = Math.max(most, rows[0]!.n);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    try {
      for (let i = 0; i < JOBS; i++) {
        const res = await api.call('POST', '/connections', { tenant_id: tenant, app_key: `slow-${++seq}`, provider: 'demo', config: SLOW, schedule: { interval_seconds: 86_400 } });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        ids.push(res.body.id);
      }
      await until(ids);
      return { most, ids };
    } finally {
      sampling = false;
      await sampler;
    }
  }

  /**
   * Asks for an immediate sync of about 8 s on a new connection `appKey` of tenant `caller`, and
   * resolves once its activity runs (the gate holds: the connection's own scheduled job may store
   * records first), with the pending answer (wrapped: an async function would wait for a promise it returns).
   */
  async function longImmediateSync(appKey: string): Promise<{ answer: ReturnType<TestApi['call']> }> {
    const created = await api.call('POST', '/connections', { tenant_id: 'caller', app_key: appKey, provider: 'demo', config: LONG_IMMEDIATE, schedule: { interval_seconds: 86_400 }, status: 'paused' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await servers.db.pool.query(`update connections set status = 'active' where id = $1`, [created.body.id]);
    const answer = api.call('POST', '/sync', { app_key: appKey, tenant_id: 'caller', mode: 'full', immediate: true });
    await eventually(async () => (lanes.holdsBack() ? true : undefined));
    return { answer };
  }

  const allCompleted = (ids: string[]) =>
    eventually(
      async () => {
        const { rows } = await servers.db.pool.query<{ n: number }>(`select count(distinct connection_id)::int as n from sync_jobs where connection_id = any($1::uuid[]) and status = 'completed'`, [ids]);
        return rows[0]!.n === ids.length ? true : undefined;
      },
      { timeoutMs: 60_000, describe: () => servers.db.pool.query(`select connection_id, status, last_error from sync_jobs where connection_id = any($1::uuid[])`, [ids]).then((r) => r.rows) },
    );

  it('with no immediate sync about, runs the scheduled lane at its full size', async () => {
    const { most, ids } = await slowJobs('alone', allCompleted);
    // More of them paged at once than the gate would let start on a hot node.
    expect(most).toBeGreaterThan(MIN_SCHEDULED_ACTIVITIES);
    const { rows } = await servers.db.pool.query<{ n: number }>(`select count(*)::int as n from records where connection_id = any($1::uuid[])`, [ids]);
    expect(rows[0]!.n).toBe(JOBS * SLOW.records_per_resource);
  }, 90_000);

  it('holds the scheduled lane to its minimum while an immediate sync runs on a hot node, and runs every job to the end', async () => {
    const { answer } = await longImmediateSync('long');
    const { most, ids } = await slowJobs('busy', async () => {
      const res = await answer;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    });
    // The minimum always runs (progress on a saturated node); the rest waited for the immediate lane.
    expect(most).toBeGreaterThanOrEqual(1);
    expect(most).toBeLessThanOrEqual(MIN_SCHEDULED_ACTIVITIES);
    await allCompleted(ids);
    const { rows } = await servers.db.pool.query<{ n: number }>(`select count(*)::int as n from records where connection_id = any($1::uuid[])`, [ids]);
    expect(rows[0]!.n).toBe(JOBS * SLOW.records_per_resource);
  }, 90_000);

  it("tells a sync task's tenant by its connection's workflow, or its job's; '' for other activities and rows it cannot find", async () => {
    const tenantOf = activityTenant({ pool: servers.db.pool });
    const res = await api.call('POST', '/connections', { tenant_id: 'told', app_key: 'told-1', provider: 'demo', config: { resource_types: ['items'], records_per_resource: 1 }, schedule: { interval_seconds: 86_400 } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const jobId = await eventually(async () => {
      const { rows } = await servers.db.pool.query<{ id: string }>(`select id from sync_jobs where connection_id = $1 limit 1`, [res.body.id]);
      return rows[0]?.id;
    });
    const syncTask = (workflowId: string, job: string = randomUUID()) => ({ activityType: 'syncTask', workflowId, args: [{ jobId: job }] });
    expect(await tenantOf(syncTask(connectionWorkflowId(res.body.id)))).toBe('told');
    expect(await tenantOf(syncTask(syncJobWorkflowId(jobId), jobId))).toBe('told');
    expect(await tenantOf(syncTask(connectionWorkflowId(randomUUID())))).toBe('');
    expect(await tenantOf(syncTask(syncJobWorkflowId(randomUUID())))).toBe('');
    expect(await tenantOf({ activityType: 'deliverWebhook', workflowId: connectionWorkflowId(res.body.id), args: [] })).toBe('');
  });

  it("held back, a tenant's first scheduled sync starts at once: it does not wait behind another tenant's long syncs", async () => {
    const { answer } = await longImmediateSync('long-2');
    let light = '';
    const { ids } = await slowJobs('heavy', async (heavy) => {
      // The heavy tenant's syncs page in the held lane's minimum (more of them than it has room for: the rest wait)…
      await eventually(async () => {
        const { rows } = await servers.db.pool.query<{ n: number }>(`select count(distinct connection_id)::int as n from records where connection_id = any($1::uuid[])`, [heavy]);
        return rows[0]!.n >= 1 ? true : undefined;
      });
      // …then another tenant's short sync comes due.
      const res = await api.call('POST', '/connections', { tenant_id: 'light', app_key: 'short', provider: 'demo', config: { resource_types: ['items'], records_per_resource: 2, page_size: 1 }, schedule: { interval_seconds: 86_400 } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      light = res.body.id;
      await allCompleted([light]);
      const done = await answer;
      expect(done.status, JSON.stringify(done.body)).toBe(200);
    });
    await allCompleted(ids);
    // Its sync ran beside the heavy tenant's, not after one of them ended (with one line for all
    // tenants it needed a slot a heavy sync gave back).
    const { rows } = await servers.db.pool.query<{ light: Date; heavy: Date }>(
      `select (select min(finished_at) from sync_jobs where connection_id = $1) as light,
              (select min(finished_at) from sync_jobs where connection_id = any($2::uuid[])) as heavy`,
      [light, ids],
    );
    expect(rows[0]!.light.getTime()).toBeLessThan(rows[0]!.heavy.getTime());
  }, 90_000);
});
