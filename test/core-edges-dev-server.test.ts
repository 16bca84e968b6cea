// Edge paths that need the dev server (visibility): every active job has a live workflow or is
// failed within one reconcile tick; disabling or pausing a connection reaches the jobs requested
// over the API. (A worker shut down under a task: test/faults/rolling-shutdowns.slow.test.ts.)
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { disableConnection, pauseConnection, resumeConnection } from '../commands/connections';
import { cancelJob, requestJob } from '../commands/jobs';
import { findConnection } from '../db/models/connections';
import { ensureConnectionWorkflow, ensureJobWorkflow } from '../temporal/client';
import { connectionWorkflowId, syncJobWorkflowId } from '../temporal/ids';
import { recordHistory } from './helpers/histories';
import { waitForState } from './helpers/connection-state';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'core-edges-dev';

describe('core edge paths on the dev server', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);

  let seq = 0;
  async function newConnection(config: Record<string, unknown> = {}, status = 'active') {
    seq += 1;
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status, config, metadata)
       values ('acme', 'demo', $1, $2, $3, '{"sync": {"interval_seconds": 86400}}') returning id`,
      [`dev${seq}`, status, { seed: `dev${seq}`, resource_types: ['items'], records_per_resource: 20, page_size: 2, ...config }],
    );
    return rows[0]!.id;
  }
  async function insertApiJob(connectionId: string, opts: { status?: string; createdAgoSeconds?: number } = {}) {
    const id = randomUUID();
    await stack.db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, created_at, workflow_id)
       values ($1, $2, 'acme', 'full', 'api', $3, now() - make_interval(secs => $4), $5)`,
      [id, connectionId, opts.status ?? 'queued', opts.createdAgoSeconds ?? 0, syncJobWorkflowId(id)],
    );
    return id;
  }
  const jobOf = async (id: string) => (await stack.db.pool.query('select status, last_error, abandoned_at, retry_count from sync_jobs where id = $1', [id])).rows[0];
  const recordsOf = async (connectionId: string) =>
    (await stack.db.pool.query('select count(*)::int as n from records where connection_id = $1', [connectionId])).rows[0].n as number;

  it('fails, within one reconcile tick, an API job whose workflow ended while it ran and one left retrying with none', async () => {
    const connectionId = await newConnection({ latency_ms: 500 });
    const running = await insertApiJob(connectionId);
    const ref = { id: connectionId, tenantId: 'acme', providerSlug: 'demo' };
    const handle = await ensureJobWorkflow(stack.env.client, TASK_QUEUE, { id: running, connection: ref });
    await eventually(async () => ((await jobOf(running)).status === 'running' ? true : undefined));
    await handle.terminate('simulated operator mistake');
    // The tick reads which workflows run from visibility, which may lag a moment behind the
    // termination (a workflow still listed running is left to a later tick): once it is listed
    // ended, one tick must fail the job.
    await eventually(async () => {
      for await (const _ of stack.env.client.workflow.list({ query: `WorkflowId = '${handle.workflowId}' AND ExecutionStatus = 'Running'` })) return undefined;
      return true;
    });
    const retrying = await insertApiJob(await newConnection(), { status: 'retrying', createdAgoSeconds: 120 });
    await stack.db.pool.query(`update sync_jobs set created_at = now() - interval '2 minutes' where id = $1`, [running]);

    await stack.tick();
    for (const id of [running, retrying]) {
      const job = await jobOf(id);
      expect(job.status).toBe('failed');
      expect(job.last_error).toMatch(/^abandoned: /);
    }
  });

  it('disabling a connection cancels its running API job', async () => {
    const connectionId = await newConnection({ latency_ms: 300 });
    const connection = (await findConnection(stack.db.pool, connectionId))!;
    const { job } = await requestJob(stack.commands, { connection, mode: 'full' });
    await eventually(async () => ((await jobOf(job.id)).status === 'running' ? true : undefined));
    await disableConnection(stack.commands, connectionId);
    // Until it ends: a task whose claim already saw the connection disabled, before the workflow's
    // cancellation arrived, can show the job `retrying` for a moment.
    const ended = await eventually(async () => {
      const j = await jobOf(job.id);
      return ['running', 'retrying'].includes(j.status) ? undefined : j;
    });
    expect(ended.status).toBe('cancelled');
    expect(await recordsOf(connectionId)).toBeLessThan(20);
  });

  it('a connection re-enabled right after its disable has a running scheduler, not one that ends with the disable', async () => {
    const connectionId = await newConnection();
    const handle = await ensureConnectionWorkflow(stack.env.client, TASK_QUEUE, { id: connectionId, tenantId: 'acme', providerSlug: 'demo' });
    await waitForState(stack.env, connectionId, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const cancelledRun = (await handle.describe()).runId;
    // Answered as soon as the cancellation is requested; the resume's signal reaches the run that
    // is still acting on it.
    await disableConnection(stack.commands, connectionId);
    await resumeConnection(stack.commands, connectionId);
    const latest = await eventually(async () => {
      const d = await handle.describe();
      return d.status.name === 'RUNNING' && (await handle.query<{ phase: string }>('state').catch(() => undefined))?.phase === 'sleeping' ? 'RUNNING' : d.status.name === 'RUNNING' ? undefined : d.status.name;
    });
    expect({ status: (await findConnection(stack.db.pool, connectionId))!.status, workflow: latest }).toEqual({ status: 'active', workflow: 'RUNNING' });
    await recordHistory(stack.env.client, 'connection-reenabled-while-cancelling', connectionWorkflowId(connectionId), cancelledRun);
    await handle.terminate('test done');
  });

  it('a requested job of a disabled or paused connection does not start', async () => {
    for (const status of ['disabled', 'paused']) {
      const connectionId = await newConnection({}, status);
      const jobId = await insertApiJob(connectionId);
      const result = await (await ensureJobWorkflow(stack.env.client, TASK_QUEUE, { id: jobId, connection: { id: connectionId, tenantId: 'acme', providerSlug: 'demo' } })).result();
      expect({ status, result: result.status, job: (await jobOf(jobId)).status, records: await recordsOf(connectionId) })
        .toEqual({ status, result: 'skipped', job: 'cancelled', records: 0 });
    }
  });

  it('pausing a connection lets its running API job finish', async () => {
    const connectionId = await newConnection({ latency_ms: 100 });
    await ensureConnectionWorkflow(stack.env.client, TASK_QUEUE, { id: connectionId, tenantId: 'acme', providerSlug: 'demo' });
    const connection = (await findConnection(stack.db.pool, connectionId))!;
    const { job } = await requestJob(stack.commands, { connection, mode: 'full' });
    await eventually(async () => ((await jobOf(job.id)).status === 'running' ? true : undefined));
    await pauseConnection(stack.commands, connectionId);
    const ended = await eventually(async () => {
      const j = await jobOf(job.id);
      return j.status === 'running' ? undefined : j;
    });
    expect(ended.status).toBe('completed');
    expect(await recordsOf(connectionId)).toBe(20);
  });

  it('a scheduled job runs inside its connection run: a reconcile tick leaves it running, a cancel over the API stops it', async () => {
    const connectionId = await newConnection({ latency_ms: 500 });
    const handle = await ensureConnectionWorkflow(stack.env.client, TASK_QUEUE, { id: connectionId, tenantId: 'acme', providerSlug: 'demo' });
    const job = await eventually(async () => {
      const { rows } = await stack.db.pool.query(`select id, status, workflow_id from sync_jobs where connection_id = $1`, [connectionId]);
      return rows.find((r) => r.status === 'running');
    });
    // Its workflow is the connection's, in the run that enqueued it; no `sync-job:` workflow exists.
    expect(job.workflow_id).toBe(connectionWorkflowId(connectionId));
    await expect(stack.env.client.workflow.getHandle(syncJobWorkflowId(job.id)).describe()).rejects.toThrow(/not found/i);
    // Old enough for the tick to check that its workflow lives: the connection's does.
    await stack.db.pool.query(`update sync_jobs set created_at = now() - interval '2 minutes' where id = $1`, [job.id]);
    await stack.tick();
    expect((await jobOf(job.id)).status).toBe('running');

    await cancelJob(stack.commands, job.id);
    const ended = await eventually(async () => {
      const j = await jobOf(job.id);
      return ['running', 'retrying'].includes(j.status) ? undefined : j;
    });
    expect(ended.status).toBe('cancelled');
    expect(await recordsOf(connectionId)).toBeLessThan(20);
    // The connection goes on to its next cycle (a new queued job), with the job's end in its state.
    const state = await waitForState(stack.env, connectionId, (s) => s.phase === 'sleeping' && s.last_outcome === 'cancelled');
    expect(state.current_job_id).not.toBe(job.id);
    const events = (await handle.fetchHistory()).events ?? [];
    expect(events.filter((e) => e.startChildWorkflowExecutionInitiatedEventAttributes)).toHaveLength(0);
    await handle.terminate('test done');
  });
});
