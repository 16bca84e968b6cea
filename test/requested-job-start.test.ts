// A job requested over the API whose workflow the API could not start (Temporal was unreachable
// for every attempt of its background start): the reconcile tick starts it later, and what then
// becomes of it is what would have become of it had it started at once. Real API, worker,
// Postgres and Temporal dev server; only the API's background start fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackgroundStarts } from '../lib/background-starts';
import { ensureJobWorkflow } from '../temporal/client';
import { startTestApi, type TestApi } from './helpers/api';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'requested-job-start';

/** Background starts that fail every attempt, as while Temporal is unreachable. */
class FailingStarts extends BackgroundStarts {
  constructor() {
    super(() => undefined, 1);
  }
  override run(what: string): void {
    super.run(what, () => Promise.reject(new Error('14 UNAVAILABLE: connection refused')));
  }
}

describe('a requested job whose workflow start failed', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi(stack, TASK_QUEUE, { background: new FailingStarts() });
    // A subscriber, so that each job's end writes its event.
    await stack.db.pool.query(
      `insert into webhooks (tenant_id, url, event_types, secret) values ('acme', 'http://127.0.0.1:9/hook', '{sync.completed,sync.failed,sync.cancelled}', 'whsec_x')`,
    );
  });
  afterAll(async () => {
    await api?.server.close();
  });
  const job = async (id: string) => (await stack.db.pool.query('select status, last_error from sync_jobs where id = $1', [id])).rows[0];

  /** A connection written straight to the database (no workflow of its own), and a job requested of it whose start failed. */
  async function requestedJob(appKey: string): Promise<{ connectionId: string; jobId: string }> {
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config, metadata) values ('acme', 'demo', $1, $2, '{"sync": {"interval_seconds": 86400}}') returning id`,
      [appKey, { resource_types: ['items'], records_per_resource: 10, page_size: 10 }],
    );
    const asked = await api.call('POST', '/sync', { tenant_id: 'acme', app_key: appKey, mode: 'full' });
    expect(asked.status, JSON.stringify(asked.body)).toBe(202);
    const jobId: string = asked.body.job_id;
    await expect(stack.env.client.workflow.getHandle(`sync-job:${jobId}`).describe()).rejects.toThrow();
    return { connectionId: rows[0]!.id, jobId };
  }

  it('its connection paused meanwhile: the reconcile tick leaves it cancelled (as its claim would), not failed as abandoned', async () => {
    const { connectionId, jobId } = await requestedJob('paused-meanwhile');
    expect((await api.call('POST', `/connections/${connectionId}/pause`)).status).toBe(200);
    // Older than the tick's grace time, as it is a minute later.
    await stack.db.pool.query(`update sync_jobs set created_at = created_at - interval '5 minutes' where id = $1`, [jobId]);
    await stack.tick();
    const ended = await eventually(async () => {
      const row = await job(jobId);
      return row.status === 'queued' ? undefined : row;
    });
    expect(ended).toMatchObject({ status: 'cancelled' });
    const events = await stack.db.pool.query(`select event_type from webhook_events where payload->'job'->>'id' = $1`, [jobId]);
    expect(events.rows.map((r) => r.event_type)).toEqual(['sync.cancelled']);
  });

  it('POST /jobs/:id/cancel cancels it at once (it answered 409 job_starting until the tick started it), and a workflow that starts late runs nothing', async () => {
    const { connectionId, jobId } = await requestedJob('cancel-unstarted');
    const cancel = await api.call('POST', `/jobs/${jobId}/cancel`);
    expect(cancel.status, JSON.stringify(cancel.body)).toBe(202);
    expect(await job(jobId)).toMatchObject({ status: 'cancelled' });
    // A start that was only late (a retry of the API's, or the tick's) finds nothing to run.
    const late = await ensureJobWorkflow(stack.env.client, TASK_QUEUE, { id: jobId, connection: { id: connectionId, tenantId: 'acme', providerSlug: 'demo' } });
    expect(await late.result()).toMatchObject({ status: 'skipped' });
    expect(await job(jobId)).toMatchObject({ status: 'cancelled' });
    expect((await stack.db.pool.query('select 1 from sync_tasks where job_id = $1', [jobId])).rows).toEqual([]);
    const events = await stack.db.pool.query(`select event_type from webhook_events where payload->'job'->>'id' = $1`, [jobId]);
    expect(events.rows.map((r) => r.event_type)).toEqual(['sync.cancelled']);
  });
});
