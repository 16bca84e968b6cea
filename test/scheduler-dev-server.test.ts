// The scheduler end to end on the Temporal dev server: the README's `temporal` CLI commands
// signal and query a connection workflow, and reconcile ticks running at once stay race-free.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { reconcileConnections } from '../activities/reconcile-connections';
import { ensureConnectionWorkflow, listRunningWorkflowIds, queryConnectionState, signalConnectionWorkflow, signalRunningConnectionWorkflow, startWebhookDeliveries } from '../temporal/client';
import { pauseSignal, recheckSignal, replanSignal } from '../temporal/connection';
import { connectionWorkflowId, webhookDeliveryWorkflowId } from '../temporal/ids';
import type { TestDatabase } from './helpers/database';
import { recordHistory } from './helpers/histories';
import { useWorkerStack } from './helpers/stack';
import { testActivityDeps } from './helpers/deps';
import { eventually } from './helpers/worker';
import { updateConnection as updateStoredConnection } from '../db/models/connections';
import { withTransaction } from '../db/transaction';

const run = promisify(execFile);
const TASK_QUEUE = 'scheduler-e2e';

describe('scheduler on the dev server', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  beforeAll(() => {
    ({ env, db } = stack);
  });

  /** Runs the `temporal` CLI against this dev server, as the README shows it. */
  const temporal = async (...args: string[]) =>
    (await run(inject('temporalCliPath'), [...args, '--address', env.address])).stdout;

  async function insertConnection(appKey: string, sync: Record<string, unknown>) {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, metadata) values ('acme', 'demo', $1, $2) returning id`,
      [appKey, { sync }],
    );
    return rows[0]!.id;
  }

  const jobCounts = async (id: string) => {
    const { rows } = await db.pool.query(
      `select job_type, status, count(*)::int as n from sync_jobs where connection_id = $1 group by 1, 2`,
      [id],
    );
    return Object.fromEntries(rows.map((r) => [`${r.job_type}/${r.status}`, r.n])) as Record<string, number>;
  };

  it('syncs now, pauses and resumes through `temporal workflow signal`, and answers `temporal workflow query`', async () => {
    const id = await insertConnection('cli', { interval_seconds: 3600 });
    await ensureConnectionWorkflow(env.client, TASK_QUEUE, { id, tenantId: 'acme', providerSlug: 'demo' });
    const workflowId = connectionWorkflowId(id);
    // Bootstrap ran (a first sync, so a full one); the next run is an hour away.
    await eventually(async () => {
      const c = await jobCounts(id);
      return c['full/completed'] === 1 && c['incremental/queued'] === 1 ? c : undefined;
    });

    await temporal('workflow', 'signal', '--workflow-id', workflowId, '--name', 'syncNow', '--input', '{"mode":"full"}');
    await eventually(async () => ((await jobCounts(id))['full/completed'] === 2 ? true : undefined));

    await temporal('workflow', 'signal', '--workflow-id', workflowId, '--name', 'pause');
    const paused = await eventually(async () => {
      const out = await temporal('workflow', 'query', '--workflow-id', workflowId, '--type', 'state', '--output', 'json');
      const state = JSON.parse(out).queryResult[0];
      return state.phase === 'paused' ? state : undefined;
    });
    expect(paused).toMatchObject({ connection_id: id, phase: 'paused' });

    await temporal('workflow', 'signal', '--workflow-id', workflowId, '--name', 'resume');
    const resumed = await eventually(async () => {
      const out = await temporal('workflow', 'query', '--workflow-id', workflowId, '--type', 'state', '--output', 'json');
      const state = JSON.parse(out).queryResult[0];
      return state.phase === 'sleeping' ? state : undefined;
    });
    expect(resumed.next_run_at).toEqual(expect.any(String));
    expect(resumed.last_jitter_seconds).toBeGreaterThanOrEqual(0);

    // The run is filterable by Synctide's search attributes.
    const listed = await eventually(async () => {
      const out = await temporal('workflow', 'list', '--query', `SynctideConnectionId='${id}'`, '--output', 'json');
      return out.includes(workflowId) ? out : undefined;
    });
    expect(listed).toContain(workflowId);
  });

  it('keeps one workflow and one active job per connection when reconcile ticks run at once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await insertConnection(`race-${i}`, { interval_seconds: 3600 }));
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE });
    deps.reconcile = { ...deps.reconcile, tickSeconds: 1 }; // the starts spread over 1 s, not 20 × 200 ms
    const tick = reconcileConnections(deps);
    const results = await Promise.all([tick({ at: Date.now() }), tick({ at: Date.now() }), tick({ at: Date.now() })]);
    // Every connection was ensured by at least one tick (rows locked by one are skipped by the others).
    expect(results.reduce((sum, r) => sum + r.ensured, 0)).toBeGreaterThanOrEqual(ids.length);
    for (const id of ids) {
      await eventually(async () => {
        const c = await jobCounts(id);
        return c['full/completed'] === 1 && c['incremental/queued'] === 1 ? c : undefined;
      });
    }
    const { rows } = await db.pool.query(
      `select connection_id, count(*)::int as n from sync_jobs
        where connection_id = any($1::uuid[]) and status in ('queued', 'running', 'retrying')
        group by 1 having count(*) > 1`,
      [ids],
    );
    expect(rows).toEqual([]);
    const { rows: all } = await db.pool.query(
      `select count(*)::int as n from sync_jobs where connection_id = any($1::uuid[])`,
      [ids],
    );
    expect(all[0].n).toBe(ids.length * 2);
  });

  it('a tick that finds many connections without a workflow (a cold start) spreads their starts evenly over one tick', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await insertConnection(`cold-${i}`, { interval_seconds: 3600 }));
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE });
    deps.reconcile = { ...deps.reconcile, tickSeconds: 2 }; // 20 × 200 ms would be 4 s: evenly over 2 s instead
    const result = await reconcileConnections(deps)({ at: Date.now() });
    expect(result.ensured).toBeGreaterThanOrEqual(ids.length);
    // The server holds each first task for its start delay: execution time − start time.
    const delays = await Promise.all(
      ids.map(async (id) => {
        const d = await env.client.workflow.getHandle(connectionWorkflowId(id)).describe();
        return (d.executionTime ?? d.startTime).getTime() - d.startTime.getTime();
      }),
    );
    delays.sort((a, b) => a - b);
    // 20 over a tick of 2 s: the first at once, the last 1.9 s later, one every 100 ms.
    expect(delays[0]).toBeLessThan(100);
    expect(delays[19]).toBeGreaterThanOrEqual(1800);
    expect(delays[19]).toBeLessThan(2000);
    expect(delays[10]! - delays[9]!).toBeGreaterThan(50);
    expect(delays[10]! - delays[9]!).toBeLessThan(150);
    // Every one of them still bootstraps, once.
    for (const id of ids) {
      await eventually(async () => {
        const c = await jobCounts(id);
        return c['full/completed'] === 1 && c['incremental/queued'] === 1 ? c : undefined;
      });
    }
  });

  it('a workflow held by its start delay has no state yet, and a signal-with-start (a schedule PATCH) starts it at once', async () => {
    const id = await insertConnection('delayed', { interval_seconds: 3600 });
    const ref = { id, tenantId: 'acme', providerSlug: 'demo' };
    await ensureConnectionWorkflow(env.client, TASK_QUEUE, ref, 10 * 60_000);
    await expect(queryConnectionState(env.client, id, 3000)).rejects.toThrow();
    expect(await jobCounts(id)).toEqual({});
    await signalConnectionWorkflow(env.client, TASK_QUEUE, ref, replanSignal);
    await eventually(async () => {
      const c = await jobCounts(id);
      return c['full/completed'] === 1 && c['incremental/queued'] === 1 ? c : undefined;
    });
  });

  it('a tick over a healthy fleet asks Temporal one thing: the list of running workflows', async () => {
    // Every connection so far sleeps with its next job queued; make those jobs old enough to be checked.
    await db.pool.query(`update sync_jobs set created_at = now() - interval '2 minutes' where status = 'queued'`);
    const { rows } = await db.pool.query(`select count(*)::int as n from sync_jobs where status = 'queued'`);
    expect(rows[0].n).toBeGreaterThanOrEqual(20);
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE });
    const result = await reconcileConnections(deps)({ at: Date.now() });
    expect({ calls: result.temporalCalls, ensured: result.ensured, abandoned: result.abandoned }).toEqual({ calls: 1, ensured: 0, abandoned: 0 });
  });

  it('a run waiting paused whose connection is active again (the resume committed, its signal lost) is sent `recheck` by the next tick and resumes; one still paused looks and stays paused', async () => {
    const id = await insertConnection('resume-unheard', { interval_seconds: 3600 });
    const ref = { id, tenantId: 'acme', providerSlug: 'demo' };
    const handle = await ensureConnectionWorkflow(env.client, TASK_QUEUE, ref);
    // Its next job queued and the task that queued it completed (the state query answers after it).
    await eventually(async () =>
      (await jobCounts(id))['incremental/queued'] === 1 && (await queryConnectionState(env.client, id, 3000)).phase === 'sleeping' ? true : undefined);
    await db.pool.query(`update connections set status = 'paused' where id = $1`, [id]);
    await signalConnectionWorkflow(env.client, TASK_QUEUE, ref, pauseSignal);
    await eventually(async () => ((await queryConnectionState(env.client, id, 3000)).phase === 'paused' ? true : undefined));
    // The tick sees the phase through the listing (visibility), once it shows it.
    await eventually(async () => {
      const shownPaused = new Set<string>();
      await listRunningWorkflowIds(env.client, shownPaused);
      return shownPaused.has(connectionWorkflowId(id)) ? true : undefined;
    });
    // A look is a local activity (openCycle), recorded as a marker of its own.
    const looks = async () =>
      ((await handle.fetchHistory()).events ?? []).filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity').length;

    // Still paused in its row: a recheck makes the run look, and it stays paused.
    const before = await looks();
    await signalRunningConnectionWorkflow(env.client, id, null, recheckSignal);
    await eventually(async () => ((await looks()) > before ? true : undefined));
    expect((await queryConnectionState(env.client, id, 3000)).phase).toBe('paused');
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE });
    expect((await reconcileConnections(deps)({ at: Date.now() })).rechecked ?? 0).toBe(0);

    // The resume is committed and its signal never comes: the next tick sends `recheck`, the run
    // reads the row, resumes and plans its next run (an hour away: sleeping, its job queued).
    await db.pool.query(`update connections set status = 'active' where id = $1`, [id]);
    expect((await reconcileConnections(deps)({ at: Date.now() })).rechecked).toBe(1);
    await eventually(async () => ((await queryConnectionState(env.client, id, 3000)).phase === 'sleeping' ? true : undefined));
    await eventually(async () => ((await jobCounts(id))['incremental/queued'] === 1 ? true : undefined));
    await recordHistory(env.client, 'connection-recheck-while-paused', handle.workflowId);
  });

  it('a sleeping run whose schedule changed (the PATCH committed, its `replan` lost) is sent `replan` by the next tick and moves its queued job to the new schedule; then the tick sends none', async () => {
    const id = await insertConnection('replan-unheard', { interval_seconds: 86_400 });
    const ref = { id, tenantId: 'acme', providerSlug: 'demo' };
    await ensureConnectionWorkflow(env.client, TASK_QUEUE, ref);
    const queuedAt = async () =>
      (await db.pool.query<{ at: Date }>(`select scheduled_at as at from sync_jobs where connection_id = $1 and status = 'queued'`, [id])).rows[0]?.at;
    // Its first sync done, its next job queued a day away, and the run asleep on it.
    await eventually(async () => {
      const at = await queuedAt();
      return at && at.getTime() > Date.now() + 12 * 3600_000 && (await queryConnectionState(env.client, id, 3000)).phase === 'sleeping' ? true : undefined;
    });
    // The API stores a schedule of every 10 minutes, and its signal never comes (moved back in time:
    // planned three minutes ago, changed two minutes ago, so the API's own signal had time to come).
    await withTransaction(db.pool, (tx) => updateStoredConnection(tx, id, { schedule: { kind: 'interval', intervalSeconds: 600 } }));
    await db.pool.query(
      `update connections set schedule_planned_at = now() - interval '3 minutes', schedule_changed_at = now() - interval '2 minutes' where id = $1`,
      [id],
    );
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE });
    const tick = await reconcileConnections(deps)({ at: Date.now() });
    await eventually(async () => {
      const at = await queuedAt();
      return at && at.getTime() < Date.now() + 15 * 60_000 ? true : undefined;
    });
    expect(tick.replanned).toBe(1);
    // Re-planned from the stored schedule: the next tick has nothing to send.
    expect((await reconcileConnections(deps)({ at: Date.now() })).replanned ?? 0).toBe(0);
    expect((await queryConnectionState(env.client, id, 3000)).phase).toBe('sleeping');
  });

  it('stops the workflow of a disabled connection on the next tick and leaves no queued job', async () => {
    const id = await insertConnection('to-disable', { interval_seconds: 3600 });
    const handle = await ensureConnectionWorkflow(env.client, TASK_QUEUE, { id, tenantId: 'acme', providerSlug: 'demo' });
    // Its next job queued and the task that queued it completed (the state query answers after it).
    await eventually(async () =>
      (await jobCounts(id))['incremental/queued'] === 1 && (await queryConnectionState(env.client, id, 3000)).phase === 'sleeping' ? true : undefined);
    await db.pool.query(`update connections set status = 'disabled' where id = $1`, [id]);
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE });
    const result = await reconcileConnections(deps)({ at: Date.now() });
    expect(result.stopped).toBeGreaterThanOrEqual(1);
    await eventually(async () => ((await handle.describe()).status.name === 'CANCELLED' ? true : undefined));
    const counts = await jobCounts(id);
    expect(counts['incremental/queued']).toBeUndefined();
    expect(counts['incremental/cancelled']).toBe(1);

    // The next tick finds it ended and notes that; later ticks leave it alone (no describe call)…
    await reconcileConnections(deps)({ at: Date.now() });
    const handles = vi.spyOn(deps.temporal.workflow, 'getHandle');
    await reconcileConnections(deps)({ at: Date.now() });
    expect(handles.mock.calls.map(([workflowId]) => workflowId)).not.toContain(connectionWorkflowId(id));
    // …until the connection changes: re-enabled, the next tick starts its workflow again.
    await db.pool.query(`update connections set status = 'active' where id = $1`, [id]);
    const reenabled = await reconcileConnections(deps)({ at: Date.now() });
    expect(reenabled.ensured).toBeGreaterThanOrEqual(1);
    await eventually(async () => ((await handle.describe()).status.name === 'RUNNING' ? true : undefined));
    // Disabled once more, it is stopped once more.
    await db.pool.query(`update connections set status = 'disabled' where id = $1`, [id]);
    expect((await reconcileConnections(deps)({ at: Date.now() })).stopped).toBe(1);
    // Cancelled, or, when the cancel met a continue-as-new, completed by the next run, which finds
    // the connection disabled.
    await eventually(async () => ((await handle.describe()).status.name !== 'RUNNING' ? true : undefined));
    handles.mockRestore();
  });

  it('stops a disabled connection whose workflow a lagging listing leaves out (it is asked about again, not noted stopped)', async () => {
    const id = await insertConnection('to-disable-lagging', { interval_seconds: 3600 });
    const handle = await ensureConnectionWorkflow(env.client, TASK_QUEUE, { id, tenantId: 'acme', providerSlug: 'demo' });
    await eventually(async () => ((await jobCounts(id))['incremental/queued'] === 1 ? true : undefined));
    await db.pool.query(`update connections set status = 'disabled' where id = $1`, [id]);
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE });
    // The tick's broad listing misses the workflow, as visibility does for a moment after a run
    // continues as new; the narrower second look sees it.
    const list = deps.temporal.workflow.list.bind(deps.temporal.workflow);
    const listing = vi.spyOn(deps.temporal.workflow, 'list').mockImplementationOnce((options) => {
      const all = list(options);
      const missing = connectionWorkflowId(id);
      return Object.assign(
        (async function* () {
          for await (const info of all) if (info.workflowId !== missing) yield info;
        })(),
        { intoHistories: all.intoHistories },
      ) as unknown as ReturnType<typeof list>;
    });
    const result = await reconcileConnections(deps)({ at: Date.now() });
    listing.mockRestore();
    expect(result.stopped).toBe(1);
    await eventually(async () => ((await handle.describe()).status.name !== 'RUNNING' ? true : undefined));
    const { rows } = await db.pool.query(`select workflow_stopped_at from connections where id = $1`, [id]);
    expect(rows[0].workflow_stopped_at).toBeNull();
  });

  it('the tick (by its one listing) leaves a pending delivery whose workflow runs alone, and restarts one whose workflow died', async () => {
    // A delivery to a receiver that is down, so its workflow keeps retrying.
    const { rows: hook } = await db.pool.query<{ id: string }>(
      `insert into webhooks (tenant_id, url, event_types, secret) values ('acme', 'http://127.0.0.1:9/', '{connection.disabled}', 'whsec_x') returning id`,
    );
    const { rows: event } = await db.pool.query<{ id: string }>(
      `insert into webhook_events (tenant_id, event_type, payload, created_at) values ('acme', 'connection.disabled', '{}', now() - interval '1 minute') returning id`,
    );
    const { rows: delivery } = await db.pool.query<{ id: string }>(
      `insert into webhook_deliveries (webhook_id, event_id, created_at) values ($1, $2, now() - interval '1 minute') returning id`,
      [hook[0]!.id, event[0]!.id],
    );
    const workflowId = webhookDeliveryWorkflowId(delivery[0]!.id);
    expect(await startWebhookDeliveries(env.client, TASK_QUEUE, [delivery[0]!.id])).toEqual([delivery[0]!.id]);
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE });
    await eventually(async () => ((await listRunningWorkflowIds(env.client))?.has(workflowId) ? true : undefined));
    expect((await reconcileConnections(deps)({ at: Date.now() })).deliveriesStarted).toBeUndefined();
    const first = await env.client.workflow.getHandle(workflowId).describe();
    await env.client.workflow.getHandle(workflowId).terminate('the worker host was lost');
    // Once the listing no longer shows it, a tick starts a new run.
    await eventually(async () => ((await reconcileConnections(deps)({ at: Date.now() })).deliveriesStarted === 1 ? true : undefined));
    const second = await env.client.workflow.getHandle(workflowId).describe();
    expect(second.status.name).toBe('RUNNING');
    expect(second.runId).not.toBe(first.runId);
    await env.client.workflow.getHandle(workflowId).terminate('test over');
  });
});
