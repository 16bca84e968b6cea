// Records (with RECORD_HISTORIES=1) and checks the histories of shapes test/replay.test.ts must keep
// replaying: runs recorded before the `bounded-idle-loops`, `task-interruptions`, `schedule-replan`,
// `paused-recheck`, `full-sync-every-nearest-run`, `cron-lists-fixed-times`, `inline-scheduled-job` and `one-marker-cycle` patches, and the reconcile tick. A pre-patch run is the current code with that patch taken as absent (the
// patches-off bundle and a memo on the run; see test/helpers/patches-off), on the time-skipping
// server with stub activities.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ConnectionWorkflowInput } from '../temporal/connection';
import { connectionWorkflowId, syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobInput, SyncJobResult } from '../temporal/sync-job';
import { STEPPED_WAIT_BEHIND_PATCH } from '../workflows/sync-job/bookkeeping';
import { CONNECTION_ID, PROVIDER, TENANT_ID } from '../temporal/search-attributes';
import { waitForState } from './helpers/connection-state';
import { patchIds, recordHistory } from './helpers/histories';
import { PATCHES_OFF_MEMO } from './helpers/patches-off/workflow';
import { stubActivities } from './helpers/stub-activities';
import { createTimeSkippingEnv } from './helpers/temporal';
import { eventually, prebuiltBundle } from './helpers/worker';

const TASK_QUEUE = 'old-shapes';
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

