// Schedule lag: actual job start (`sync_jobs.started_at`, the workflow clock of the run that
// claims the job) − `scheduled_at`, for N connections at 60 s intervals (the smallest allowed). Demo
// connections with one resource and one record; the real Synctide worker (production options,
// a pool of 10) and its reconcile tick every 60 s. Each connection bootstraps when its workflow
// starts (cycle 0: run now), so its timer-driven cycles come due as the bootstraps came: spread
// over the tick in a cold start, or in a burst as wide as the bootstrap took when every workflow
// is started at once (`api`, below). Two jitter settings: `none` (JITTER_PCT_MIN = MAX = 0,
// so `scheduled_at` is exactly L + 60 s: the harshest shape for a given N) and `default` (0–20 %
// of the interval, as a deployment runs, which spreads the burst over 12 s).
// BENCH_LAG_START says who starts the workflows: `reconcile` (default: a cold start, as a
// deployment meets one: the connections exist, and the reconcile tick's first look finds every
// workflow missing and starts them spread evenly over its 60 s tick) or `api` (the bench starts
// them all, 50 at a time, as the API starts one per created connection: the harshest burst).
// N: 100, 300, 1,000 and 2,000 by default (BENCH_CONNECTIONS, comma-separated); jitters `none`
// and `default` (BENCH_LAG_JITTER). Each scenario gets a fresh database and a fresh dev server,
// and runs until every connection has started BENCH_LAG_CYCLES (default 2) timer-driven jobs
// after its bootstrap job.
import pMap from 'p-map';
import { ensureConnectionWorkflow, ensureReconcileWorkflow } from '../temporal/client';
import type { Pool } from '../db/pool';
import { RECONCILE_WORKFLOW_ID } from '../temporal/ids';
import { DEFAULT_SCHEDULE_SETTINGS } from '../policy/schedule';
import {
  activityDurations,
  type BenchStack,
  cpuMeter,
  eventMs,
  EventType,
  formatCpu,
  type HistoryEvent,
  msSince,
  NO_JITTER,
  percentile,
  runBench,
  sleep,
  startSynctideWorker,
  table,
} from './stack';

const SIZES = (process.env.BENCH_CONNECTIONS ?? '100,300,1000,2000').split(',').map(Number);
const JITTERS = (process.env.BENCH_LAG_JITTER ?? 'none,default').split(',') as ('none' | 'default')[];
const CYCLES = Number(process.env.BENCH_LAG_CYCLES ?? 2);
const START = process.env.BENCH_LAG_START === 'api' ? 'api' : 'reconcile';
const INTERVAL_SECONDS = 60;
const TASK_QUEUE = 'bench-lag';

/** A timer-driven job whose run fired no timer for it: it was due when its run planned it. */
const NO_TIMER = 'no timer';

await runBench(
  'schedule-lag',
  `connections ${SIZES.join(', ')} at ${INTERVAL_SECONDS} s, jitter ${JITTERS.join(' and ')}, ${CYCLES} timer-driven cycles after bootstrap`,
  async (stack) => {
    let first = true;
    for (const jitter of JITTERS) {
      for (const n of SIZES) {
        if (!first) await stack.restartTemporal();
        first = false;
        await scenario(stack, n, jitter);
      }
    }
  },
);

interface JobRow {
  connection_id: string;
  id: string;
  cycle: number;
  status: string;
  scheduled_ms: number;
  started_ms: number | null;
  finished_ms: number | null;
  /** The connection run that enqueued the job (and, since jobs run inline, ran it). */
  scheduler_run_id: string | null;
}

