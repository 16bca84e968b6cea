// Tenant fairness: tenant B's immediate-sync latency and scheduled lag alone, and again while
// tenant A floods immediate syncs and due jobs, on one worker with the default tenant limits
// (TENANT_MAX_IMMEDIATE_SYNCS, TENANT_MAX_RUNNING_JOBS), the default activity slots and pool size,
// and the immediate-sync worker (its own queue, IMMEDIATE_SYNC_SLOTS and pool), as `npm run worker`
// runs them; the real API (createApp over real HTTP) with the default tenant limits in front.
// Phase "alone": B makes BENCH_FAIR_IMMEDIATE (default 100, so that the nearest-rank p99 is not
// the slowest of all) immediate syncs (POST /sync immediate, BENCH_FAIR_B_IN_FLIGHT at once,
// default 1), each on its own small demo connection →
// answer latency; then BENCH_FAIR_SCHEDULED (default 30) connections of B become due at once
// (their connection workflows start, cycle 0 runs now) → scheduled lag, `started_at −
// scheduled_at` of their jobs. Phase "flooded": the same for B while A keeps
// BENCH_FAIR_A_IN_FLIGHT (default 12) slow immediate syncs asked for continuously (a refused one
// is asked again after 100 ms) and BENCH_FAIR_A_DUE (default 200) slow connections of A came due
// at once just before. Each slow sync of A reads BENCH_FAIR_A_PAGES (default 50) pages of one
// record, 200 ms apart (demo latency_ms).
import pMap from 'p-map';
import { createPool, type Pool } from '../db/pool';
import { poolSize } from '../infra/boot';
import { listen, type HttpServer } from '../lib/http';
import { immediateTaskQueue, loadConfig, tenantLimits } from '../lib/config';
import { JOB_STATUS, JOB_TRIGGER } from '../policy/vocabulary';
import { ensureConnectionWorkflow } from '../temporal/client';
import { createImmediateWorker, createWorker } from '../workers/create-worker';
import { BENCH_ADMIN_KEY, benchApp } from './api-app';
import { benchActivityDeps } from './deps';
import { type BenchStack, cpuMeter, formatCpu, msSince, NO_JITTER, percentile, runBench, runWorker, sleep, synctideBundle, table } from './stack';

const B_IMMEDIATE = Number(process.env.BENCH_FAIR_IMMEDIATE ?? 100);
const B_IN_FLIGHT = Number(process.env.BENCH_FAIR_B_IN_FLIGHT ?? 1);
const B_SCHEDULED = Number(process.env.BENCH_FAIR_SCHEDULED ?? 30);
const A_IN_FLIGHT = Number(process.env.BENCH_FAIR_A_IN_FLIGHT ?? 12);
const A_DUE = Number(process.env.BENCH_FAIR_A_DUE ?? 200);
const A_PAGES = Number(process.env.BENCH_FAIR_A_PAGES ?? 50);
const TASK_QUEUE = 'bench-fairness';
/** Configuration as a deployment gets it when it sets nothing: the default limits and slots. */
const config = loadConfig({ TEMPORAL_TASK_QUEUE: TASK_QUEUE });
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
    `limits per tenant: ${LIMITS.immediateSyncs} immediate syncs, ${LIMITS.runningJobs} running jobs; ` +
    `immediate slots ${config.IMMEDIATE_SYNC_SLOTS}, activity slots the SDK's default`,
  main,
);

interface Figures {
  immediate: number[];
  lag: number[];
}

