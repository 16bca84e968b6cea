// A job held back by its tenant's running-jobs limit waits durably (a workflow timer) and claims
// and runs once a running job of its tenant has ended: the real API and worker on the time-skipping
// server, which skips that timer. Apart from the per-tenant limits file (on the dev server) so that
// file can run beside others while this one runs in the timing-sensitive group, as time-skipping files do.
import { randomUUID } from 'node:crypto';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from './helpers/api';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

/** The first job runs a few seconds (8 pages of 300 ms); the second is quick. */
const SLOW = { resource_types: ['items'], records_per_resource: 8, page_size: 1, latency_ms: 300 };
const FAST = { resource_types: ['items'], records_per_resource: 2, page_size: 2 };
const DAY = { interval_seconds: 86_400 };

describe('a job waiting for its tenant’s running jobs', () => {
  const stack = useWorkerStack('time-skipping', 'tenant-limits-wait');
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi(stack, 'tenant-limits-wait');
  });
  afterAll(async () => {
    await api?.server.close();
  });

  it('claims and runs once a running job of its tenant has ended, after its durable wait', async () => {
    const q = <T = any>(sql: string, params: unknown[] = []) => stack.db.pool.query(sql, params).then((r) => r.rows as T[]);
    // A tenant of this attempt's own: the timing-sensitive group retries a failed test once (the
    // time-skipping server now and then stalls one), and a retry must not meet the connections
    // and jobs of the attempt before it.
    const tenant = `lim-wait-${randomUUID().slice(0, 8)}`;
    expect((await api.call('PATCH', `/tenants/${tenant}/limits`, { max_running_jobs: 1 })).status).toBe(200);
    const ids: string[] = [];
    for (const config of [SLOW, FAST]) {
      const res = await api.call('POST', '/connections', { tenant_id: tenant, app_key: `w${ids.length}`, provider: 'demo', config, schedule: DAY, status: 'paused' });
      expect(res.status).toBe(201);
      await q(`update connections set status = 'active' where id = $1`, [res.body.id]);
      ids.push(res.body.id);
    }
    const first = (await api.call('POST', `/connections/${ids[0]}/sync`, { mode: 'full' })).body.job_id as string;
    await eventually(async () => ((await q(`select 1 from sync_jobs where id = $1 and status = 'running'`, [first])).length ? true : undefined), {
      // Where the first job stands if it never runs: its row, and its workflow if it was started.
      describe: async () => ({
        job: await q(`select status, last_error, workflow_id from sync_jobs where id = $1`, [first]),
        workflow: await stack.env.client.workflow.getHandle(`sync-job:${first}`).describe().then((d) => d.status.name, (err: Error) => err.message),
      }),
    });
    const second = (await api.call('POST', `/connections/${ids[1]}/sync`, { mode: 'full' })).body.job_id as string;
    const handle = stack.env.client.workflow.getHandle(`sync-job:${second}`);
    await eventually(async () =>
      (await handle.fetchHistory()).events?.some((e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_TIMER_STARTED) ? true : undefined,
    );
    await eventually(async () => ((await q(`select 1 from sync_jobs where id = $1 and status = 'completed'`, [first])).length ? true : undefined), {
      // Where the first job stands if it does not complete: its row and its workflow's pending work.
      describe: async () => ({
        job: await q(`select status, last_error, retry_after from sync_jobs where id = $1`, [first]),
        workflow: (await stack.env.client.workflow.getHandle(`sync-job:${first}`).describe()).raw.pendingActivities,
      }),
    });
    expect((await q(`select status from sync_jobs where id = $1`, [second]))[0].status).toBe('queued');
    // Waiting for its result lets the test server skip the timer: the job claims and runs.
    expect((await handle.result()).status).toBe('completed');
    expect((await q(`select status from sync_jobs where id = $1`, [second]))[0].status).toBe('completed');
  });
});
