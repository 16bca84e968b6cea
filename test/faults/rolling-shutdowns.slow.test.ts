// A rolling deploy: a worker shut down under a sync task (SIGTERM, a short grace) is not a provider
// failure. The task cut off by two shutdowns in a row is retried on the next worker and the job
// completes with every record once, no retry counted and the breaker untouched. Real worker
// shutdowns on the dev server; a fault test because the task's two retry backoffs take ~15 s.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ensureJobWorkflow } from '../../temporal/client';
import { syncJobWorkflowId } from '../../temporal/ids';
import { useServers } from '../helpers/stack';
import { recordHistory } from '../helpers/histories';
import { createTestWorker, eventually } from '../helpers/worker';

const TASK_QUEUE = 'faults-rolling-shutdowns';

describe('a worker shut down under a sync task', () => {
  const servers = useServers();

  it('a task cut off by two worker shutdowns in a row is retried, not counted as a failed attempt', async () => {
    const { env, db } = servers;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status, config, metadata)
       values ('acme', 'demo', 'rolling', 'active', $1, '{"sync": {"interval_seconds": 86400}}') returning id`,
      [{ seed: 'rolling', resource_types: ['items'], records_per_resource: 60, page_size: 2, latency_ms: 200 }],
    );
    const connectionId = rows[0]!.id;
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id)
       values ($1, $2, 'acme', 'full', 'api', 'queued', $3)`,
      [jobId, connectionId, syncJobWorkflowId(jobId)],
    );
    const ref = { id: connectionId, tenantId: 'acme', providerSlug: 'demo' };
    const pages = async () => (await db.pool.query('select coalesce(max(pages_done), 0)::int as n from sync_tasks where job_id = $1', [jobId])).rows[0].n as number;
    const deploy = () => createTestWorker({ connection: env.nativeConnection, client: env.client, pool: db.pool, taskQueue: TASK_QUEUE, shutdownGraceSeconds: 1 });

    const handle = await ensureJobWorkflow(env.client, TASK_QUEUE, { id: jobId, connection: ref });
    for (const atPage of [2, 8]) {
      const { worker } = await deploy();
      const run = worker.run();
      await eventually(async () => ((await pages()) >= atPage ? true : undefined));
      worker.shutdown(); // a rolling deploy: SIGTERM, a short grace, then the next version
      await run;
    }
    const { worker } = await deploy();
    const result = await worker.runUntil(handle.result());
    const job = (await db.pool.query('select retry_count from sync_jobs where id = $1', [jobId])).rows[0];
    const stats = (await db.pool.query('select consecutive_failures from connector_failure_stats where connection_id = $1', [connectionId])).rows[0];
    const records = (await db.pool.query('select count(*)::int as n from records where connection_id = $1', [connectionId])).rows[0].n as number;
    expect({ result: result.status, retry_count: job.retry_count, breaker: stats?.consecutive_failures ?? 0, records })
      .toEqual({ result: 'completed', retry_count: 0, breaker: 0, records: 60 });
    await recordHistory(env.client, 'sync-job-interrupted-by-shutdowns', syncJobWorkflowId(jobId));
  });
});