async function main(stack: BenchStack) {
  const workerPool = createPool(stack.dbUrl, config.DATABASE_POOL_MAX);
  const immediatePool = createPool(stack.dbUrl, poolSize(config, 'immediate'));
  const activities = benchActivityDeps({ pool: workerPool, client: stack.client, taskQueue: TASK_QUEUE, settings: NO_JITTER, tenantLimits: LIMITS });
  const worker = runWorker(
    await createWorker({
      connection: stack.nativeConnection,
      namespace: 'default',
      shutdownGraceSeconds: 5,
      workflowBundle: await synctideBundle(),
      activities,
      maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS,
    }),
  );
  const immediateWorker = runWorker(
    await createImmediateWorker({
      connection: stack.nativeConnection,
      namespace: 'default',
      shutdownGraceSeconds: 5,
      taskQueue: immediateTaskQueue(config),
      slots: config.IMMEDIATE_SYNC_SLOTS,
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
  try {
    // A few of B's syncs and due jobs first, uncounted: the workers' caches and the pools warm up.
    await measureB(stack, api, 'warm-up', 3, 3);
    const alone = await measureB(stack, api, 'alone');
    const meter = cpuMeter(stack);
    const flood = await startFlood(stack, api);
    let flooded: Figures;
    let a: Awaited<ReturnType<typeof floodJobs>>;
    try {
      flooded = await measureB(stack, api, 'flooded');
      a = await floodJobs(stack.pool);
    } finally {
      await flood.stop();
    }
    const cpu = formatCpu(meter.read());

    const row = (name: string, x: number[], y: number[]) => {
      const [a50, a99, f50, f99] = [percentile(x, 50), percentile(x, 99), percentile(y, 50), percentile(y, 99)];
      return [name, a50.toFixed(0), a99.toFixed(0), f50.toFixed(0), f99.toFixed(0), `${(f50 / a50).toFixed(2)}×`, `${(f99 / a99).toFixed(2)}×`];
    };
    table(
      ['tenant B', 'alone p50 ms', 'alone p99 ms', 'flooded p50 ms', 'flooded p99 ms', 'p50 ratio', 'p99 ratio'],
      [row(`immediate sync (n=${alone.immediate.length})`, alone.immediate, flooded.immediate), row(`scheduled lag (n=${alone.lag.length})`, alone.lag, flooded.lag)],
    );
    console.log('\naim: each ratio flooded/alone ≤ 2×');
    console.log(
      `\ntenant A immediate syncs: ${flood.asked} asked, ${flood.answered} answered 200, ${flood.refused} refused 429 tenant_limit, ${flood.other} other answers`,
    );
    console.log(
      `tenant A due jobs: ${a.jobs}; peak running ${flood.peakRunning()} (limit ${LIMITS.runningJobs}); ` +
        `${a.waited} waited over 1 s to start or had not started when B was done (${a.queued} still queued then)`,
    );
    console.log(`flooded phase: ${cpu}`);
  } finally {
    await api.close();
    await immediateWorker.stop();
    await worker.stop();
    await workerPool.end();
    await immediatePool.end();
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
async function immediateSync(api: HttpServer, tenant: string, appKey: string): Promise<{ status: number; ms: number; body: string }> {
  const t = process.hrtime.bigint();
  const res = await fetch(`${api.url}/sync`, {
    method: 'POST',
    headers: { authorization: `Bearer ${BENCH_ADMIN_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ app_key: appKey, tenant_id: tenant, mode: 'full', immediate: true }),
  });
  const body = await res.text();
  return { status: res.status, ms: msSince(t), body };
}

/** B's figures: its immediate syncs' latencies, then its due connections' scheduled lag (ms, ascending). */
async function measureB(stack: BenchStack, api: HttpServer, phase: string, nImmediate = B_IMMEDIATE, nDue = B_SCHEDULED): Promise<Figures> {
  const syncable = await insertConnections(stack.pool, 'tenant-b', `b-${phase}-immediate-`, nImmediate, FAST);
  const immediate = await pMap(
    syncable,
    async (c) => {
      const r = await immediateSync(api, 'tenant-b', c.app_key);
      if (r.status !== 200) throw new Error(`tenant B's immediate sync answered ${r.status}: ${r.body}`);
      return r.ms;
    },
    { concurrency: B_IN_FLIGHT },
  );
  const due = await insertConnections(stack.pool, 'tenant-b', `b-${phase}-due-`, nDue, FAST);
  const ids = due.map((c) => c.id);
  await pMap(due, (c) => ensureConnectionWorkflow(stack.client, TASK_QUEUE, { id: c.id, tenantId: 'tenant-b', providerSlug: 'demo' }), { concurrency: 50 });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { rows } = await stack.pool.query<{ lag_ms: number }>(
      `select extract(epoch from (started_at - scheduled_at)) * 1000 as lag_ms
         from sync_jobs where connection_id = any($1::uuid[]) and started_at is not null`,
      [ids],
    );
    if (rows.length >= ids.length || Date.now() > deadline) {
      if (rows.length < ids.length) console.log(`NOTE (${phase}): only ${rows.length} of ${ids.length} of B's due jobs started within 120 s`);
      return { immediate: immediate.sort((x, y) => x - y), lag: rows.map((r) => Number(r.lag_ms)).sort((x, y) => x - y) };
    }
    await sleep(200);
  }
}

/**
 * Tenant A's flood: A_DUE slow connections due at once (their workflows started), then A_IN_FLIGHT
 * loops asking for slow immediate syncs without pause. Resolves once A's running jobs reached
 * their limit (or every due job started) and the immediate loops are going.
 */
async function startFlood(stack: BenchStack, api: HttpServer) {
  const due = await insertConnections(stack.pool, 'tenant-a', 'a-due-', A_DUE, SLOW);
  await pMap(due, (c) => ensureConnectionWorkflow(stack.client, TASK_QUEUE, { id: c.id, tenantId: 'tenant-a', providerSlug: 'demo' }), { concurrency: 50 });
  const syncable = await insertConnections(stack.pool, 'tenant-a', 'a-immediate-', A_IN_FLIGHT, SLOW);
  const counts = { asked: 0, answered: 0, refused: 0, other: 0 };
  let stopping = false;
  const loops = syncable.map(async (c) => {
    while (!stopping) {
      counts.asked += 1;
      const r = await immediateSync(api, 'tenant-a', c.app_key).catch(() => ({ status: 0, ms: 0, body: '' }));
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
  const target = Math.min(A_DUE, LIMITS.runningJobs);
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