describe('old workflow shapes (time-skipping, stub activities)', () => {
  let env: TestWorkflowEnvironment;
  let worker: Worker;
  let running: Promise<void>;
  const store = stubActivities();

  beforeAll(async () => {
    const [e, bundle] = await Promise.all([createTimeSkippingEnv(), prebuiltBundle('patchesOffBundlePath')]);
    env = e;
    worker = await Worker.create({ connection: env.nativeConnection, taskQueue: TASK_QUEUE, workflowBundle: bundle, activities: store.activities });
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await env?.teardown();
  });

  /**
   * Connection workflows a test started. A test that timed out (the time-skipping server now and
   * then stalls one) never reaches its `finally`: its run is terminated here, so neither the next
   * test nor the test's retry (which starts the same workflow id) meets it still running.
   */
  const started = new Set<string>();
  afterEach(async () => {
    for (const workflowId of started) await env.client.workflow.getHandle(workflowId).terminate('test ended').catch(() => undefined);
    started.clear();
  });

  /** The marker names a history recorded (patched() calls that answered true). */
  async function markers(workflowId: string, runId?: string): Promise<string[]> {
    return patchIds((await env.client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? []);
  }

  /**
   * Starts connection `id`'s workflow with the patches `patchesOff` taken as absent (a run recorded
   * before them), and `one-marker-cycle` too: every shape recorded here is older than it.
   */
  const startConnection = (id: string, patchesOff: string[]) => {
    started.add(connectionWorkflowId(id));
    return env.client.workflow.start('connectionWorkflow', {
      workflowId: connectionWorkflowId(id),
      taskQueue: TASK_QUEUE,
      args: [{ connectionId: id } satisfies ConnectionWorkflowInput],
      typedSearchAttributes: [{ key: CONNECTION_ID, value: id }, { key: TENANT_ID, value: 'acme' }, { key: PROVIDER, value: 'demo' }],
      memo: { [PATCHES_OFF_MEMO]: ['one-marker-cycle', ...patchesOff] },
    });
  };

  it('before bounded-idle-loops, an idle connection loops in one run however long it waits', async () => {
    store.behaviour.enqueue = 'locked';
    const id = '00000000-0000-4000-8000-000000000001';
    store.addConnection(id, await env.currentTimeMs());
    const handle = await startConnection(id, ['bounded-idle-loops', 'inline-scheduled-job']);
    try {
      await waitForState(env, id, (s) => s.phase === 'sleeping');
      // Locked: it looks again every 5 s; 4 minutes are 48 looks, beyond the 25 of the patched shape.
      await env.sleep(4 * MINUTE);
      await waitForState(env, id, (s) => s.phase === 'sleeping');
      const now = await handle.describe();
      const events = (await handle.fetchHistory()).events ?? [];
      const timers = events.filter((e) => e.timerStartedEventAttributes).length;
      expect({ sameRun: now.runId === handle.firstExecutionRunId, moreThan25: timers > 25, markers: await markers(handle.workflowId) })
        .toEqual({ sameRun: true, moreThan25: true, markers: ['lean-cycle'] });
      await recordHistory(env.client, 'connection-idle-loop.pre-bounded-idle-loops', handle.workflowId);
    } finally {
      store.behaviour.enqueue = null;
      await handle.terminate('test done');
    }
  });

  it('before schedule-replan, a replan signal was left unhandled: the queued job stays where it was planned', async () => {
    const id = '00000000-0000-4000-8000-000000000002';
    const connection = store.addConnection(id, await env.currentTimeMs());
    const handle = await startConnection(id, ['schedule-replan', 'inline-scheduled-job']);
    try {
      const sleeping = await waitForState(env, id, (s) => s.phase === 'sleeping' && s.cycles >= 1);
      // The stored schedule changes and the signal comes, as from a newer API to an older worker.
      connection.sync.interval_seconds = 120;
      await handle.signal('replan');
      const after = await waitForState(env, id, (s) => s.phase === 'sleeping');
      const events = (await handle.fetchHistory()).events ?? [];
      const signalled = events.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'replan').length;
      expect({ scheduledAt: after.scheduled_at, pending: after.pending, signalled, markers: await markers(handle.workflowId) })
        .toEqual({ scheduledAt: sleeping.scheduled_at, pending: [], signalled: 1, markers: ['lean-cycle'] });
      await recordHistory(env.client, 'connection-replan-unhandled.pre-schedule-replan', handle.workflowId);
    } finally {
      await handle.terminate('test done');
    }
  });

  it('before full-sync-every-nearest-run, a duration full_sync_every was met exactly: a weekly run whose last full sync was a little under 7 days old stayed incremental', async () => {
    const id = '00000000-0000-4000-8000-000000000006';
    store.addConnection(id, await env.currentTimeMs(), { cron: '0 3 * * 1', full_sync_every: '7d' });
    const handle = await startConnection(id, ['full-sync-every-nearest-run']);
    try {
      await waitForState(env, id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
      await env.sleep(10 * 7 * DAY + 2 * DAY);
      await waitForState(env, id, (s) => s.cycles >= 11 && s.phase === 'sleeping');
      // A run the nearest-run rule makes full (its last full sync at least 3.5 days old) that the
      // exact rule left incremental (under 7 days): jitter leaves one about every other week.
      let lastFull: number | null = null;
      let young: ReturnType<typeof store.jobsOf>[number] | undefined;
      for (const job of store.jobsOf(id).filter((j) => j.trigger === 'schedule' && j.status === 'completed')) {
        if (job.jobType === 'full') lastFull = job.finishedAt!;
        else if (!young && lastFull !== null && job.scheduledAt - lastFull >= 3.5 * DAY && job.scheduledAt - lastFull < 7 * DAY) young = job;
      }
      expect(young, 'a weekly run left incremental by the exact rule').toBeDefined();
      expect(await markers(handle.workflowId, young!.runId)).not.toContain('full-sync-every-nearest-run');
      await recordHistory(env.client, 'connection-full-sync-every-exact.pre-full-sync-every-nearest-run', handle.workflowId, young!.runId);
    } finally {
      await handle.terminate('test done');
    }
  });

  it('before cron-lists-fixed-times, a cron listing 02:30 among its hours skipped it on the day the clock skips 02:30', async () => {
    const id = '00000000-0000-4000-8000-000000000007';
    const zone = 'Europe/Berlin';
    const localDay = (ms: number) => new Intl.DateTimeFormat('sv-SE', { timeZone: zone }).format(new Date(ms));
    // 01:00 UTC of the last Sunday of March (the change) of the first year whose one is days ahead.
    const now = await env.currentTimeMs();
    let change = 0;
    for (let year = new Date(now).getUTCFullYear(); change < now + 3 * DAY; year++) {
      const last = new Date(Date.UTC(year, 3, 0));
      change = Date.UTC(year, 2, last.getUTCDate() - last.getUTCDay(), 1);
    }
    await env.sleep(change - 2 * DAY - now);
    store.addConnection(id, await env.currentTimeMs(), { cron: '30 2,14 * * *', timezone: zone });
    const handle = await startConnection(id, ['cron-lists-fixed-times']);
    try {
      await waitForState(env, id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
      await env.sleep(3 * DAY);
      await waitForState(env, id, (s) => s.cycles >= 6 && s.phase === 'sleeping');
      const planned = store.jobsOf(id).filter((j) => j.status === 'completed' && j.plan?.mode === 'normal');
      const thatDay = planned.filter((j) => localDay(j.plan!.nextDueAt) === localDay(change));
      // Its only run that day is 14:30 (12:30 UTC): the run that planned it, where the two rules differ, has no marker.
      expect(thatDay.map((j) => j.plan!.nextDueAt - change)).toEqual([11.5 * 60 * MINUTE]);
      expect(await markers(handle.workflowId, thatDay[0]!.runId)).not.toContain('cron-lists-fixed-times');
      await recordHistory(env.client, 'connection-cron-list-dst.pre-cron-lists-fixed-times', handle.workflowId, thatDay[0]!.runId);
    } finally {
      await handle.terminate('test done');
    }
  });

  it('before paused-recheck, a recheck signal to a run waiting paused was left unhandled: it waits on, paused', async () => {
    const id = '00000000-0000-4000-8000-000000000005';
    const connection = store.addConnection(id, await env.currentTimeMs());
    connection.status = 'paused';
    const handle = await startConnection(id, ['paused-recheck']);
    try {
      await waitForState(env, id, (s) => s.phase === 'paused');
      // The resume is stored, its signal lost; a newer tick's recheck comes to this older worker.
      connection.status = 'active';
      await handle.signal('recheck');
      const handled = async () => {
        const events = (await handle.fetchHistory()).events ?? [];
        const signalled = events.findIndex((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'recheck');
        return signalled >= 0 && events.slice(signalled).some((e) => e.workflowTaskCompletedEventAttributes) ? events : undefined;
      };
      await eventually(handled);
      const state = await waitForState(env, id, () => true);
      expect({ phase: state.phase, pending: state.pending, markers: await markers(handle.workflowId) })
        .toEqual({ phase: 'paused', pending: [], markers: ['lean-cycle'] });
      await recordHistory(env.client, 'connection-recheck-unhandled.pre-paused-recheck', handle.workflowId);
    } finally {
      await handle.terminate('test done');
    }
  });

  it('before inline-scheduled-job, a cycle ran its job as a `sync-job:` child workflow, then continued as new', async () => {
    const id = '00000000-0000-4000-8000-000000000003';
    store.addConnection(id, await env.currentTimeMs());
    const handle = await startConnection(id, ['inline-scheduled-job']);
    try {
      await waitForState(env, id, (s) => s.cycles >= 1 && s.phase === 'sleeping');
      const events = (await env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId).fetchHistory()).events ?? [];
      const children = events.flatMap((e) => e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId ?? []);
      const [job] = store.jobsOf(id);
      expect({ children, jobStatus: job?.status, markers: await markers(handle.workflowId, handle.firstExecutionRunId) })
        .toEqual({ children: [syncJobWorkflowId(job!.id)], jobStatus: 'completed', markers: ['lean-cycle'] });
      await recordHistory(env.client, 'connection-cycle.pre-inline-scheduled-job', handle.workflowId, handle.firstExecutionRunId);
    } finally {
      await handle.terminate('test done');
    }
  });

  /** Runs a one-task job of a fresh stub connection with `task-interruptions` taken as absent. */
  async function runJobWithoutInterruptions(answer: 'skipped' | 'shutdown') {
    const connectionId = randomUUID();
    store.addConnection(connectionId, await env.currentTimeMs());
    const jobId = randomUUID();
    store.jobs.set(jobId, {
      id: jobId, connectionId, jobType: 'full', trigger: 'api', status: 'queued', scheduledAt: await env.currentTimeMs(), finishedAt: null, abandoned: false,
    });
    store.behaviour.taskAnswers = [answer];
    const retriesBefore = store.calls.get('markJobRetrying') ?? 0;
    const result = await env.client.workflow.execute<(input: SyncJobInput) => Promise<SyncJobResult>>('syncJobWorkflow', {
      workflowId: syncJobWorkflowId(jobId),
      taskQueue: TASK_QUEUE,
      args: [{ jobId, connectionId }],
      // Runs of that time predate the stepped wait behind a running job too.
      memo: { [PATCHES_OFF_MEMO]: ['task-interruptions', STEPPED_WAIT_BEHIND_PATCH] },
    });
    return { jobId, result, retries: (store.calls.get('markJobRetrying') ?? 0) - retriesBefore };
  }

  it('before task-interruptions, a skipped task counted as done and a shut-down one as a failed attempt', async () => {
    const skipped = await runJobWithoutInterruptions('skipped');
    expect({ status: skipped.result.status, retries: skipped.retries, markers: await markers(syncJobWorkflowId(skipped.jobId)) })
      .toEqual({ status: 'completed', retries: 0, markers: ['lean-job'] });
    await recordHistory(env.client, 'sync-job-task-skipped.pre-task-interruptions', syncJobWorkflowId(skipped.jobId));

    const shutdown = await runJobWithoutInterruptions('shutdown');
    const failures = store.calls.get('recordAttemptFailure') ?? 0;
    expect({ status: shutdown.result.status, retries: shutdown.retries, counted: failures > 0, markers: await markers(syncJobWorkflowId(shutdown.jobId)) })
      .toEqual({ status: 'completed', retries: 1, counted: true, markers: ['lean-job'] });
    await recordHistory(env.client, 'sync-job-worker-shutdown.pre-task-interruptions', syncJobWorkflowId(shutdown.jobId));
  });

  it('the reconcile tick: a reconcile, a reap and a retention pass per tick, then a durable sleep', async () => {
    const handle = await env.client.workflow.start('reconcileWorkflow', {
      workflowId: 'synctide-reconcile', taskQueue: TASK_QUEUE, args: [{ tickSeconds: 60, retentionDays: 7 }],
    });
    try {
      await eventually(async () => ((store.calls.get('reconcileConnections') ?? 0) >= 1 ? true : undefined));
      await env.sleep(3 * MINUTE);
      await eventually(async () => ((store.calls.get('reconcileConnections') ?? 0) >= 4 ? true : undefined));
      expect({ retention: store.behaviour.retentionDays, reaps: (store.calls.get('reapStaleTasks') ?? 0) >= 3 }).toEqual({ retention: [7], reaps: true });
      await recordHistory(env.client, 'reconcile-ticks', handle.workflowId);
    } finally {
      await handle.terminate('test done');
    }
  });
});
