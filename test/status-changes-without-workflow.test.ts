// A connection's status changes (pause, resume, disable) made while its connection workflow is
// not running (terminated, or lost, and not yet started again by the reconcile tick) end its
// scheduler's queued job, and announce it, as they do while the workflow runs: the queued job a
// disable or pause stops ends `cancelled` with `sync.cancelled`, never `failed` as abandoned.
// Real Postgres, the Temporal dev server (the reconcile tick lists running workflows) and a worker.
import { describe, expect, it } from 'vitest';
import { disableConnection, pauseConnection, refOf, resumeConnection } from '../commands/connections';
import { requestJob } from '../commands/jobs';
import { deleteConnection } from '../commands/purges';
import type { CommandDeps } from '../commands/deps';
import { findConnection } from '../db/models/connections';
import { insertPurge } from '../db/models/purges';
import { ensureConnectionWorkflow, startConnectionPurge } from '../temporal/client';
import { CONNECTION_PURGE_WORKFLOW, connectionPurgeWorkflowId } from '../temporal/purge';
import { waitForState } from './helpers/connection-state';
import { insertLostRunJob } from './helpers/scheduler-jobs';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'status-without-workflow';

describe('status changes while the connection workflow is not running', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);

  let seq = 0;
  /** An active connection of a tenant of its own, planned once a day, with a webhook for every job and connection event. */
  async function newConnection(status = 'active'): Promise<string> {
    seq += 1;
    const tenant = `status-${seq}`;
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status, config, metadata)
       values ($1, 'demo', 'app', $2, $3, '{"sync": {"interval_seconds": 86400}}') returning id`,
      [tenant, status, { seed: tenant, resource_types: ['items'], records_per_resource: 4, page_size: 2 }],
    );
    await stack.db.pool.query(
      `insert into webhooks (tenant_id, url, event_types, secret)
       values ($1, 'http://127.0.0.1:9/hook', '{sync.completed,sync.failed,sync.cancelled,connection.disabled}', 'whsec_x')`,
      [tenant],
    );
    return rows[0]!.id;
  }
  const jobOf = async (id: string) =>
    (await stack.db.pool.query<{ status: string; last_error: string | null; abandoned_at: Date | null }>('select status, last_error, abandoned_at from sync_jobs where id = $1', [id])).rows[0]!;
  /** The connection's events and those of job `jobId` (not those of its first sync, run at once). */
  const eventsOf = async (connectionId: string, jobId: string) =>
    (await stack.db.pool.query<{ event_type: string }>(
      `select event_type from webhook_events
        where connection_id = $1 and (event_type not like 'sync.%' or payload -> 'job' ->> 'id' = $2)
        order by created_at, event_type`,
      [connectionId, jobId],
    )).rows.map((r) => r.event_type);
  /** Makes the connection's jobs old enough for the tick to check that a workflow owns them. */
  const ageJobs = (connectionId: string) => stack.db.pool.query(`update sync_jobs set created_at = now() - interval '2 minutes' where connection_id = $1`, [connectionId]);

  /** Starts the connection's workflow and answers its queued scheduler job, once it sleeps until it is due. */
  async function queuedJobOf(connectionId: string): Promise<string> {
    await ensureConnectionWorkflow(stack.env.client, TASK_QUEUE, refOf((await findConnection(stack.db.pool, connectionId))!));
    const state = await waitForState(stack.env, connectionId, (s) => s.phase === 'sleeping' && s.current_job_id !== null);
    expect((await jobOf(state.current_job_id!)).status).toBe('queued');
    return state.current_job_id!;
  }
  const terminate = (connectionId: string) => stack.env.client.workflow.getHandle(`connection:${connectionId}`).terminate('lost in this test');

  it('a disable while the workflow runs cancels the queued job (the shape the dead-workflow case must match)', async () => {
    const connectionId = await newConnection();
    const jobId = await queuedJobOf(connectionId);
    await disableConnection(stack.commands, connectionId);
    const job = await eventually(async () => {
      const j = await jobOf(jobId);
      return j.status === 'queued' ? undefined : j;
    });
    await ageJobs(connectionId);
    await stack.tick();
    expect({ job: (await jobOf(jobId)).status, abandoned: job.abandoned_at, events: await eventsOf(connectionId, jobId) })
      .toEqual({ job: 'cancelled', abandoned: null, events: ['connection.disabled', 'sync.cancelled'] });
  });

  it('a disable while the workflow is not running ends the queued job cancelled, not failed as abandoned by the next tick', async () => {
    const connectionId = await newConnection();
    const jobId = await queuedJobOf(connectionId);
    await terminate(connectionId);
    await disableConnection(stack.commands, connectionId);
    await ageJobs(connectionId);
    await stack.tick();
    const job = await jobOf(jobId);
    expect({ job: job.status, abandoned: job.abandoned_at, error: job.last_error, events: await eventsOf(connectionId, jobId) })
      .toEqual({ job: 'cancelled', abandoned: null, error: 'connection disabled', events: ['connection.disabled', 'sync.cancelled'] });
  });

  it('a pause while the workflow is not running ends the queued job cancelled, as a pause of a running workflow does', async () => {
    const live = await newConnection();
    const liveJob = await queuedJobOf(live);
    await pauseConnection(stack.commands, live);
    await waitForState(stack.env, live, (s) => s.phase === 'paused');

    const connectionId = await newConnection();
    const jobId = await queuedJobOf(connectionId);
    await terminate(connectionId);
    // The pause's signal starts a new run (signal-with-start), whose first look cleans up after the terminated one.
    await pauseConnection(stack.commands, connectionId);
    await waitForState(stack.env, connectionId, (s) => s.phase === 'paused');
    const outcome = async (connection: string, job: string) => {
      const row = await jobOf(job);
      return { job: row.status, abandoned: row.abandoned_at, error: row.last_error, events: await eventsOf(connection, job) };
    };
    expect(await outcome(live, liveJob)).toEqual({ job: 'cancelled', abandoned: null, error: 'connection paused', events: ['sync.cancelled'] });
    expect(await outcome(connectionId, jobId)).toEqual(await outcome(live, liveJob));
  });

  it('a disable while the workflow is not running, then a resume before any tick, still ends the queued job cancelled', async () => {
    const connectionId = await newConnection();
    const jobId = await queuedJobOf(connectionId);
    await terminate(connectionId);
    await disableConnection(stack.commands, connectionId);
    // The resume's signal starts a new run, whose first look finds the connection active again.
    await resumeConnection(stack.commands, connectionId);
    await waitForState(stack.env, connectionId, (s) => s.phase === 'sleeping' && s.current_job_id !== null && s.current_job_id !== jobId);
    const job = await jobOf(jobId);
    expect({ job: job.status, abandoned: job.abandoned_at, error: job.last_error, events: await eventsOf(connectionId, jobId) })
      .toEqual({ job: 'cancelled', abandoned: null, error: 'connection disabled', events: ['connection.disabled', 'sync.cancelled'] });
  });

  /** Command deps whose Temporal calls fail as an unreachable server's do: the status is written, the workflow never told. */
  const temporalAway = (): CommandDeps => {
    const unreachable = () => Promise.reject(new Error('14 UNAVAILABLE: connection refused'));
    return { ...stack.commands, temporal: { workflow: { signalWithStart: unreachable, start: unreachable, getHandle: () => ({ signal: unreachable, describe: unreachable, cancel: unreachable }) } } as unknown as CommandDeps['temporal'] };
  };

  it('a pause whose signal fails (Temporal away) while the workflow is not running, then a resume, ends the queued job cancelled, not failed as abandoned', async () => {
    const connectionId = await newConnection();
    const jobId = await queuedJobOf(connectionId);
    await terminate(connectionId);
    // The pause is stored; telling the workflow fails, so no run cancels the queued job.
    await expect(pauseConnection(temporalAway(), connectionId)).rejects.toThrow(/UNAVAILABLE/);
    expect((await findConnection(stack.db.pool, connectionId))!.status).toBe('paused');
    // The resume's signal starts a new run, whose first look finds the connection active again.
    await resumeConnection(stack.commands, connectionId);
    const state = await waitForState(stack.env, connectionId, (s) => s.phase === 'sleeping' && s.current_job_id !== null && s.current_job_id !== jobId);
    const job = await jobOf(jobId);
    const { rows: active } = await stack.db.pool.query<{ id: string }>(`select id from sync_jobs where connection_id = $1 and status in ('queued', 'running', 'retrying')`, [connectionId]);
    expect({ job: job.status, abandoned: job.abandoned_at, error: job.last_error, events: await eventsOf(connectionId, jobId), active: active.map((r) => r.id) })
      .toEqual({ job: 'cancelled', abandoned: null, error: 'connection paused', events: ['sync.cancelled'], active: [state.current_job_id] });
  });

  it('a pause whose signal fails (Temporal away) while the workflow runs, then a resume, fails no job and a sync asked for then runs', async () => {
    const connectionId = await newConnection();
    const jobId = await queuedJobOf(connectionId);
    await expect(pauseConnection(temporalAway(), connectionId)).rejects.toThrow(/UNAVAILABLE/);
    await resumeConnection(stack.commands, connectionId);
    await waitForState(stack.env, connectionId, (s) => s.phase === 'sleeping' && s.pending.length === 0);
    // The running workflow never heard of the pause: its queued job is carried on, or ended
    // cancelled by the pause (as a pause it heard of ends it), never failed.
    const job = await jobOf(jobId);
    const ended = job.status === 'cancelled' ? { job: 'cancelled', abandoned: null, error: 'connection paused', events: ['sync.cancelled'] } : { job: 'queued', abandoned: null, error: null, events: [] };
    expect({ job: job.status, abandoned: job.abandoned_at, error: job.last_error, events: await eventsOf(connectionId, jobId) }).toEqual(ended);
    // A sync asked for now runs (the queued job brought forward, or a job of its own).
    const { job: asked } = await requestJob(stack.commands, { connection: (await findConnection(stack.db.pool, connectionId))!, mode: 'incremental' });
    const done = await eventually(async () => {
      const j = await jobOf(asked.id);
      return ['queued', 'running', 'retrying'].includes(j.status) ? undefined : j;
    });
    const { rows: failed } = await stack.db.pool.query(`select id from sync_jobs where connection_id = $1 and status = 'failed'`, [connectionId]);
    expect({ asked: done.status, failed }).toEqual({ asked: 'completed', failed: [] });
    await terminate(connectionId);
  });

  it('the tick ends cancelled the queued scheduler job of a connection found disabled or paused with no workflow (stopped by a process that never stopped its work)', async () => {
    const ended: Record<string, unknown> = {};
    for (const status of ['disabled', 'paused']) {
      const connectionId = await newConnection(status);
      const jobId = await insertLostRunJob(stack.db.pool, connectionId, { status: 'queued', aged: true });
      await stack.tick();
      // A paused connection's workflow is started again by the tick; its first look ends the job, if the tick did not.
      const row = await eventually(async () => {
        const r = await jobOf(jobId);
        return r.status === 'queued' ? undefined : r;
      });
      ended[status] = { job: row.status, abandoned: row.abandoned_at, error: row.last_error, events: await eventsOf(connectionId, jobId) };
      await stack.env.client.workflow.getHandle(`connection:${connectionId}`).terminate('test done').catch(() => undefined);
    }
    expect(ended).toEqual({
      disabled: { job: 'cancelled', abandoned: null, error: 'connection disabled', events: ['sync.cancelled'] },
      paused: { job: 'cancelled', abandoned: null, error: 'connection paused', events: ['sync.cancelled'] },
    });
  });

  it.each([
    ['the delete command', async (connectionId: string) => (await deleteConnection(stack.commands, connectionId)).id],
    // A delete whose API process died right after its transaction: the tick starts its purge.
    ['a purge whose delete stopped nothing', async (connectionId: string) => {
      await stack.db.pool.query(`update connections set status = 'disabled' where id = $1`, [connectionId]);
      const purge = (await insertPurge(stack.db.pool, connectionId, (await findConnection(stack.db.pool, connectionId))!.tenant_id))!;
      await startConnectionPurge(stack.env.client, TASK_QUEUE, { purgeId: purge.id, connectionId });
      return purge.id;
    }],
  ])('a delete while the workflow that ran a job is gone announces the job\'s end, as a delete of a running workflow does (%s)', async (_, remove) => {
    const connectionId = await newConnection();
    // A scheduled job its connection's run had begun (run inline) when that run was lost.
    const jobId = await insertLostRunJob(stack.db.pool, connectionId);
    const purge = { id: await remove(connectionId) };
    await eventually(async () => {
      const { rows } = await stack.db.pool.query<{ status: string }>('select status from connection_purges where id = $1', [purge.id]);
      return rows[0]?.status === 'completed' ? true : undefined;
    });
    const { rows } = await stack.db.pool.query<{ event_type: string }>(
      `select event_type from webhook_events where payload -> 'job' ->> 'id' = $1`,
      [jobId],
    );
    expect(rows.map((r) => r.event_type)).toEqual(['sync.cancelled']);
  });

  it('a disable while the run that began a scheduled job is gone ends that job cancelled, as it ends a requested job whose workflow is gone', async () => {
    const connectionId = await newConnection();
    const jobId = await insertLostRunJob(stack.db.pool, connectionId, { aged: true });
    await disableConnection(stack.commands, connectionId);
    await stack.tick();
    const row = await jobOf(jobId);
    expect({ job: row.status, abandoned: row.abandoned_at, error: row.last_error, events: await eventsOf(connectionId, jobId) })
      .toEqual({ job: 'cancelled', abandoned: null, error: 'connection disabled', events: ['connection.disabled', 'sync.cancelled'] });
  });

  it('the tick starts the workflow of an open purge however many older purges wait for a place with their workflows running', async () => {
    // 500 purges (the most the tick looks at) of a tenant deleting many connections, each waiting
    // for a place of its running-jobs limit: their workflows run (here on a queue no worker polls).
    const { rows: waiting } = await stack.db.pool.query<{ id: string }>(
      `with c as (
         insert into connections (tenant_id, provider_slug, app_key, status, config, metadata)
         select 'many-purges', 'demo', 'app-' || n, 'disabled', '{}', '{}' from generate_series(1, 500) n returning id, tenant_id)
       insert into connection_purges (connection_id, tenant_id, status, created_at)
       select id, tenant_id, 'pending', now() - interval '3 minutes' from c returning id`,
    );
    const started: string[] = [];
    try {
      for (let i = 0; i < waiting.length; i += 50) {
        await Promise.all(waiting.slice(i, i + 50).map(async ({ id }) => {
          await stack.env.client.workflow.start(CONNECTION_PURGE_WORKFLOW, { workflowId: connectionPurgeWorkflowId(id), taskQueue: 'nobody-polls-this-queue', args: [{ purgeId: id, connectionId: id }] });
          started.push(id);
        }));
      }
      await eventually(async () => {
        const { count } = await stack.env.client.workflow.count(`WorkflowType = '${CONNECTION_PURGE_WORKFLOW}' AND ExecutionStatus = 'Running' AND TaskQueue = 'nobody-polls-this-queue'`);
        return count >= waiting.length ? true : undefined;
      });
      // A newer purge whose workflow is gone (its delete's process died before it started it).
      const connectionId = await newConnection('disabled');
      const { rows: [lost] } = await stack.db.pool.query<{ id: string }>(
        `insert into connection_purges (connection_id, tenant_id, status, created_at)
         select id, tenant_id, 'pending', now() - interval '2 minutes' from connections where id = $1 returning id`,
        [connectionId],
      );
      await stack.tick();
      await expect(stack.env.client.workflow.getHandle(connectionPurgeWorkflowId(lost!.id)).describe().then((d) => d.workflowId))
        .resolves.toBe(connectionPurgeWorkflowId(lost!.id));
    } finally {
      await Promise.all(started.map((id) => stack.env.client.workflow.getHandle(connectionPurgeWorkflowId(id)).terminate('test over').catch(() => undefined)));
      await stack.db.pool.query(`update connection_purges set status = 'completed' where tenant_id = 'many-purges'`);
    }
  }, 180_000);
});
