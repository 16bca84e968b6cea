// Tenant fairness: tenant B's immediate-sync latency and scheduled lag alone, and again while
// tenant A floods immediate syncs and due jobs, on one worker with the default tenant limits
// (TENANT_MAX_IMMEDIATE_SYNCS, TENANT_MAX_RUNNING_JOBS), the default activity slots and pool size,
// and the immediate-sync worker (its own queue, IMMEDIATE_SYNC_SLOTS and pool), as `npm run worker`
// runs them; the real API (createApp over real HTTP) with the default tenant limits in front.
// Phase "alone": B makes BENCH_FAIR_IMMEDIATE (default 100, so that the nearest-rank p99 is not
// the slowest of all) immediate syncs (POST /sync immediate, BENCH_FAIR_B_IN_FLIGHT at once,
// default 1), each on its own small demo connection →
// answer latency; then BENCH_FAIR_SCHEDULED (default 100, so that the nearest-rank p99 is not the
// latest of all either) connections of B become due at once
// (their connection workflows start, cycle 0 runs now) → scheduled lag, `started_at −
// scheduled_at` of their jobs, and due → sync start, their first sync task's `started_at −
// scheduled_at` (with the time the sync waited at the worker's gate, which the job's started_at,
// set at its claim, does not hold). Phase "flooded": the same for B while A keeps
// BENCH_FAIR_A_IN_FLIGHT (default 12) slow immediate syncs asked for continuously (a refused one
// is asked again after 100 ms) and BENCH_FAIR_A_DUE (default 200) slow connections of A came due
// at once just before. Each slow sync of A reads BENCH_FAIR_A_PAGES (default 50) pages of one
// record, 200 ms apart (demo latency_ms). BENCH_FAIR_A_RUNNING_JOBS gives A (only) a running-jobs
// limit of its own, as the admin's override.
// Where they run (BENCH_FAIR_PROCESSES): "one" (default) runs the API and both workers inside the
// bench's own process, beside A's and B's clients; "split" runs them as a deployment does, the
// compiled `dist/api.js` and `dist/worker.js` (after `npm run build`) as processes of their own,
// configured through their environment with the defaults, so that the bench process holds only
// the clients. Either way A and B each call with an API key of their own tenant.
import { randomBytes } from 'node:crypto';
import pMap from 'p-map';
import { createPool, type Pool } from '../db/pool';
import { poolSize, workflowCacheSize } from '../infra/boot';
import { listen } from '../lib/http';
import { freePort } from '../lib/ports';
import { immediateTaskQueue, loadConfig, tenantLimits } from '../lib/config';
import { JOB_STATUS, JOB_TRIGGER } from '../policy/vocabulary';
import { ensureConnectionWorkflow } from '../temporal/client';
import { createImmediateWorker, createWorker, SDK_DEFAULT_SLOTS } from '../workers/create-worker';
import { LaneGate } from '../workers/lane-gate';
import { BENCH_ADMIN_KEY, benchApp } from './api-app';
import { benchActivityDeps } from './deps';
import {
  type BenchStack,
  benchCpu,
  cpuMeter,
  formatCpu,
  msSince,
  NO_JITTER,
  percentile,
  productionEnv,
  type ProductionProcess,
  runBench,
  runWorker,
  sleep,
  spawnProductionProcess,
  synctideBundle,
  eventMs,
  historyBreakdown,
  table,
  treeCpuSeconds,
} from './stack';
import { immediateSyncWorkflowId } from '../temporal/ids';