async function scenario(stack: BenchStack, n: number, jitterMode: 'none' | 'default') {
  const db = await stack.freshDatabase();
  const settings = jitterMode === 'none' ? NO_JITTER : DEFAULT_SCHEDULE_SETTINGS;
  const worker = await startSynctideWorker(stack, { taskQueue: TASK_QUEUE, settings, dbUrl: db.url });
  let sampler: ReturnType<typeof sampleContention> | undefined;
  let endMs: number;
  let startSeconds: number;
  let t0Ms = 0;
  let cpu: string;
  try {
    // As `npm run worker` does: the reconcile tick runs (every 60 s, ensuring every workflow).
    if (START === 'api') await ensureReconcileWorkflow(stack.client, TASK_QUEUE, 60, 7);
    const { rows: connections } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
       select 'bench', 'demo', 'lag-' || i, '{"resource_types": ["items"], "records_per_resource": 1, "page_size": 1}',
              $1
         from generate_series(1, $2::int) as i returning id`,
      [{ sync: { interval_seconds: INTERVAL_SECONDS } }, n],
    );
    const meter = cpuMeter(stack);
    sampler = sampleContention(db.pool, worker.pool);
    const t0 = process.hrtime.bigint();
    t0Ms = Date.now();
    const ensure = (c: (typeof connections)[number]) =>
      ensureConnectionWorkflow(stack.client, TASK_QUEUE, { id: c.id, tenantId: 'bench', providerSlug: 'demo' });
    if (START === 'api') await pMap(connections, ensure, { concurrency: 50 });
    else await ensureReconcileWorkflow(stack.client, TASK_QUEUE, 60, 7);
    startSeconds = msSince(t0) / 1000;

    const deadline = Date.now() + n * 60 + (CYCLES + 1) * INTERVAL_SECONDS * 1000 + 120_000;
    let lastLog = Date.now();
    for (;;) {
      const { rows } = await db.pool.query<{ done: number; jobs: number }>(
        `select count(*) filter (where started >= $1)::int as done, coalesce(sum(started), 0)::int as jobs
           from (select c.id, count(j.started_at) as started
                   from connections c left join sync_jobs j on j.connection_id = c.id group by c.id) x`,
        [CYCLES + 1],
      );
      if (rows[0]!.done >= n) break;
      if (Date.now() > deadline) {
        console.log(`NOTE: deadline reached with ${rows[0]!.done} of ${n} connections through ${CYCLES} cycles`);
        break;
      }
      if (Date.now() - lastLog > 30_000) {
        console.error(`  … n=${n}: ${rows[0]!.jobs} jobs started, ${rows[0]!.done} connections done, ${(msSince(t0) / 1000).toFixed(0)} s`);
        lastLog = Date.now();
      }
      await sleep(2000);
    }
    endMs = Date.now();
    cpu = formatCpu(meter.read());
  } finally {
    await sampler?.stop();
    await worker.stop();
  }

  const { rows: jobs } = await db.pool.query<JobRow>(
    `select connection_id, id, status, scheduler_run_id,
            (row_number() over (partition by connection_id order by scheduled_at) - 1)::int as cycle,
            extract(epoch from scheduled_at) * 1000 as scheduled_ms,
            extract(epoch from started_at) * 1000 as started_ms,
            extract(epoch from finished_at) * 1000 as finished_ms
       from sync_jobs`,
  );
  for (const j of jobs) {
    j.scheduled_ms = Number(j.scheduled_ms);
    j.started_ms = j.started_ms === null ? null : Number(j.started_ms);
    j.finished_ms = j.finished_ms === null ? null : Number(j.finished_ms);
  }
  const jitter = await db.pool.query<{ max: number | null }>(
    `select max((metadata -> 'sync' ->> 'last_jitter_seconds')::numeric)::float8 as max from connections`,
  );

  const lagS = (j: JobRow) => (j.started_ms! - j.scheduled_ms) / 1000;
  const summarize = (label: string, set: JobRow[]) => {
    const started = set.filter((j) => j.started_ms !== null);
    const due = set.filter((j) => j.started_ms === null && j.scheduled_ms < endMs - 2000);
    const lags = started.map(lagS).sort((a, b) => a - b);
    const durations = started.filter((j) => j.finished_ms !== null).map((j) => j.finished_ms! - j.started_ms!).sort((a, b) => a - b);
    const sched = set.map((j) => j.scheduled_ms);
    const window = sched.length ? (Math.max(...sched) - Math.min(...sched)) / 1000 : 0;
    return [
      label,
      started.length,
      set.filter((j) => j.status === 'completed').length,
      set.filter((j) => j.status === 'failed' || j.status === 'cancelled').length,
      due.length,
      percentile(lags, 50).toFixed(3),
      percentile(lags, 99).toFixed(3),
      (lags.at(-1) ?? Number.NaN).toFixed(3),
      lags.filter((l) => l > 1).length,
      window.toFixed(1),
      percentile(durations, 50).toFixed(0),
    ];
  };
  const timerDriven = jobs.filter((j) => j.cycle >= 1 && j.cycle <= CYCLES);
  console.log(`N = ${n} connections, jitter ${jitterMode} (workflows started by ${START === 'api' ? 'the bench' : 'the reconcile tick'}${START === 'api' ? ` in ${startSeconds.toFixed(1)} s` : ''}; max last_jitter_seconds ${jitter.rows[0]?.max ?? 'n/a'})`);
  table(
    ['cycle', 'started', 'completed', 'failed', 'due, not started', 'lag p50 s', 'p99 s', 'max s', '> 1 s', 'due window s', 'job p50 ms'],
    [
      summarize('0 (bootstrap)', jobs.filter((j) => j.cycle === 0)),
      ...Array.from({ length: CYCLES }, (_, c) => summarize(String(c + 1), jobs.filter((j) => j.cycle === c + 1))),
      summarize(`1–${CYCLES} (timer)`, timerDriven),
    ],
  );
  // The cold start as a whole: from the bench's first start call (of a workflow, or of the reconcile
  // tick that starts them) to the last bootstrap job's start; and from the first bootstrap job's.
  const bootstrapStarts = jobs.filter((j) => j.cycle === 0 && j.started_ms !== null).map((j) => j.started_ms!);
  const burstS = bootstrapStarts.length ? (Math.max(...bootstrapStarts) - t0Ms) / 1000 : Number.NaN;
  const widthS = bootstrapStarts.length ? (Math.max(...bootstrapStarts) - Math.min(...bootstrapStarts)) / 1000 : Number.NaN;
  console.log(
    `bootstrap burst: ${bootstrapStarts.length} of ${n} bootstrap jobs started, the last ${burstS.toFixed(1)} s after the first start call ` +
      `(${burstS <= INTERVAL_SECONDS ? 'within' : 'NOT within'} one ${INTERVAL_SECONDS} s interval), ${widthS.toFixed(1)} s after the first bootstrap job`,
  );
  console.log(cpu);
  sampler!.print();

  // Where the timer-driven lag goes, from the histories: how late the timer was set to fire and how
  // late the server fired it, then the connection run's workflow task (queue wait, then its run up
  // to the claim). A job run inline is claimed in that task; an older-shape child job adds its start
  // and its own first task's queue wait.
  const started = timerDriven.filter((j) => j.started_ms !== null).sort((a, b) => lagS(b) - lagS(a));
  const worst = started.slice(0, 10);
  const step = Math.max(1, Math.floor(started.length / 40));
  const sample = started.filter((_, i) => i % step === 0).slice(0, 40);
  let untimed = 0;
  const split = async (set: JobRow[]) => {
    const parts = await pMap(set, (j) => lagParts(stack, j), { concurrency: 10 });
    const ok = parts.filter((p): p is LagParts => p !== null && p !== NO_TIMER);
    const noTimer = parts.filter((p) => p === NO_TIMER).length;
    untimed += noTimer;
    const mean = (k: keyof LagParts) => ok.reduce((s, p) => s + p[k], 0) / Math.max(ok.length, 1);
    perCycle = ok.length ? { tasks: mean('tasks'), activities: mean('activities'), children: mean('children') } : perCycle;
    const n = noTimer ? `${ok.length} (+${noTimer} no timer)` : ok.length;
    return [n, ...(['timerSet', 'timerFired', 'parentQueue', 'parentRun', 'childStart', 'childQueue', 'total'] as const).map((k) => mean(k).toFixed(0))];
  };
  let perCycle: { tasks: number; activities: number; children: number } | undefined;
  console.log('timer-driven lag split (mean ms, from workflow histories):');
  table(
    ['jobs', 'n', 'timer set late', 'timer fired late', 'connection WFT queue', 'WFT run to claim/child', 'child start', 'child WFT queue', 'total'],
    [['10 worst', ...(await split(worst))], ['spread sample', ...(await split(sample))]],
  );
  if (untimed) {
    console.log(
      `  "no timer": the job's run set no timer for it, because the job was already due when that run planned it (the run ` +
        'reached its planning only after the due time): a catch-up, run at once; its lag is how late its run got there',
    );
  }

  if (perCycle) {
    console.log(
      `one timer-driven cycle (connection run + its job) = ${perCycle.tasks.toFixed(1)} workflow tasks + ` +
        `${perCycle.activities.toFixed(1)} activities + ${perCycle.children.toFixed(1)} child workflow starts, and a continue-as-new`,
    );
  }
  const ticks = (await activityDurations(stack.client, RECONCILE_WORKFLOW_ID)).filter((a) => a.name === 'reconcileConnections');
  const calls = (t: (typeof ticks)[number]) => (t.result as { temporalCalls?: number } | undefined)?.temporalCalls ?? '?';
  console.log(`reconcile ticks (run time, Temporal calls): ${ticks.map((t) => `${(t.execMs / 1000).toFixed(1)} s/${calls(t)}`).join(', ') || 'none'}`);
  console.log('');
  await db.pool.end();
}

