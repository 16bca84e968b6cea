// The connection scheduler on Temporal's time-skipping server with real Postgres (the planning
// rules at the workflow level). Time advances only through env.sleep, after a query shows the workflow waits.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { cancelQueuedSchedulerJobs } from '../db/events';
import { setStatusFrom, updateConnection } from '../db/models/connections';
import { withTransaction } from '../db/transaction';
import { feedCursors } from '../lib/feed-cursors';
import { TEST_KEYRING } from './helpers/deps';
import { ensureConnectionWorkflow } from '../temporal/client';
import type { ConnectionState } from '../temporal/connection';
import { connectionWorkflowId } from '../temporal/ids';
import { CONNECTION_ID, PHASE, PROVIDER, TENANT_ID } from '../temporal/search-attributes';
import type { TestDatabase } from './helpers/database';
import { useConnectionWorkflows } from './helpers/connection-workflows';
import { useWorkerStack } from './helpers/stack';
import { patchIds, recordHistory } from './helpers/histories';
import { eventually, type LogLines } from './helpers/worker';

const TASK_QUEUE = 'connection-wf';
const MINUTE = 60_000;

describe('connection workflow (time-skipping)', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let lines: LogLines;
  beforeAll(() => {
    ({ env, db, lines } = stack);
  });

  const { newConnection: start, terminateAfterTest, jobs, waitForState } = useConnectionWorkflows(stack, TASK_QUEUE);
  const newConnection = (sync?: Record<string, unknown>) => start({ sync });

  const query = (id: string) =>
    env.client.workflow.getHandle(connectionWorkflowId(id)).query<ConnectionState>('state');

  it('bootstraps at once, then runs 4 cycles in one simulated hour with jitter in bounds', async () => {
    const { id } = await newConnection();
    // Bootstrap job runs at once; then the workflow sleeps until L + 15 min + jitter.
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await env.sleep(58 * MINUTE);
    const state = await waitForState(id, (s) => s.phase === 'sleeping' && s.cycles >= 4);
    const rows = await jobs(id);
    const done = rows.filter((r) => r.status === 'completed');
    expect(done).toHaveLength(4);
    expect(state.cycles).toBe(4);
    expect(rows.filter((r) => r.status === 'queued')).toHaveLength(1);
    for (let i = 1; i < done.length; i++) {
      const gapSeconds = (done[i].scheduled_at.getTime() - done[i - 1].finished_at.getTime()) / 1000;
      expect(gapSeconds).toBeGreaterThanOrEqual(900);
      expect(gapSeconds).toBeLessThanOrEqual(900 + 180);
    }
    expect(state.last_jitter_seconds).toBeGreaterThanOrEqual(0);
    expect(state.last_jitter_seconds).toBeLessThanOrEqual(180);
    expect(state.last_outcome).toBe('completed');
    const { rows: meta } = await db.pool.query(`select metadata -> 'sync' as sync from connections where id = $1`, [id]);
    expect(meta[0].sync.last_jitter_seconds).toBe(state.last_jitter_seconds);
    expect(meta[0].sync.next_run_at).toBe(state.next_run_at);
    expect(lines.some((l) => l.msg === 'sync job enqueued' && l.connection_id === id)).toBe(true);
  });

  it('first incremental job: enqueued at once, next_run_at = first_activated_at + base + jitter', async () => {
    const activation = Date.parse('2025-01-01T12:00:00Z');
    const { id } = await newConnection({ first_activated_at: '2025-01-01T12:00:00Z' });
    const state = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const rows = await jobs(id);
    expect(rows[0].status).toBe('completed');
    expect(rows[0].trigger).toBe('schedule');
    // The bootstrap job was scheduled "now" (workflow time), not at activation + base.
    expect(rows[0].scheduled_at.getTime()).toBeGreaterThan(activation + 86_400_000);
    // The bootstrap plan wrote next_run_at = activation + 900 s + jitter; the second cycle has since
    // planned from the first job's finish. Both are visible in the enqueue log lines.
    const enqueued = lines.filter((l) => l.msg === 'sync job enqueued' && l.connection_id === id);
    expect(enqueued[0]).toMatchObject({ mode: 'bootstrap', base_interval_seconds: 900 });
    const jitter = enqueued[0]!.jitter_seconds as number;
    expect(jitter).toBeGreaterThanOrEqual(0);
    expect(jitter).toBeLessThanOrEqual(180);
    expect(enqueued[0]!.next_run_at).toBe(new Date(activation + 900_000 + jitter * 1000).toISOString());
    expect(enqueued[1]).toMatchObject({ mode: 'normal' });
    expect(state.next_run_at).toBe(enqueued[1]!.next_run_at);
  });

  it('re-plans at once when updateSchedule arrives while sleeping', async () => {
    const { id, handle } = await newConnection();
    const before = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const [finished] = (await jobs(id)).filter((r) => r.status === 'completed');
    await handle.signal('updateSchedule', { interval_seconds: 120 });
    const after = await waitForState(id, (s) => s.scheduled_at !== before.scheduled_at);
    const scheduled = Date.parse(after.scheduled_at!);
    const base = finished.finished_at.getTime() + 120_000;
    expect(scheduled).toBeGreaterThanOrEqual(base);
    expect(scheduled).toBeLessThanOrEqual(base + 24_000);
    const queued = (await jobs(id)).filter((r) => r.status === 'queued');
    expect(queued).toHaveLength(1);
    expect(queued[0].scheduled_at.toISOString()).toBe(after.scheduled_at);
    const { rows } = await db.pool.query(`select metadata -> 'sync' as sync from connections where id = $1`, [id]);
    expect(rows[0].sync.interval_seconds).toBe(120);
    expect(rows[0].sync.next_run_at).toBe(after.next_run_at);
    await recordHistory(env.client, 'connection-update-schedule', connectionWorkflowId(id));
  });

  it('re-plans at once from the stored schedule when the payload-free replan arrives while sleeping', async () => {
    const { id, handle } = await newConnection();
    const before = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const [finished] = (await jobs(id)).filter((r) => r.status === 'completed');
    // As the PATCH command does: the one writer stores the schedule, then the signal carries nothing.
    await updateConnection(db.pool, id, { schedule: { kind: 'interval', intervalSeconds: 120 } });
    await handle.signal('replan');
    const after = await waitForState(id, (s) => s.scheduled_at !== before.scheduled_at && s.pending.length === 0);
    const scheduled = Date.parse(after.scheduled_at!);
    const base = finished.finished_at.getTime() + 120_000;
    expect(scheduled).toBeGreaterThanOrEqual(base);
    expect(scheduled).toBeLessThanOrEqual(base + 24_000);
    const queued = (await jobs(id)).filter((r) => r.status === 'queued');
    expect(queued.map((r) => r.scheduled_at.toISOString())).toEqual([after.scheduled_at]);
    const { rows } = await db.pool.query(`select metadata -> 'sync' as sync from connections where id = $1`, [id]);
    expect(rows[0].sync.next_run_at).toBe(after.next_run_at);
    // Nothing of the schedule crossed Temporal in the signal.
    const events = (await handle.fetchHistory()).events ?? [];
    const signals = events.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'replan');
    expect(signals.map((e) => e.workflowExecutionSignaledEventAttributes?.input?.payloads ?? [])).toEqual([[]]);
    expect(patchIds(events)).toContain('schedule-replan');
    await recordHistory(env.client, 'connection-replan', connectionWorkflowId(id));
  });

  it('a schedule change that drops or adds full_sync_every while sleeping makes the queued run incremental or full as the stored schedule says', async () => {
    // Every scheduled run a full sync: the queued one is full.
    const { id, handle } = await newConnection({ interval_seconds: 3600, full_sync_every: 1 });
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const queuedType = async () => (await jobs(id)).filter((r) => r.status === 'queued').map((r) => r.job_type);
    expect(await queuedType()).toEqual(['full']);
    // Stored as the PATCH command stores a schedule, then `replan`.
    await updateConnection(db.pool, id, { schedule: { kind: 'interval', intervalSeconds: 3600 } });
    await handle.signal('replan');
    await waitForState(id, (s) => s.phase === 'sleeping' && s.pending.length === 0);
    const afterDropping = await queuedType();
    await updateConnection(db.pool, id, { schedule: { kind: 'interval', intervalSeconds: 3600, fullSyncEvery: 1 } });
    await handle.signal('replan');
    await waitForState(id, (s) => s.phase === 'sleeping' && s.pending.length === 0);
    await recordHistory(env.client, 'connection-replan-full-sync-every', connectionWorkflowId(id));
    expect({ afterDropping, afterAdding: await queuedType() }).toEqual({ afterDropping: ['incremental'], afterAdding: ['full'] });
  });

  it('a paused connection shows no scheduled run: the time of the job its pause cancelled is not shown as the next one', async () => {
    const { id, handle } = await newConnection({ interval_seconds: 3600 });
    const sleeping = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    expect(sleeping.scheduled_at).not.toBeNull();
    await db.pool.query(`update connections set status = 'paused' where id = $1`, [id]);
    await handle.signal('pause');
    const paused = await waitForState(id, (s) => s.phase === 'paused' && s.pending.length === 0);
    expect((await jobs(id)).find((r) => r.id === sleeping.current_job_id)?.status).toBe('cancelled');
    expect({ current_job_id: paused.current_job_id, scheduled_at: paused.scheduled_at }).toEqual({ current_job_id: null, scheduled_at: null });
  });

  it('pause stops runs until resume', async () => {
    const { id, handle } = await newConnection();
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await handle.signal('pause');
    await waitForState(id, (s) => s.phase === 'paused');
    const paused = await jobs(id);
    expect(paused.filter((r) => r.status === 'cancelled')).toHaveLength(1);
    expect(paused.filter((r) => ['queued', 'running'].includes(r.status))).toHaveLength(0);
    const { rows } = await db.pool.query('select status from connections where id = $1', [id]);
    expect(rows[0].status).toBe('paused');

    await env.sleep(60 * MINUTE);
    expect((await query(id)).phase).toBe('paused');
    expect(await jobs(id)).toHaveLength(paused.length);

    await handle.signal('resume');
    // Overdue after an hour: one catch-up job, at (missed slot + jitter); skip past its jitter.
    const catchUp = await waitForState(id, (s) => s.phase === 'sleeping' || s.cycles >= 2);
    if (catchUp.cycles < 2) await env.sleep(4 * MINUTE);
    await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    const resumed = await jobs(id);
    expect(resumed.filter((r) => r.status === 'completed')).toHaveLength(2);
    await recordHistory(env.client, 'connection-pause-resume', connectionWorkflowId(id));
  });

  it('a resume after a pause whose signal was lost re-plans from the stored history at once: it does not wait for the time of the job the pause cancelled', async () => {
    const { id, handle } = await newConnection({ interval_seconds: 3600 });
    const sleeping = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const resumedRun = (await handle.describe()).runId;
    // The pause command's transaction (status and its queued job cancelled, at the server's time);
    // its signal never reached the workflow (Temporal refused it). Then the resume, heard.
    const pausedAt = await env.currentTimeMs();
    await withTransaction(db.pool, async (tx) => {
      await setStatusFrom(tx, id, 'paused', ['active']);
      await cancelQueuedSchedulerJobs(tx, id, new Date(pausedAt), 'connection paused', null, feedCursors(TEST_KEYRING));
    });
    await db.pool.query(`update connections set status = 'active' where id = $1`, [id]);
    await handle.signal('resume');
    // Planned as after a heard pause: the cancelled job was the schedule's last run.
    const resumed = await waitForState(id, (s) => s.phase === 'sleeping' && s.pending.length === 0 && s.current_job_id !== sleeping.current_job_id);
    const rows = await jobs(id);
    expect(rows.find((r) => r.id === sleeping.current_job_id)?.status).toBe('cancelled');
    const queued = rows.filter((r) => r.status === 'queued');
    expect(queued.map((r) => r.id)).toEqual([resumed.current_job_id]);
    const waitSeconds = (queued[0].scheduled_at.getTime() - pausedAt) / 1000;
    expect(waitSeconds).toBeGreaterThanOrEqual(3600);
    expect(waitSeconds).toBeLessThanOrEqual(3600 + 720);
    // It runs at its time, once; the next one is queued.
    await env.sleep(75 * MINUTE);
    await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    const after = await jobs(id);
    expect(after.map((r) => r.status)).toEqual(['completed', 'cancelled', 'completed', 'queued']);
    expect(after[2].id).toBe(resumed.current_job_id);
    await recordHistory(env.client, 'connection-resume-after-lost-pause', connectionWorkflowId(id), resumedRun);
  });

  it('a schedule change that finds its queued job gone (cancelled by a pause and resumed, both signals lost) plans from the stored schedule at once', async () => {
    const { id, handle } = await newConnection({ interval_seconds: 3600 });
    const sleeping = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    // The pause and resume commands' transactions; neither signal reached the workflow. Then a
    // schedule change (stored, then its replan heard).
    const pausedAt = await env.currentTimeMs();
    await withTransaction(db.pool, async (tx) => {
      await setStatusFrom(tx, id, 'paused', ['active']);
      await cancelQueuedSchedulerJobs(tx, id, new Date(pausedAt), 'connection paused', null, feedCursors(TEST_KEYRING));
    });
    await db.pool.query(`update connections set status = 'active' where id = $1`, [id]);
    await updateConnection(db.pool, id, { schedule: { kind: 'interval', intervalSeconds: 600 } });
    await handle.signal('replan');
    const replanned = await waitForState(id, (s) => s.phase === 'sleeping' && s.pending.length === 0 && s.current_job_id !== sleeping.current_job_id);
    const queued = (await jobs(id)).filter((r) => r.status === 'queued');
    expect(queued.map((r) => r.id)).toEqual([replanned.current_job_id]);
    // The new schedule's slot after the schedule's last run (the cancelled job).
    const waitSeconds = (queued[0].scheduled_at.getTime() - pausedAt) / 1000;
    expect(waitSeconds).toBeGreaterThanOrEqual(600);
    expect(waitSeconds).toBeLessThanOrEqual(600 + 120);
    await recordHistory(env.client, 'connection-replan-without-queued-job', connectionWorkflowId(id));
  });

  it('a schedule change that finds the row already paused (the pause signal still on its way) leaves no queued job behind', async () => {
    const { id, handle } = await newConnection();
    const sleeping = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const queued = sleeping.current_job_id!;
    // The pause command wrote the row; its signal comes after the schedule change's.
    await db.pool.query(`update connections set status = 'paused' where id = $1`, [id]);
    await handle.signal('updateSchedule', { interval_seconds: 600 });
    await waitForState(id, (s) => s.phase === 'paused' && s.pending.length === 0);
    await handle.signal('pause');
    await waitForState(id, (s) => s.phase === 'paused' && s.pending.length === 0);
    await db.pool.query(`update connections set status = 'active' where id = $1`, [id]);
    await handle.signal('resume');
    const resumed = await waitForState(id, (s) => s.phase === 'sleeping' && s.pending.length === 0);
    const rows = await jobs(id);
    expect({
      old: rows.find((r) => r.id === queued)?.status,
      queued: rows.filter((r) => r.status === 'queued').map((r) => r.id === resumed.current_job_id),
    }).toEqual({ old: 'cancelled', queued: [true] });
    await recordHistory(env.client, 'connection-schedule-change-while-paused', connectionWorkflowId(id));
  });

  it('syncNow runs at once with the requested mode', async () => {
    const { id, handle } = await newConnection({ interval_seconds: 3600 });
    const sleeping = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const now = await env.currentTimeMs();
    expect(Date.parse(sleeping.scheduled_at!)).toBeGreaterThan(now + 30 * MINUTE);
    await handle.signal('syncNow', { mode: 'full' });
    const after = await waitForState(id, (s) => s.cycles >= 2);
    expect(after.last_outcome).toBe('completed');
    // The first sync (no cursor yet) was a full one too: the one the signal asked for is manual.
    const full = (await jobs(id)).filter((r) => r.job_type === 'full' && r.trigger === 'manual');
    expect(full).toHaveLength(1);
    expect(full[0]).toMatchObject({ status: 'completed' });
    // It ran without waiting for the hour: its start is within minutes of the signal, not an hour.
    expect(full[0].started_at.getTime() - now).toBeLessThan(30 * MINUTE);
  });

  it('cancelJob while sleeping cancels the queued job and goes on with the next cycle', async () => {
    const { id, handle } = await newConnection();
    const sleeping = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await handle.signal('cancelJob');
    const after = await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    expect(after.last_outcome).toBe('cancelled');
    const rows = await jobs(id);
    const cancelled = rows.find((r) => r.id === sleeping.current_job_id);
    expect(cancelled).toMatchObject({ status: 'cancelled', last_error: 'cancelled by signal before it started' });
    expect(rows.filter((r) => r.status === 'queued')).toHaveLength(1);
    expect(after.current_job_id).not.toBe(sleeping.current_job_id);
    await recordHistory(env.client, 'connection-cancel-job-while-sleeping', connectionWorkflowId(id));
  });

  it('enqueues nothing while the circuit breaker pauses the connection, and runs when the pause ends', async () => {
    const now = await env.currentTimeMs();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, metadata, created_at)
       values ('acme', 'demo', 'breaker', '{"sync": {"interval_seconds": 900}}', $1) returning id`,
      [new Date(now)],
    );
    const id = rows[0]!.id;
    await db.pool.query(
      `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, paused_until)
       values ($1, 'demo', 5, $2)`,
      [id, new Date(now + 30 * MINUTE)],
    );
    terminateAfterTest(id);
    await ensureConnectionWorkflow(env.client, TASK_QUEUE, { id, tenantId: 'acme', providerSlug: 'demo' });
    const paused = await waitForState(id, (s) => s.phase === 'backing_off');
    expect(paused.breaker?.paused_until).toBe(new Date(now + 30 * MINUTE).toISOString());
    expect(await jobs(id)).toHaveLength(0);
    await env.sleep(31 * MINUTE);
    const after = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    expect(after.breaker).toBeNull();
    expect((await jobs(id)).filter((r) => r.status === 'completed')).toHaveLength(1);
  });

  it('continues as new every cycle and keeps its state across runs', async () => {
    const { id, handle } = await newConnection({ interval_seconds: 300 });
    const first = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const run1 = (await handle.describe()).runId;
    await env.sleep(7 * MINUTE);
    const second = await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    const run2 = (await handle.describe()).runId;
    expect(run2).not.toBe(run1);
    await recordHistory(env.client, 'connection-cycle-continue-as-new', connectionWorkflowId(id), run1);
    expect(second.last_outcome).toBe('completed');
    expect(second.next_run_at).not.toBe(first.next_run_at);
    // Each run's history is one cycle, its job run inside it (no child workflow): small and bounded.
    const history = await handle.fetchHistory();
    expect(history.events!.length).toBeLessThan(80);
    const cycle1 = (await env.client.workflow.getHandle(connectionWorkflowId(id), run1).fetchHistory()).events ?? [];
    expect(cycle1.filter((e) => e.startChildWorkflowExecutionInitiatedEventAttributes)).toHaveLength(0);
    expect(cycle1.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'syncTask').length).toBeGreaterThan(0);
    const owners = (await jobs(id)).filter((r) => r.status === 'completed').map((r) => r.workflow_id);
    expect(owners).toEqual([connectionWorkflowId(id), connectionWorkflowId(id)]);
    // One patch marker a run (one upsert of TemporalChangeVersion), and the identity its start
    // carried is not upserted again: the run's only upserts of its own are its phase.
    for (const events of [cycle1, history.events ?? []]) {
      expect(patchIds(events)).toEqual(['one-marker-cycle']);
      const upserted = events.flatMap((e) => Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}));
      expect(upserted.filter((key) => key !== 'TemporalChangeVersion' && key !== PHASE.name)).toEqual([]);
      expect(upserted.filter((key) => key === 'TemporalChangeVersion')).toHaveLength(1);
    }
    const shown = (await handle.describe()).typedSearchAttributes;
    expect([shown.get(CONNECTION_ID), shown.get(TENANT_ID), shown.get(PROVIDER)]).toEqual([id, 'acme', 'demo']);
  });

  it('fails a job left running by a terminated run and schedules exactly one catch-up job after restart by the reconcile tick', async () => {
    const { id, handle } = await newConnection();
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const [finished] = (await jobs(id)).filter((r) => r.status === 'completed');
    // Simulate a crash mid-job: the queued job was claimed, then the workflow was terminated.
    const [queued] = (await jobs(id)).filter((r) => r.status === 'queued');
    await db.pool.query(`update sync_jobs set status = 'running', started_at = scheduled_at where id = $1`, [queued.id]);
    const crashedRun = (await handle.describe()).runId;
    await handle.terminate('simulated crash');
    await env.sleep(25 * MINUTE); // downtime: L + 15 min has passed

    const reconcile = await env.client.workflow.start('reconcileWorkflow', {
      workflowId: `reconcile-${id}`,
      taskQueue: TASK_QUEUE,
      args: [{ tickSeconds: 60 }],
    });
    // A query also answers for the closed run: wait for the new run first.
    await eventually(async () => {
      const d = await handle.describe();
      return d.runId !== crashedRun && d.status.name === 'RUNNING' ? d : undefined;
    });
    // The catch-up job waits for its jitter (≤ 3 min) once the new run sleeps; skip past it.
    const waiting = await waitForState(id, (s) => s.phase === 'sleeping' || s.cycles >= 1);
    if (waiting.cycles < 1) await env.sleep(4 * MINUTE);
    const restarted = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await reconcile.terminate('test done');

    const rows = await jobs(id);
    const stuck = rows.find((r) => r.id === queued.id);
    expect(stuck).toMatchObject({ status: 'failed' });
    expect(stuck.abandoned_at).not.toBeNull();
    expect(stuck.last_error).toMatch(/^abandoned:/);
    const after = rows.filter((r) => r.id !== queued.id && r.id !== finished.id);
    // Exactly one catch-up job ran; the next is queued for the following slot.
    const catchUp = after.filter((r) => r.status === 'completed');
    expect(catchUp).toHaveLength(1);
    const enqueuedLines = lines.filter((l) => l.msg === 'sync job enqueued' && l.connection_id === id);
    expect(enqueuedLines.filter((l) => l.mode === 'catch_up')).toHaveLength(1);
    expect(after.filter((r) => r.status === 'queued')).toHaveLength(1);
    expect(restarted.cycles).toBe(1);
  });
});