const B_IMMEDIATE = Number(process.env.BENCH_FAIR_IMMEDIATE ?? 100);
const B_IN_FLIGHT = Number(process.env.BENCH_FAIR_B_IN_FLIGHT ?? 1);
const B_SCHEDULED = Number(process.env.BENCH_FAIR_SCHEDULED ?? 100);
const A_IN_FLIGHT = Number(process.env.BENCH_FAIR_A_IN_FLIGHT ?? 12);
const A_DUE = Number(process.env.BENCH_FAIR_A_DUE ?? 200);
const A_PAGES = Number(process.env.BENCH_FAIR_A_PAGES ?? 50);
/** Tenant A's running-jobs limit, set by the admin as A's override (PATCH /tenants/tenant-a/limits); unset: the default. */
const A_RUNNING_JOBS = process.env.BENCH_FAIR_A_RUNNING_JOBS ? Number(process.env.BENCH_FAIR_A_RUNNING_JOBS) : undefined;
const TASK_QUEUE = 'bench-fairness';
const PROCESSES = process.env.BENCH_FAIR_PROCESSES || 'one';
if (PROCESSES !== 'one' && PROCESSES !== 'split') throw new Error(`BENCH_FAIR_PROCESSES must be one or split (got ${JSON.stringify(PROCESSES)})`);
/**
 * Configuration as a deployment gets it when it sets nothing: the default limits and slots; the
 * worker's WORKER_TARGET_CPU (its default, or the shell's), passed on to the split worker
 * explicitly: productionEnv keeps the shell's Synctide variables out.
 */
const config = loadConfig({ TEMPORAL_TASK_QUEUE: TASK_QUEUE, WORKER_TARGET_CPU: process.env.WORKER_TARGET_CPU });
const LIMITS = tenantLimits(config);

/** A's syncs: slow (A_PAGES pages of one record, 200 ms apart). B's: two pages, no latency. */
const SLOW = { resource_types: ['items'], records_per_resource: A_PAGES, page_size: 1, latency_ms: 200 };
const FAST = { resource_types: ['items'], records_per_resource: 2, page_size: 1 };
/** Connections' schedules: the first job runs now (cycle 0), the next a day later. */
const DAY = { sync: { interval_seconds: 86_400 } };

