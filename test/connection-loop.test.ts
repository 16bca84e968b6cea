// The connection workflow's loop on the time-skipping server with in-memory stub activities (no
// Postgres): planning, durable sleep, every signal, the breaker wait and continue-as-new, fast.
// The full-stack file (connection-workflow.test.ts) covers the same loop with the real activities.
import { describe, expect, it } from 'vitest';
import { connectionWorkflowId } from '../temporal/ids';
import { recordHistory } from './helpers/histories';
import { useStubLoop } from './helpers/stub-loop';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'connection-loop';
const MINUTE = 60_000;

describe('connection workflow loop (time-skipping, stub activities)', () => {
  const loop = useStubLoop(TASK_QUEUE);
  const { store, waitForState } = loop;
  const start = (sync?: Record<string, unknown>, pausedUntil?: number) => loop.start(sync, { pausedUntil });
  const statuses = (id: string) => store.jobsOf(id).map((j) => j.status);

  it('the reconcile tick takes its period and retention from the worker on every tick, not from its first input', async () => {
    store.behaviour.reconcile = { settings: { tickSeconds: 300, retentionDays: 3 } };
    store.behaviour.retentionDays.length = 0;
    const handle = await loop.env.client.workflow.start('reconcileWorkflow', {
      workflowId: 'reconcile-settings', taskQueue: TASK_QUEUE, args: [{ tickSeconds: 60, retentionDays: 7 }],
    });
    try {
      await eventually(async () => ((store.calls.get('reconcileConnections') ?? 0) >= 1 ? true : undefined));
      await loop.env.sleep(2 * MINUTE);
      const history = await handle.fetchHistory();
      const timers = (history.events ?? []).filter((e) => e.timerStartedEventAttributes).map((e) => Number(e.timerStartedEventAttributes!.startToFireTimeout!.seconds));
      expect(timers[0]).toBe(300);
      expect(store.behaviour.retentionDays).toEqual([3]);
    } finally {
      await handle.terminate('test done');
      store.behaviour.reconcile = {};
    }
  });

  it('bootstraps at once, then runs one job per interval, each after L + interval + jitter', async () => {
    const { id } = await start();
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await loop.env.sleep(50 * MINUTE);
    const state = await waitForState(id, (s) => s.cycles >= 3 && s.phase === 'sleeping');
    const done = store.jobsOf(id).filter((j) => j.status === 'completed');
    expect(done.length).toBe(state.cycles);
    for (let i = 1; i < done.length; i++) {
      const gap = done[i]!.scheduledAt - done[i - 1]!.finishedAt!;
      expect(gap).toBeGreaterThanOrEqual(15 * MINUTE);
      expect(gap).toBeLessThanOrEqual(18 * MINUTE); // jitter at most 20 % of 15 min
    }
    expect(statuses(id).filter((s) => s === 'queued')).toHaveLength(1);
  });

  it('pause cancels the queued job and stops runs; resume catches up with one job', async () => {
    const { id, handle, connection } = await start();
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await handle.signal('pause');
    await waitForState(id, (s) => s.phase === 'paused');
    expect(connection.status).toBe('paused');
    expect(statuses(id)).toEqual(['completed', 'cancelled']);
    await loop.env.sleep(60 * MINUTE);
    expect(statuses(id)).toEqual(['completed', 'cancelled']);

    await handle.signal('resume');
    const caughtUp = await waitForState(id, (s) => s.phase === 'sleeping' || s.cycles >= 2);
    if (caughtUp.cycles < 2) await loop.env.sleep(4 * MINUTE); // the catch-up job's jitter
    await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    expect(connection.status).toBe('active');
    expect(statuses(id)).toEqual(['completed', 'cancelled', 'completed', 'queued']);
  });

  it('updateSchedule re-plans the queued job at once; an invalid one is ignored', async () => {
    const { id, handle, connection } = await start();
    const before = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await handle.signal('updateSchedule', { interval_seconds: 10 });
    await handle.signal('updateSchedule', { cron: 'not a cron' });
    const finished = store.jobsOf(id)[0]!.finishedAt!;
    await handle.signal('updateSchedule', { interval_seconds: 120 });
    const after = await waitForState(id, (s) => s.scheduled_at !== before.scheduled_at && s.pending.length === 0);
    expect(connection.sync.interval_seconds).toBe(120);
    expect(Date.parse(after.scheduled_at!)).toBeGreaterThanOrEqual(finished + 2 * MINUTE);
    expect(Date.parse(after.scheduled_at!)).toBeLessThanOrEqual(finished + 2 * MINUTE + 24_000);
    expect(store.jobsOf(id).find((j) => j.status === 'queued')!.scheduledAt).toBe(Date.parse(after.scheduled_at!));
  });

  it('syncNow runs the queued job at once with the requested mode', async () => {
    const { id, handle } = await start({ interval_seconds: 3600 });
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await handle.signal('syncNow', { mode: 'full' });
    const after = await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    expect(after.last_outcome).toBe('completed');
    const full = store.jobsOf(id).filter((j) => j.jobType === 'full');
    expect(full).toHaveLength(1);
    expect(full[0]).toMatchObject({ status: 'completed', trigger: 'manual' });
  });

  it('a syncNow refused by a job it does not own is tried again only after the retry period, and runs once that job is gone', async () => {
    // Another active job of the type (e.g. an API job in its own sync-job workflow): `existing`.
    store.behaviour.enqueue = 'existing';
    try {
      const { id, handle } = await start({ interval_seconds: 3600 });
      await waitForState(id, (s) => s.phase === 'sleeping');
      const runId = (await handle.describe()).runId;
      const enqueues = () => store.calls.get('enqueueJob') ?? 0;
      const before = enqueues();
      await handle.signal('syncNow', { mode: 'incremental' });
      // The syncNow wakes the idle wait once and is refused.
      await eventually(async () => (enqueues() > before ? true : undefined));
      const refusedAt = enqueues();
      // Five minutes of skipped time: one look a minute. (A looping run never lets time skip, so
      // the skip is bounded in real time; the assertion is on the count alone.)
      await Promise.race([loop.env.sleep(5 * MINUTE), new Promise((r) => setTimeout(r, 60_000))]);
      const looks = enqueues() - refusedAt;
      expect(looks, 'enqueue attempts over 5 skipped minutes after one refused syncNow').toBeLessThanOrEqual(6);
      expect(looks).toBeGreaterThanOrEqual(4);
      expect((await waitForState(id, (s) => s.phase === 'sleeping')).pending).toEqual(['syncNow:incremental']);
      expect(store.jobsOf(id)).toHaveLength(0);

      // The blocking job is gone: the pending syncNow runs at its next look.
      store.behaviour.enqueue = null;
      await loop.env.sleep(2 * MINUTE);
      const after = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
      expect(after.pending).toEqual([]);
      expect(store.jobsOf(id)[0]).toMatchObject({ jobType: 'incremental', trigger: 'manual', status: 'completed' });
      await recordHistory(loop.env.client, 'connection-sync-now-refused', connectionWorkflowId(id), runId);
    } finally {
      store.behaviour.enqueue = null;
    }
  });

  it('cancelJob while sleeping cancels the queued job and goes on with the next cycle', async () => {
    const { id, handle } = await start();
    const sleeping = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    await handle.signal('cancelJob');
    const after = await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    expect(after.last_outcome).toBe('cancelled');
    expect(store.jobs.get(sleeping.current_job_id!)!.status).toBe('cancelled');
    expect(statuses(id).filter((s) => s === 'queued')).toHaveLength(1);
  });

  it('backs off while the breaker pauses the connection and runs when the pause ends', async () => {
    const now = await loop.env.currentTimeMs();
    const { id } = await start(undefined, now + 30 * MINUTE);
    const paused = await waitForState(id, (s) => s.phase === 'backing_off');
    expect(paused.breaker?.paused_until).toBe(new Date(now + 30 * MINUTE).toISOString());
    expect(store.jobsOf(id)).toHaveLength(0);
    await loop.env.sleep(31 * MINUTE);
    const after = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    expect(after.breaker).toBeNull();
    expect(statuses(id)).toEqual(['completed', 'queued']);
  });

  it('completes when its connection is disabled, leaving nothing queued', async () => {
    const { id, handle, connection } = await start();
    await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    connection.status = 'disabled';
    await handle.signal('resume'); // any wake-up re-reads the connection
    await handle.result();
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    expect(statuses(id).filter((s) => s === 'queued')).toHaveLength(0);
  });

  /** The number of events in the current run of a connection's workflow, and how many runs it had. */
  async function historyOf(id: string) {
    const handle = loop.env.client.workflow.getHandle(connectionWorkflowId(id));
    const events = (await handle.fetchHistory()).events?.length ?? 0;
    return { events, runId: (await handle.describe()).runId };
  }

  it.each([
    ['paused (re-reads hourly)', 'paused', 120 * 60],
    ['blocked by a job it does not own (looks again every minute)', 'existing', 120],
    ['locked by a concurrent enqueue (looks again every 5 s)', 'locked', 10],
  ] as const)('keeps its history bounded while %s', async (_name, kind, minutes) => {
    store.behaviour.enqueue = kind === 'paused' ? null : kind;
    try {
      const { id, handle, connection } = await start();
      if (kind === 'paused') {
        await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
        await handle.signal('pause');
        await waitForState(id, (s) => s.phase === 'paused');
      } else {
        await waitForState(id, (s) => s.phase === 'sleeping');
      }
      const first = await historyOf(id);
      // 120 idle rounds: far more than one history holds within its bound.
      await loop.env.sleep(minutes * MINUTE);
      await waitForState(id, (s) => s.phase === (kind === 'paused' ? 'paused' : 'sleeping'));
      const later = await historyOf(id);
      expect(later.events).toBeLessThan(500);
      expect(later.runId).not.toBe(first.runId);
      if (kind === 'paused') expect(connection.status).toBe('paused');
      if (kind === 'locked') await recordHistory(loop.env.client, 'connection-idle-continue-as-new', connectionWorkflowId(id), first.runId);
    } finally {
      store.behaviour.enqueue = null;
    }
  });

  it('continues as new every cycle, carrying its state', async () => {
    const { id, handle } = await start({ interval_seconds: 300 });
    const first = await waitForState(id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
    const run1 = (await handle.describe()).runId;
    await loop.env.sleep(7 * MINUTE);
    const second = await waitForState(id, (s) => s.cycles >= 2 && s.phase === 'sleeping');
    expect((await handle.describe()).runId).not.toBe(run1);
    expect(second.next_run_at).not.toBe(first.next_run_at);
    expect(second.last_outcome).toBe('completed');
  });
});