interface LagParts {
  /** Workflow tasks, activities and child starts of the whole cycle: the connection run and its job. */
  tasks: number;
  activities: number;
  children: number;
  /** How much later than the job's due time the timer was set to fire (the planning task's run after its last local activity). */
  timerSet: number;
  /** How much later than it was set to the server fired it. */
  timerFired: number;
  parentQueue: number;
  parentRun: number;
  childStart: number;
  childQueue: number;
  total: number;
}

/** Splits one job's lag along its connection run's history and a child job's own (null when a piece is missing). */
async function lagParts(stack: BenchStack, job: JobRow): Promise<LagParts | typeof NO_TIMER | null> {
  if (!job.scheduler_run_id) return null;
  const parent = (await stack.client.workflow.getHandle(`connection:${job.connection_id}`, job.scheduler_run_id).fetchHistory()).events ?? [];
  const childId = `sync-job:${job.id}`;
  const initiatedAt = parent.findIndex(
    (e) =>
      e.eventType === EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED &&
      e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId === childId,
  );
  const firedAt = parent.findIndex((e) => e.eventType === EventType.EVENT_TYPE_TIMER_FIRED);
  if (firedAt < 0) return parent.some((e) => e.eventType === EventType.EVENT_TYPE_TIMER_STARTED) ? null : NO_TIMER;
  const fired = parent[firedAt]!;
  // The timer that fired. The server starts it when the task that planned it completes and fires
  // it `duration` later; the duration counts from the workflow's clock, which stands at the task's
  // start, moved on to each local activity's completion. So "set late" is the task's run after its
  // last local activity, "fired late" the server's own delay.
  const startedId = String(fired.timerFiredEventAttributes?.startedEventId ?? '');
  const timerStarted = parent.find((e) => String(e.eventId ?? '') === startedId);
  if (!timerStarted) return null;
  const timeout = timerStarted.timerStartedEventAttributes?.startToFireTimeout;
  const setToFireAt = eventMs(timerStarted) + Number(timeout?.seconds ?? 0) * 1000 + Math.floor((timeout?.nanos ?? 0) / 1e6);
  const wftStarted = parent.slice(firedAt).find((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED);
  if (!wftStarted) return null;
  const count = (events: HistoryEvent[], type: number) => events.filter((e) => e.eventType === type).length;
  const base = {
    timerSet: setToFireAt - job.scheduled_ms,
    timerFired: eventMs(fired) - setToFireAt,
    parentQueue: eventMs(wftStarted) - eventMs(fired),
    total: job.started_ms! - job.scheduled_ms,
  };
  if (initiatedAt < 0) {
    // Run inline: the claim is the first step of the task the timer woke.
    return {
      ...base,
      tasks: count(parent, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
      activities: count(parent, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED),
      children: 0,
      parentRun: job.started_ms! - eventMs(wftStarted),
      childStart: 0,
      childQueue: 0,
    };
  }
  const child = (await stack.client.workflow.getHandle(childId).fetchHistory()).events ?? [];
  const startedEvent = child.find((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED);
  const firstWft = child.find((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED);
  if (!startedEvent || !firstWft) return null;
  const initiated = eventMs(parent[initiatedAt]!);
  return {
    ...base,
    tasks: count(parent, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) + count(child, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
    activities: count(parent, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) + count(child, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED),
    children: 1,
    parentRun: initiated - eventMs(wftStarted),
    childStart: eventMs(startedEvent) - initiated,
    childQueue: eventMs(firstWft) - eventMs(startedEvent),
  };
}

/**
 * Samples, once a second, Postgres backends of this database waiting on a lock (with the blocked
 * and the blocking statement) and the worker pool's clients waiting for a free connection.
 */
function sampleContention(pool: Pool, workerPool: Pool) {
  let samples = 0;
  let lockSamples = 0;
  let maxLockWaits = 0;
  let poolSamples = 0;
  let maxPoolWaiting = 0;
  const blocked = new Map<string, number>();
  const blockers = new Map<string, number>();
  const key = (q: string | null) => (q ?? '?').replace(/\s+/g, ' ').trim().slice(0, 60);
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const waiting = workerPool.waitingCount;
        const { rows } = await pool.query<{ query: string | null; blocker: string | null }>(
          `select a.query, b.query as blocker
             from pg_stat_activity a
             left join lateral unnest(pg_blocking_pids(a.pid)) as bp(pid) on true
             left join pg_stat_activity b on b.pid = bp.pid
            where a.datname = current_database() and a.wait_event_type = 'Lock'`,
        );
        samples += 1;
        if (waiting > 0) poolSamples += 1;
        maxPoolWaiting = Math.max(maxPoolWaiting, waiting);
        if (rows.length > 0) lockSamples += 1;
        maxLockWaits = Math.max(maxLockWaits, new Set(rows.map((r) => r.query)).size);
        for (const r of rows) {
          blocked.set(key(r.query), (blocked.get(key(r.query)) ?? 0) + 1);
          blockers.set(key(r.blocker), (blockers.get(key(r.blocker)) ?? 0) + 1);
        }
      } catch {
        // the database is going away
      }
      await sleep(1000);
    }
  })();
  const top = (m: Map<string, number>) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([k, n]) => `${n}× ${k}`).join('; ') || 'none';
  return {
    async stop() {
      running = false;
      await loop;
    },
    print() {
      const pct = (n: number) => `${((n / Math.max(samples, 1)) * 100).toFixed(0)}%`;
      console.log(
        `contention (${samples} one-second samples): a backend waited on a row lock in ${pct(lockSamples)} of samples ` +
          `(up to ${maxLockWaits} at once); the worker's pool (10) had callers waiting for a connection in ${pct(poolSamples)} ` +
          `(up to ${maxPoolWaiting})`,
      );
      console.log(`  waiting statements: ${top(blocked)}`);
      console.log(`  held by: ${top(blockers)}`);
    },
  };
}