await runBench(
  'tenant-fairness',
  `tenant B: ${B_IMMEDIATE} immediate syncs (${B_IN_FLIGHT} in flight), ${B_SCHEDULED} connections due at once; ` +
    `tenant A flooding: ${A_IN_FLIGHT} slow immediate syncs in flight, ${A_DUE} slow connections due at once; ` +
    `limits per tenant: ${LIMITS.immediateSyncs} immediate syncs, ${LIMITS.runningJobs} running jobs${A_RUNNING_JOBS === undefined ? '' : ` (A's override: ${A_RUNNING_JOBS})`}; ` +
    `immediate slots ${config.IMMEDIATE_SYNC_SLOTS}, activity slots up to ${SDK_DEFAULT_SLOTS.activities}, the scheduled lane yielding to immediate syncs above WORKER_TARGET_CPU ${config.WORKER_TARGET_CPU}; ` +
    (PROCESSES === 'split' ? 'API and worker: dist/api.js and dist/worker.js, processes of their own' : 'API and workers inside the bench process'),
  main,
);

interface Figures {
  immediate: number[];
  lag: number[];
  /** B's due jobs: their first sync task's `started_at − scheduled_at` (ms): with the time their sync waited at the worker's gate, which the job's started_at, set at its claim, does not hold. */
  synced: number[];
  /** Each immediate sync: its connection, when it was asked (epoch ms) and its latency. */
  samples: { connectionId: string; askedAt: number; ms: number }[];
}

/** What serves the bench: the API's URL, the processes' CPU so far (split only), and how to stop. */
interface Serving {
  apiUrl: string;
  adminKey: string;
  /** CPU seconds of the API and worker processes, each with its children (split only). */
  cpu(): Record<string, number> | null;
  stop(): Promise<void>;
}

/** The API (createApp over real HTTP) and both workers inside this process. */
async function serveInProcess(stack: BenchStack): Promise<Serving> {
  const workerPool = createPool(stack.dbUrl, config.DATABASE_POOL_MAX);
  const immediatePool = createPool(stack.dbUrl, poolSize(config, 'immediate'));
  const activities = benchActivityDeps({ pool: workerPool, client: stack.client, taskQueue: TASK_QUEUE, settings: NO_JITTER, tenantLimits: LIMITS });
  // One gate for both lanes, as `npm run worker` has.
  const lanes = new LaneGate(config.WORKER_TARGET_CPU, benchCpu().current);
  const worker = runWorker(
    await createWorker({
      connection: stack.nativeConnection,
      namespace: 'default',
      shutdownGraceSeconds: 5,
      workflowBundle: await synctideBundle(),
      activities,
      maxCachedWorkflows: workflowCacheSize(config),
      lanes,
    }),
  );
  const immediateWorker = runWorker(
    await createImmediateWorker({
      connection: stack.nativeConnection,
      namespace: 'default',
      shutdownGraceSeconds: 5,
      taskQueue: immediateTaskQueue(config),
      slots: config.IMMEDIATE_SYNC_SLOTS,
      lanes,
      workflowBundle: await synctideBundle(),
      activities,
      // Its own pool, as a worker process has (2 × IMMEDIATE_SYNC_SLOTS connections).
      pool: immediatePool,
    }),
  );
  const app = benchApp(stack, {
    taskQueue: TASK_QUEUE,
    immediateTaskQueue: immediateTaskQueue(config),
    immediateSyncTimeoutMs: config.IMMEDIATE_SYNC_TIMEOUT_SECONDS * 1000,
    tenantLimits: LIMITS,
  });
  const api = await listen(app, '127.0.0.1', 0);
  return {
    apiUrl: api.url,
    adminKey: BENCH_ADMIN_KEY,
    cpu: () => null,
    async stop() {
      await api.close();
      await immediateWorker.stop();
      await worker.stop();
      await workerPool.end();
      await immediatePool.end();
    },
  };
}

/**
 * `dist/worker.js` and `dist/api.js` as processes of their own, each configured through its
 * environment with the defaults (limits, slots, pools, the API's per-key rate limit), no jitter
 * (as the in-process worker), the demo provider on, and one credentials key for both.
 */
async function serveSplit(stack: BenchStack): Promise<Serving> {
  const common = {
    DATABASE_URL: stack.dbUrl,
    TEMPORAL_ADDRESS: stack.temporal.address,
    TEMPORAL_NAMESPACE: 'default',
    TEMPORAL_TASK_QUEUE: TASK_QUEUE,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    DEMO_CONNECTOR: 'true',
  };
  const processes: Record<string, ProductionProcess> = {};
  const stopAll = async () => {
    for (const p of Object.values(processes).reverse()) await p.stop();
  };
  try {
    processes.worker = await spawnProductionProcess(
      'worker',
      productionEnv({
        ...common,
        WORKER_METRICS_PORT: String(await freePort()),
        METRICS_PUBLIC: 'true',
        WORKER_SHUTDOWN_GRACE_SECONDS: '5',
        JITTER_PCT_MIN: '0',
        JITTER_PCT_MAX: '0',
        WORKER_TARGET_CPU: String(config.WORKER_TARGET_CPU),
      }),
      'worker started',
    );
    const apiPort = await freePort();
    // A random admin key: the production API refuses one that looks like a placeholder.
    const adminKey = randomBytes(24).toString('hex');
    processes.API = await spawnProductionProcess('api', productionEnv({ ...common, ADMIN_API_KEY: adminKey, API_PORT: String(apiPort) }), 'api listening');
    return {
      apiUrl: `http://127.0.0.1:${apiPort}`,
      adminKey,
      cpu: () => Object.fromEntries(Object.entries(processes).map(([name, p]) => [name, treeCpuSeconds(p.pid)])),
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** Samples what the immediate-sync pool's active statements wait for (pg_stat_activity), until stop(). */
function sampleWaits(pool: Pool) {
  const counts = new Map<string, number>();
  let samples = 0;
  let going = true;
  const loop = (async () => {
    while (going) {
      const { rows } = await pool.query<{ wait: string }>(
        `select coalesce(wait_event_type || ':' || wait_event, 'on CPU') as wait from pg_stat_activity
          where application_name = 'synctide-immediate' and state = 'active'`,
      );
      samples += 1;
      for (const r of rows) counts.set(r.wait, (counts.get(r.wait) ?? 0) + 1);
      await sleep(50);
    }
  })();
  return {
    async stop() {
      going = false;
      await loop;
      const seen = [...counts].sort((x, y) => y[1] - x[1]).map(([w, n]) => `${w} ${n}`);
      return `${samples} samples; active statements by wait: ${seen.join(', ') || 'none'}`;
    },
  };
}

/**
 * BENCH_FAIR_EXPLAIN: where B's five slowest flooded answers spent their time, from their
 * immediate-sync workflows' histories: before the workflow started (the API: auth, the lease, the
 * start call), its workflow tasks' queue and run, its activities' queue and run, and after its
 * last event (the result reaching the API, the lease's release, the answer).
 */
async function explain(stack: BenchStack, samples: Figures['samples']) {
  const slowest = [...samples].sort((x, y) => y.ms - x.ms).slice(0, 5);
  const t0 = samples[0]?.askedAt ?? 0;
  const rows: string[][] = [];
  for (const s of slowest) {
    const id = immediateSyncWorkflowId(s.connectionId);
    const events = (await stack.client.workflow.getHandle(id).fetchHistory()).events ?? [];
    const b = await historyBreakdown(stack.client, id);
    const first = eventMs(events[0]!);
    const last = eventMs(events[events.length - 1]!);
    rows.push([
      ((s.askedAt - t0) / 1000).toFixed(1),
      s.ms.toFixed(0),
      (first - s.askedAt).toFixed(0),
      `${b.workflowTasks}: ${b.wftQueue.toFixed(0)} / ${b.wftExec.toFixed(0)}`,
      `${b.activities}: ${b.activityQueue.toFixed(0)} / ${b.activityExec.toFixed(0)}`,
      (s.askedAt + s.ms - last).toFixed(0),
    ]);
  }
  console.log("\nB's five slowest flooded answers (ms; the clocks of this process and the dev server agree on one host):");
  table(['asked at s', 'answer', 'before start', 'workflow tasks: queue / run', 'activities: queue / run', 'after last event'], rows);
}

/** A tenant API key of `tenant` (read and write), made with the admin key. */
async function tenantKey(serving: Serving, tenant: string): Promise<string> {
  const res = await fetch(`${serving.apiUrl}/tenants/${tenant}/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${serving.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'tenant-fairness bench' }),
  });
  if (res.status !== 201) throw new Error(`creating ${tenant}'s API key answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { secret: string }).secret;
}

/** Sets `tenant`'s running-jobs limit as the admin does. */
async function overrideRunningJobs(serving: Serving, tenant: string, value: number): Promise<void> {
  const res = await fetch(`${serving.apiUrl}/tenants/${tenant}/limits`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${serving.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ max_running_jobs: value }),
  });
  if (res.status !== 200) throw new Error(`setting ${tenant}'s running-jobs limit answered ${res.status}: ${await res.text()}`);
}

/** A tenant's client: its API key, against the bench's API. */
interface Caller {
  apiUrl: string;
  key: string;
}

async function main(stack: BenchStack) {
  const serving = PROCESSES === 'split' ? await serveSplit(stack) : await serveInProcess(stack);
  try {
    const b: Caller = { apiUrl: serving.apiUrl, key: await tenantKey(serving, 'tenant-b') };
    const aCaller: Caller = { apiUrl: serving.apiUrl, key: await tenantKey(serving, 'tenant-a') };
    if (A_RUNNING_JOBS !== undefined) await overrideRunningJobs(serving, 'tenant-a', A_RUNNING_JOBS);
    // A few of B's syncs and due jobs first, uncounted: the workers' caches and the pools warm up.
    await measureB(stack, b, 'warm-up', 3, 3);
    const alone = await measureB(stack, b, 'alone');
    const meter = cpuMeter(stack);
    const processes0 = serving.cpu();
    const flood = await startFlood(stack, aCaller);
    let flooded: Figures;
    let a: Awaited<ReturnType<typeof floodJobs>>;
    // The production worker names its pools (application_name); the in-process one does not.
    const waits = process.env.BENCH_FAIR_EXPLAIN && PROCESSES === 'split' ? sampleWaits(stack.pool) : null;
    try {
      flooded = await measureB(stack, b, 'flooded');
      if (waits) console.log(`B's immediate syncs' statements, sampled every 50 ms while flooded: ${await waits.stop()}`);
      a = await floodJobs(stack.pool);
    } finally {
      await flood.stop();
    }
    const reading = meter.read();
    const cpu = formatCpu(reading, undefined, PROCESSES === 'one' ? undefined : 'bench process (clients only)');
    const processes1 = serving.cpu();

    const row = (name: string, x: number[], y: number[]) => {
      const [a50, a99, f50, f99] = [percentile(x, 50), percentile(x, 99), percentile(y, 50), percentile(y, 99)];
      return [name, a50.toFixed(0), a99.toFixed(0), f50.toFixed(0), f99.toFixed(0), `${(f50 / a50).toFixed(2)}×`, `${(f99 / a99).toFixed(2)}×`];
    };
    table(
      ['tenant B', 'alone p50 ms', 'alone p99 ms', 'flooded p50 ms', 'flooded p99 ms', 'p50 ratio', 'p99 ratio'],
      [row(`immediate sync (n=${alone.immediate.length})`, alone.immediate, flooded.immediate), row(`scheduled lag (n=${alone.lag.length})`, alone.lag, flooded.lag), row(`due → sync start (n=${alone.synced.length})`, alone.synced, flooded.synced)],
    );
    console.log('\naim: each ratio flooded/alone ≤ 2×');
    if (process.env.BENCH_FAIR_EXPLAIN) await explain(stack, flooded.samples);
    console.log(
      `\ntenant A immediate syncs: ${flood.asked} asked, ${flood.answered} answered 200, ${flood.refused} refused 429 tenant_limit, ${flood.other} other answers`,
    );
    console.log(
      `tenant A due jobs: ${a.jobs}; peak running ${flood.peakRunning()} (limit ${A_RUNNING_JOBS ?? LIMITS.runningJobs}); ` +
        `${a.waited} waited over 1 s to start or had not started when B was done (${a.queued} still queued then)`,
    );
    console.log(`flooded phase: ${cpu}`);
    if (processes0 && processes1) {
      const pct = (s: number) => `${((s / reading.wall) * 100).toFixed(0)}%`;
      const each = Object.keys(processes1).map((name) => `${name} ${pct(processes1[name]! - processes0[name]!)}`);
      console.log(`  not in that total, the processes of their own: ${each.join(', ')} (the bench process holds only the clients)`);
    }
  } finally {
    await serving.stop();
  }
}

/** Inserts `n` active demo connections of `tenant`; answers their ids and app keys. */
async function insertConnections(pool: Pool, tenant: string, prefix: string, n: number, config: object) {
  const { rows } = await pool.query<{ id: string; app_key: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
     select $1, 'demo', $2 || i, $3, $4 from generate_series(1, $5::int) as i returning id, app_key`,
    [tenant, prefix, config, DAY, n],
  );
  return rows;
}

/** POST /sync immediate for one connection: the status and the answer's latency in ms. */
async function immediateSync(caller: Caller, appKey: string): Promise<{ status: number; ms: number; body: string }> {
  const t = process.hrtime.bigint();
  const res = await fetch(`${caller.apiUrl}/sync`, {
    method: 'POST',
    headers: { authorization: `Bearer ${caller.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ app_key: appKey, mode: 'full', immediate: true }),
  });
  const body = await res.text();
  return { status: res.status, ms: msSince(t), body };
}

/** B's figures: its immediate syncs' latencies, then its due connections' scheduled lag (ms, ascending). */
async function measureB(stack: BenchStack, b: Caller, phase: string, nImmediate = B_IMMEDIATE, nDue = B_SCHEDULED): Promise<Figures> {
  const syncable = await insertConnections(stack.pool, 'tenant-b', `b-${phase}-immediate-`, nImmediate, FAST);
  const samples = await pMap(
    syncable,
    async (c) => {
      const askedAt = Date.now();
      const r = await immediateSync(b, c.app_key);
      if (r.status !== 200) throw new Error(`tenant B's immediate sync answered ${r.status}: ${r.body}`);
      return { connectionId: c.id, askedAt, ms: r.ms };
    },
    { concurrency: B_IN_FLIGHT },
  );
  const immediate = samples.map((x) => x.ms);
  const due = await insertConnections(stack.pool, 'tenant-b', `b-${phase}-due-`, nDue, FAST);
  const ids = due.map((c) => c.id);
  await pMap(due, (c) => ensureConnectionWorkflow(stack.client, TASK_QUEUE, { id: c.id, tenantId: 'tenant-b', providerSlug: 'demo' }), { concurrency: 50 });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { rows } = await stack.pool.query<{ lag_ms: number; synced_ms: number }>(
      `select extract(epoch from (j.started_at - j.scheduled_at)) * 1000 as lag_ms,
              extract(epoch from ((select min(t.started_at) from sync_tasks t where t.job_id = j.id) - j.scheduled_at)) * 1000 as synced_ms
         from sync_jobs j where j.connection_id = any($1::uuid[]) and j.finished_at is not null`,
      [ids],
    );
    if (rows.length >= ids.length || Date.now() > deadline) {
      if (rows.length < ids.length) console.log(`NOTE (${phase}): only ${rows.length} of ${ids.length} of B's due jobs finished within 120 s`);
      const ascending = (xs: number[]) => xs.sort((x, y) => x - y);
      return {
        samples,
        immediate: ascending(immediate),
        lag: ascending(rows.map((r) => Number(r.lag_ms))),
        synced: ascending(rows.map((r) => Number(r.synced_ms))),
      };
    }
    await sleep(200);
  }
}

