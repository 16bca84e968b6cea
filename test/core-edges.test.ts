// Edge paths of the scheduler and the job runner on the time-skipping server with real Postgres:
// what counts as a slot's run (a cancelled job, a sync-now full job; never an API job or a
// backfill), and a job that must not report success for work it did not do.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureConnectionWorkflow } from '../temporal/client';
import { connectionWorkflowId, syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobWorkflow } from '../temporal/sync-job';
import { useConnectionWorkflows } from './helpers/connection-workflows';
import type { TestDatabase } from './helpers/database';
import { recordHistory } from './helpers/histories';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'core-edges';
const MINUTE = 60_000;

describe('scheduler and job edge paths (time-skipping, real Postgres)', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  beforeAll(() => {
    ({ env, db } = stack);
  });

  const connections = useConnectionWorkflows(stack, TASK_QUEUE, {
    prefix: 'edge',
    config: (appKey) => ({ seed: appKey, resource_types: ['items'], records_per_resource: 10, page_size: 10 }),
  });
  const { jobs, waitForState } = connections;
  const newConnection = (config?: Record<string, unknown>) => connections.newConnection({ config });
  const queuedJob = async (id: string) => (await jobs(id)).find((j) => j.status === 'queued');
  /**
   * A connection of a tenant of its own allowed no running job, and its workflow: the scheduled
   * job's claim waits on a durable timer (the job stays queued) until the limit is lifted.
   */
  async function heldConnection(name: string, appKey: string) {
    const tenant = `edge-${name}-${randomUUID()}`;
    await db.pool.query(`insert into tenant_limits (tenant_id, max_running_jobs) values ($1, 0)`, [tenant]);
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config, metadata, created_at)
       values ($1, 'demo', $2, $3, '{"sync": {"interval_seconds": 900}}', $4) returning id`,
      [tenant, appKey, { seed: appKey, resource_types: ['items'], records_per_resource: 2, page_size: 2 }, new Date(await env.currentTimeMs())],
    );
    const id = rows[0]!.id;
    connections.terminateAfterTest(id);
    const handle = await ensureConnectionWorkflow(env.client, TASK_QUEUE, { id, tenantId: tenant, providerSlug: 'demo' });
    return { tenant, id, handle };
  }

  it('a job cancelled while queued is its slot\'s run: the next job is a full interval after the cancel', async () => {
    const { id, handle } = await newConnection();
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await env.sleep(10 * MINUTE);
    const cancelledAt = await env.currentTimeMs();
    await handle.signal('cancelJob');
    await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    const next = await queuedJob(id);
    expect(next.scheduled_at.getTime()).toBeGreaterThanOrEqual(cancelledAt + 15 * MINUTE);
  });

  it('a job cancelled while running is its slot\'s run: it is not run again at once', async () => {
    const { id, handle } = await newConnection();
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    // The next job's page takes 3 s (the bootstrap job's did not need to): long enough to be seen running.
    await db.pool.query(`update connections set config = config || '{"latency_ms": 3000}' where id = $1`, [id]);
    // Past the second slot (15 min + at most 3 min of jitter); the job is cancelled while it runs.
    const sleeping = env.sleep(19 * MINUTE);
    const running = await eventually(async () => (await jobs(id)).find((j) => j.status === 'running'));
    await handle.signal('cancelJob');
    await sleeping;
    await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    const all = await jobs(id);
    const at = all.findIndex((j) => j.id === running.id);
    const [cancelled, next] = [all[at], all[at + 1]];
    expect(cancelled.status).toBe('cancelled');
    expect(next.scheduled_at.getTime()).toBeGreaterThanOrEqual(cancelled.finished_at.getTime() + 15 * MINUTE);
  });

  it('a job cancelled while its claim waits for tenant capacity is cancelled, and is its slot\'s run', async () => {
    const { id, handle } = await heldConnection('held', 'held');
    await eventually(async () => ((await handle.fetchHistory()).events?.some((e) => e.timerStartedEventAttributes) ? true : undefined));
    const [waiting] = await jobs(id);
    expect(waiting.status).toBe('queued');
    const firstRun = (await handle.describe()).runId;
    await handle.signal('cancelJob');
    await eventually(async () => ((await handle.describe()).runId !== firstRun ? true : undefined));
    const cancelled = await eventually(async () => (await jobs(id)).find((j) => j.id === waiting.id && j.status !== 'queued'));
    expect(cancelled.status).toBe('cancelled');
    const after = await waitForState(id, (s) => s.phase === 'sleeping');
    expect(after.last_outcome).toBe('cancelled');
    const next = (await jobs(id)).find((j) => j.id !== waiting.id);
    expect(next.scheduled_at.getTime()).toBeGreaterThanOrEqual(cancelled.finished_at.getTime() + 15 * MINUTE);
    await recordHistory(env.client, 'connection-cancel-job-while-claim-waits', connectionWorkflowId(id), firstRun);
  });

  it('a syncNow sent while the scheduled job waits for tenant capacity is answered by that job: one sync, not two', async () => {
    const { tenant, id, handle } = await heldConnection('busy', 'busy');
    await eventually(async () => ((await handle.fetchHistory()).events?.some((e) => e.timerStartedEventAttributes) ? true : undefined));
    const [waiting] = await jobs(id);
    expect(waiting).toMatchObject({ status: 'queued', trigger: 'schedule' });
    const firstRun = (await handle.describe()).runId;
    await handle.signal('syncNow');
    await eventually(async () => ((await handle.fetchHistory()).events?.some((e) => e.workflowExecutionSignaledEventAttributes) ? true : undefined));
    // Capacity comes back: the waiting claim's next try (its timer skipped) starts the job, which
    // reads the provider after the request was made, so it is that request's sync.
    await db.pool.query(`delete from tenant_limits where tenant_id = $1`, [tenant]);
    await env.sleep(2 * MINUTE);
    const after = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    expect(after.pending).toEqual([]);
    const all = await jobs(id);
    expect(all.map((j) => `${j.trigger}/${j.status}`)).toEqual(['schedule/completed', 'schedule/queued']);
    expect(all[1].scheduled_at.getTime()).toBeGreaterThanOrEqual(all[0].finished_at.getTime() + 15 * MINUTE);
    await recordHistory(env.client, 'connection-sync-now-while-claim-waits', connectionWorkflowId(id), firstRun);
  });

  it('a pause signalled while the scheduled job waits for tenant capacity cancels that job at once: it never runs', async () => {
    const { tenant, id, handle } = await heldConnection('paused', 'pausing');
    await eventually(async () => ((await handle.fetchHistory()).events?.some((e) => e.timerStartedEventAttributes) ? true : undefined));
    const [waiting] = await jobs(id);
    expect(waiting.status).toBe('queued');
    const firstRun = (await handle.describe()).runId;
    // The pause as an operator sends it with `temporal workflow signal` (the API also stores it).
    await handle.signal('pause');
    const cancelled = await eventually(async () => (await jobs(id)).find((j) => j.id === waiting.id && j.status !== 'queued'), {
      describe: async () => (await jobs(id)).map((j) => `${j.trigger}/${j.status}`),
    });
    expect(cancelled.status).toBe('cancelled');
    // Capacity comes back later: nothing runs while the connection is paused.
    await db.pool.query(`delete from tenant_limits where tenant_id = $1`, [tenant]);
    await env.sleep(2 * MINUTE);
    await waitForState(id, (s) => s.phase === 'paused');
    expect((await jobs(id)).map((j) => j.status)).toEqual(['cancelled']);
    const { rows: status } = await db.pool.query(`select status from connections where id = $1`, [id]);
    expect(status[0].status).toBe('paused');
    await recordHistory(env.client, 'connection-pause-while-claim-waits', connectionWorkflowId(id), firstRun);
  });

  it('a syncNow that made the queued job full counts as the slot\'s run: no extra incremental at once', async () => {
    const { id, handle } = await newConnection();
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await env.sleep(10 * MINUTE);
    await handle.signal('syncNow', { mode: 'full' });
    await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    // The first sync (no cursor yet) was a full one too; the syncNow's is the manual one.
    const full = (await jobs(id)).find((j) => j.job_type === 'full' && j.trigger === 'manual');
    expect(full).toMatchObject({ status: 'completed' });
    const next = await queuedJob(id);
    expect(next.job_type).toBe('incremental');
    expect(next.scheduled_at.getTime()).toBeGreaterThanOrEqual(full.finished_at.getTime() + 15 * MINUTE);
  });

  it('API syncs and backfills are not the schedule\'s runs: they never move its next slot', async () => {
    const { id, handle } = await newConnection();
    const before = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const [first] = (await jobs(id)).filter((j) => j.status === 'completed');
    const later = new Date(first.finished_at.getTime() + 5 * MINUTE);
    for (const trigger of ['api', 'backfill']) {
      await db.pool.query(
        `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, started_at, finished_at)
         values ($1, $2, 'acme', 'incremental', $3, 'completed', $4, $4)`,
        [randomUUID(), id, trigger, later],
      );
    }
    // A schedule change makes the workflow plan again from the last run.
    await handle.signal('updateSchedule', { interval_seconds: 600 });
    const replanned = await waitForState(id, (s) => s.pending.length === 0 && s.scheduled_at !== before.scheduled_at);
    const scheduled = Date.parse(replanned.scheduled_at!);
    expect(scheduled).toBeGreaterThanOrEqual(first.finished_at.getTime() + 10 * MINUTE);
    expect(scheduled).toBeLessThan(later.getTime() + 10 * MINUTE);
  });

  let seq = 0;
  /** Inserts a connection and a queued job of it, and runs the job's workflow to its end. */
  async function insertJob(config: Record<string, unknown> = {}) {
    seq += 1;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, $2) returning id`,
      [`job${seq}`, { seed: `job${seq}`, resource_types: ['items'], records_per_resource: 10, page_size: 5, ...config }],
    );
    const connectionId = rows[0]!.id;
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', 'full', 'api')`,
      [jobId, connectionId],
    );
    return { connectionId, jobId };
  }
  const startJob = (jobId: string, connectionId: string) =>
    env.client.workflow.start<SyncJobWorkflow>('syncJobWorkflow', { taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId }] });

  it('a task held by an earlier attempt is not counted as done: the job completes only once the task has run', async () => {
    const { connectionId, jobId } = await insertJob();
    // An earlier attempt still holds the task (it is `processing` with a fresh heartbeat).
    await db.pool.query(
      `insert into sync_tasks (job_id, resource_type, status, started_at, heartbeat_at) values ($1, 'items', 'processing', now(), now())`,
      [jobId],
    );
    const result = await (await startJob(jobId, connectionId)).result();
    await recordHistory(env.client, 'sync-job-task-held-by-earlier-attempt', syncJobWorkflowId(jobId));
    const { rows: tasks } = await db.pool.query('select status, entity_count from sync_tasks where job_id = $1', [jobId]);
    const { rows: records } = await db.pool.query('select count(*)::int as n from records where connection_id = $1', [connectionId]);
    expect({ result: result.status, tasks, records: records[0].n }).toEqual({
      result: 'completed',
      tasks: [{ status: 'completed', entity_count: 10 }],
      records: 10,
    });
  });

  it('a job finished elsewhere while it ran reports how it really ended, not `completed`', async () => {
    const { connectionId, jobId } = await insertJob({ latency_ms: 1500 });
    const handle = await startJob(jobId, connectionId);
    await eventually(async () => {
      const { rows } = await db.pool.query(`select 1 from sync_tasks where job_id = $1 and status = 'processing'`, [jobId]);
      return rows.length ? true : undefined;
    });
    await db.pool.query(`update sync_jobs set status = 'cancelled', finished_at = now() where id = $1`, [jobId]);
    const result = await handle.result();
    expect(result.status).toBe('cancelled');
  });
});