/**
 * Tenant A's flood: A_DUE slow connections due at once (their workflows started), then A_IN_FLIGHT
 * loops asking for slow immediate syncs without pause. Resolves once A's running jobs reached
 * their limit (or every due job started) and the immediate loops are going.
 */
async function startFlood(stack: BenchStack, a: Caller) {
  const due = await insertConnections(stack.pool, 'tenant-a', 'a-due-', A_DUE, SLOW);
  await pMap(due, (c) => ensureConnectionWorkflow(stack.client, TASK_QUEUE, { id: c.id, tenantId: 'tenant-a', providerSlug: 'demo' }), { concurrency: 50 });
  const syncable = await insertConnections(stack.pool, 'tenant-a', 'a-immediate-', A_IN_FLIGHT, SLOW);
  const counts = { asked: 0, answered: 0, refused: 0, other: 0 };
  let stopping = false;
  const loops = syncable.map(async (c) => {
    while (!stopping) {
      counts.asked += 1;
      const r = await immediateSync(a, c.app_key).catch(() => ({ status: 0, ms: 0, body: '' }));
      if (r.status === 200) counts.answered += 1;
      else if (r.status === 429 && r.body.includes('tenant_limit')) {
        counts.refused += 1;
        await sleep(100);
      } else counts.other += 1;
    }
  });
  let peak = 0;
  const running = async () => {
    const { rows } = await stack.pool.query<{ running: number; started: number }>(
      `select count(*) filter (where status = $1)::int as running, count(started_at)::int as started
         from sync_jobs where tenant_id = 'tenant-a'`,
      [JOB_STATUS.running],
    );
    peak = Math.max(peak, rows[0]!.running);
    return rows[0]!;
  };
  const target = Math.min(A_DUE, A_RUNNING_JOBS ?? LIMITS.runningJobs);
  const until = Date.now() + 60_000;
  for (;;) {
    const now = await running();
    if (now.running >= target || now.started >= A_DUE || Date.now() > until) break;
    await sleep(200);
  }
  // Keep sampling A's running jobs while B is measured.
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await running();
      await sleep(250);
    }
  })();
  return {
    get asked() {
      return counts.asked;
    },
    get answered() {
      return counts.answered;
    },
    get refused() {
      return counts.refused;
    },
    get other() {
      return counts.other;
    },
    peakRunning: () => peak,
    async stop() {
      stopping = true;
      sampling = false;
      await Promise.all([...loops, sampler]);
    },
  };
}

/**
 * A's due jobs (each connection's first, due at once) when B was done: how many, how many waited
 * (started over 1 s after they were due, or not started yet), how many still queued.
 */
async function floodJobs(pool: Pool) {
  const { rows } = await pool.query<{ jobs: number; waited: number; queued: number }>(
    `select count(*)::int as jobs,
            count(*) filter (where started_at is null or started_at - scheduled_at > interval '1 second')::int as waited,
            count(*) filter (where status = $1)::int as queued
       from sync_jobs where tenant_id = 'tenant-a' and trigger = $2 and scheduled_at <= now()`,
    [JOB_STATUS.queued, JOB_TRIGGER.schedule],
  );
  return rows[0]!;
}
