// Shared building blocks of the benchmarks (not a benchmark itself: run.ts only runs *.bench.ts).
// A benchmark gets the same stack `npm start` runs: a real Postgres (embedded by default,
// DATABASE_URL's server when set, with a fresh database either way), the pinned Temporal CLI dev
// server persisting to SQLite, and the real Synctide worker from workers/create-worker.ts. Logs
// are silenced so that they cost nothing and do not mix with the figures.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import {
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type WorkerOptions,
  type WorkflowBundle,
} from '@temporalio/worker';
import pg from 'pg';
import { createActivities } from '../activities';
import { poolSize, workflowCacheSize } from '../infra/boot';
import { createDatabaseIfMissing } from '../infra/database';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../infra/embedded-postgres';
import { migrate } from '../db/migrate';
import { createPool, type Pool } from '../db/pool';
import { freePort } from '../lib/ports';
import { resolveTemporalBinary } from '../infra/temporal-binaries';
import { startDevServer, type DevServer } from '../infra/temporal-dev-server';
import { bundleWorkflows } from '../infra/workflow-bundle';
import type { ScheduleSettings } from '../policy/schedule';
import { createWorker } from '../workers/create-worker';
import { LaneGate } from '../workers/lane-gate';
import { cpuUsage, type CpuUsage } from '../infra/cpu-usage';
import { envSchema, loadConfig, SECRET_VARIABLES } from '../lib/config';
import { imageCommand, imageEnv } from '../scripts/image-env';
import { benchActivityDeps } from './deps';

export { benchActivityDeps, NO_JITTER } from './deps';

/** The Synctide worker logs through the SDK's runtime logger: warnings and errors only. */
let runtimeInstalled = false;
function installRuntime(): void {
  if (runtimeInstalled) return;
  Runtime.install({ logger: new DefaultLogger('WARN') });
  runtimeInstalled = true;
}

/** Milliseconds since `start` (from process.hrtime.bigint()). */
export const msSince = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e6;

/** Nearest-rank percentile of an ascending array (NaN when empty). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

/** Prints rows as an aligned text table. */
export function table(header: string[], rows: (string | number)[][]): void {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of cells.slice(1)) console.log(line(r));
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Machine details

/** What a benchmark ran on. */
export interface MachineInfo {
  cpu: string;
  cores: number;
  ramGiB: number;
  node: string;
  postgres: string;
  temporalCli: string;
  /** Which Postgres and where the dev server keeps its state. */
  setup: string;
}

async function machineInfo(pool: Pool, cliPath: string, setup: string): Promise<MachineInfo> {
  const { rows } = await pool.query<{ server_version: string }>('show server_version');
  let temporalCli = 'unknown';
  try {
    temporalCli = execFileSync(cliPath, ['--version']).toString().trim();
  } catch {
    // leave "unknown"
  }
  return {
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    cores: os.cpus().length,
    ramGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    postgres: rows[0]?.server_version ?? 'unknown',
    temporalCli,
    setup,
  };
}

/** Prints the machine details block every benchmark starts its output with. */
export function printMachine(m: MachineInfo, extra: Record<string, string> = {}): void {
  const lines: [string, string][] = [
    ['cpu', `${m.cpu} × ${m.cores} cores`],
    ['ram', `${m.ramGiB} GiB`],
    ['node', m.node],
    ['postgres', m.postgres],
    ['temporal', m.temporalCli],
    ['setup', m.setup],
    ...Object.entries(extra),
  ];
  for (const [k, v] of lines) console.log(`${k.padEnd(9)} ${v}`);
  console.log('');
}

// ---------------------------------------------------------------------------------------------
// CPU accounting from /proc (Linux): who used the machine's cores during a phase

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** User + system CPU seconds of `pid` and all its descendants (0 when /proc is unavailable). */
export function treeCpuSeconds(pid: number): number {
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return 0;
  }
  const stats = new Map<number, { ppid: number; ticks: number }>();
  for (const e of entries) {
    try {
      const raw = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      // Fields after the command name, which may itself contain spaces and parentheses.
      const rest = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
      // utime + stime, plus cutime + cstime: the time of children that already exited (a pool's
      // Postgres backend that closed) moves into its parent's cutime/cstime, so it still counts.
      stats.set(Number(e), {
        ppid: Number(rest[1]),
        ticks: Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14]),
      });
    } catch {
      // the process exited meanwhile
    }
  }
  let ticks = 0;
  const queue = [pid];
  const seen = new Set<number>();
  while (queue.length) {
    const p = queue.pop()!;
    if (seen.has(p)) continue;
    seen.add(p);
    ticks += stats.get(p)?.ticks ?? 0;
    for (const [child, s] of stats) if (s.ppid === p) queue.push(child);
  }
  return ticks / CLK_TCK;
}

/** Resident set size of one process in MiB, from /proc (NaN when unavailable). */
export function rssMiB(pid: number): number {
  return rssParts(pid).total;
}

/**
 * Process `pid`'s VmRSS in MiB and its parts: anonymous memory (heaps, stacks, what it
 * allocated) and file-backed pages (its binary and libraries, which a memory cgroup charges only
 * as reclaimable page cache). NaN once the process is gone.
 */
export function rssParts(pid: number): { total: number; anon: number; file: number } {
  let status = '';
  try {
    status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    // gone: every part NaN
  }
  const mib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? Number.NaN) / 1024;
  return { total: mib('VmRSS'), anon: mib('RssAnon'), file: mib('RssFile') };
}

/** A CPU meter over the benchmark process (worker and activities included) and the servers. */
export interface CpuMeter {
  /** CPU seconds used by each component since the meter started, and the wall seconds. */
  read(): CpuReading;
}

export interface CpuReading {
  wall: number;
  bench: number;
  temporal: number;
  postgres: number | null;
  /** A separate worker process, when there is one. */
  worker: number | null;
}

/** Process-tree CPU of the benchmark process, the dev server, Postgres and optionally a worker process. */
export function cpuMeter(stack: BenchStack, workerPid?: number): CpuMeter {
  const t0 = process.hrtime.bigint();
  const own0 = process.cpuUsage();
  const temporal0 = treeCpuSeconds(stack.temporal.pid);
  const pg0 = stack.postgresPid ? treeCpuSeconds(stack.postgresPid) : null;
  const worker0 = workerPid ? treeCpuSeconds(workerPid) : null;
  return {
    read() {
      const own = process.cpuUsage(own0);
      return {
        wall: msSince(t0) / 1000,
        bench: (own.user + own.system) / 1e6,
        temporal: treeCpuSeconds(stack.temporal.pid) - temporal0,
        postgres: pg0 === null ? null : treeCpuSeconds(stack.postgresPid!) - pg0,
        worker: worker0 === null ? null : treeCpuSeconds(workerPid!) - worker0,
      };
    },
  };
}

/** One line: each component's CPU as a share of one core over the phase's wall time. */
export function formatCpu(c: CpuReading, cores = os.cpus().length, benchLabel?: string): string {
  const pct = (s: number) => `${((s / c.wall) * 100).toFixed(0)}%`;
  const total = c.bench + c.temporal + (c.postgres ?? 0) + (c.worker ?? 0);
  const bench = benchLabel ?? (c.worker === null ? 'bench process (client + worker + activities)' : 'bench process (client)');
  return (
    `CPU over ${c.wall.toFixed(1)} s (100% = one core, ${cores} cores): ` +
    `${bench} ${pct(c.bench)}, ${c.worker === null ? '' : `worker process ${pct(c.worker)}, `}temporal dev server ${pct(c.temporal)}, ` +
    `postgres ${c.postgres === null ? 'n/a (DATABASE_URL)' : pct(c.postgres)}; total ${pct(total)}`
  );
}

// ---------------------------------------------------------------------------------------------
// The stack

/** Postgres, the Temporal dev server and clients, for one benchmark. */
export interface BenchStack {
  /** Where the dev server's SQLite files are (N = the dev server's number in this run). */
  temporalDbFile: string;
  dbUrl: string;
  pool: Pool;
  /** The embedded Postgres postmaster (its backends are its children); undefined with DATABASE_URL. */
  postgresPid: number | undefined;
  temporal: DevServer;
  cliPath: string;
  client: Client;
  nativeConnection: NativeConnection;
  machine: MachineInfo;
  /** A fresh migrated database on the same Postgres server (e.g. one per scenario). */
  freshDatabase(): Promise<{ url: string; pool: Pool }>;
  /** Restarts Temporal with an empty state (a fresh dev server), for independent scenarios. */
  restartTemporal(): Promise<void>;
  stop(): Promise<void>;
}

function databaseUrl(baseUrl: string, database: string): string {
  const url = new URL(baseUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/**
 * A benchmark's whole run: starts its stack, prints the machine and `scenario`, runs `main`, and
 * stops the stack whatever happens, then exits (the SDK's runtime would keep the process alive).
 */
export async function runBench(
  name: string,
  scenario: string,
  main: (stack: BenchStack) => Promise<void>,
  opts: { temporalDbDir?: string } = {},
): Promise<never> {
  const stack = await startBenchStack(name, opts);
  try {
    printMachine(stack.machine, { scenario });
    await main(stack);
  } finally {
    await stack.stop();
  }
  process.exit(0);
}

/**
 * Starts what a benchmark runs against. Postgres: DATABASE_URL's server when set (never the one on
 * 127.0.0.1:5432 otherwise), else an embedded server in a temporary directory with the same
 * durable settings as `npm start`. Temporal: `temporal server start-dev` persisting to SQLite,
 * as `npm start` runs it.
 */
export async function startBenchStack(name: string, opts: { temporalDbDir?: string } = {}): Promise<BenchStack> {
  installRuntime();
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), `synctide-bench-${name}-`));
  await fsp.chmod(dir, 0o755);
  const stops: (() => Promise<unknown>)[] = [];
  const databases: string[] = [];
  try {
    let adminUrl = process.env.DATABASE_URL;
    let postgres: EmbeddedPostgres | undefined;
    if (!adminUrl) {
      postgres = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), port: await freePort() });
      adminUrl = postgres.adminUrl;
      stops.push(() => postgres!.stop());
    }
    const admin = adminUrl;
    const pools: Pool[] = [];
    const freshDatabase = async () => {
      const db = `synctide_bench_${name.replace(/\W/g, '_')}_${randomBytes(4).toString('hex')}`;
      await createDatabaseIfMissing(admin, db);
      databases.push(db);
      const url = databaseUrl(admin, db);
      await migrate(url);
      const pool = createPool(url, 20);
      pools.push(pool);
      return { url, pool };
    };
    const first = await freshDatabase();

    const cli = await resolveTemporalBinary('cli', { allowSdkDownload: false });
    const cliPath = cli.path!;
    // BENCH_TEMPORAL_DB_DIR (e.g. /dev/shm) puts the dev server's SQLite file elsewhere, to see
    // what its disk writes cost; by default it sits in the benchmark's temporary directory (on
    // disk, like `npm start`'s .data/temporal.db) unless the benchmark asks for another place.
    const temporalDbDir = process.env.BENCH_TEMPORAL_DB_DIR || opts.temporalDbDir;
    const temporalDir = temporalDbDir ? await fsp.mkdtemp(path.join(temporalDbDir, 'synctide-bench-')) : dir;
    if (temporalDir !== dir) stops.push(() => fsp.rm(temporalDir, { recursive: true, force: true }));
    // BENCH_TEMPORAL_DYNAMIC_CONFIG: an experiment only (never the reported figures), a JSON object
    // of dev-server dynamic-config values, e.g. '{"matching.numTaskqueueReadPartitions": 1}'.
    const experimentDynamicConfig = process.env.BENCH_TEMPORAL_DYNAMIC_CONFIG
      ? (JSON.parse(process.env.BENCH_TEMPORAL_DYNAMIC_CONFIG) as Record<string, string | number | boolean>)
      : undefined;
    if (experimentDynamicConfig) console.log(`EXPERIMENT: dev server dynamic config ${JSON.stringify(experimentDynamicConfig)}`);
    let run = 0;
    const startTemporal = async () => {
      run += 1;
      return startDevServer({
        cliPath,
        dbFilename: path.join(temporalDir, `temporal-${run}.db`),
        port: await freePort(),
        uiPort: await freePort(),
        namespace: 'default',
        dynamicConfig: experimentDynamicConfig,
      });
    };
    let devServer = await startTemporal();
    let connection = await Connection.connect({ address: devServer.address });
    let nativeConnection = await NativeConnection.connect({ address: devServer.address });

    const stack: BenchStack = {
      temporalDbFile: path.join(temporalDir, 'temporal-N.db'),
      dbUrl: first.url,
      pool: first.pool,
      postgresPid: postgres?.pid,
      temporal: devServer,
      cliPath,
      client: new Client({ connection, namespace: 'default' }),
      nativeConnection,
      machine: await machineInfo(
        first.pool,
        cliPath,
        `${postgres ? 'embedded Postgres (durable: fsync on, as npm start)' : 'Postgres of DATABASE_URL'}; ` +
          `dev server SQLite in ${temporalDir}${temporalDir === dir ? ' (disk, as npm start)' : ''}`,
      ),
      freshDatabase,
      async restartTemporal() {
        await nativeConnection.close();
        await connection.close();
        await devServer.stop();
        devServer = await startTemporal();
        connection = await Connection.connect({ address: devServer.address });
        nativeConnection = await NativeConnection.connect({ address: devServer.address });
        stack.temporal = devServer;
        stack.client = new Client({ connection, namespace: 'default' });
        stack.nativeConnection = nativeConnection;
      },
      stop() {
        // Idempotent: a signal and the benchmark's own `finally` may both ask.
        stopping ??= stopAll();
        return stopping;
      },
    };
    let stopping: Promise<void> | undefined;
    const stopAll = async () => {
      await nativeConnection.close().catch(() => undefined);
      await connection.close().catch(() => undefined);
      await devServer.stop();
      for (const pool of pools) await pool.end().catch(() => undefined);
      if (!postgres) {
        // DATABASE_URL: drop what we created there.
        const client = new pg.Client({ connectionString: admin });
        await client.connect();
        for (const db of databases) {
          await client.query(`drop database if exists ${client.escapeIdentifier(db)} with (force)`).catch(() => undefined);
        }
        await client.end();
      }
      for (const stop of stops.reverse()) await stop();
      await fsp.rm(dir, { recursive: true, force: true });
    };
    // Ctrl-C (or SIGTERM) stops the servers this benchmark started, so none is left behind.
    const onSignal = (signal: NodeJS.Signals) => {
      console.error(`\n${signal}: stopping the benchmark's servers`);
      // Work in flight fails as its servers go away: that must not end the process before they stop.
      process.on('uncaughtException', () => undefined);
      process.on('unhandledRejection', () => undefined);
      void stack.stop().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    return stack;
  } catch (err) {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await fsp.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Workers

let synctide: Promise<WorkflowBundle> | undefined;
/** The real Synctide workflows, bundled once per process. */
export function synctideBundle(): Promise<WorkflowBundle> {
  synctide ??= bundleWorkflows();
  return synctide;
}

/** A running worker and how to stop it. */
export interface RunningWorker {
  worker: Worker;
  stop(): Promise<void>;
}

/** Runs `worker` until stop(). */
export function runWorker(worker: Worker): RunningWorker {
  const running = worker.run();
  running.catch((err) => {
    console.error('worker failed:', err);
  });
  return {
    worker,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
    },
  };
}

/**
 * The real Synctide worker (workers/create-worker.ts: every workflow and activity, production
 * options), with a pool of its own of `poolMax` connections (DATABASE_POOL_MAX's default, 10) and
 * its local activities' pool, as `npm run worker` has them.
 */
export async function startSynctideWorker(
  stack: BenchStack,
  opts: { taskQueue: string; settings?: ScheduleSettings; dbUrl?: string; poolMax?: number },
): Promise<RunningWorker & { pool: Pool }> {
  // The pools and the workflow cache `npm run worker` has with its defaults (and the variables
  // WORKER_MAX_CACHED_WORKFLOWS and WORKER_TARGET_CPU). BENCH_WORKER_POOL_MAX: an experiment only
  // (never the reported figures), like BENCH_WORKER_OPTIONS.
  const config = loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: process.env.WORKER_MAX_CACHED_WORKFLOWS, WORKER_TARGET_CPU: process.env.WORKER_TARGET_CPU });
  if (process.env.WORKER_TARGET_CPU) console.log(`the worker's scheduled lane has WORKER_TARGET_CPU ${config.WORKER_TARGET_CPU}`);
  const poolMax = opts.poolMax ?? (process.env.BENCH_WORKER_POOL_MAX ? Number(process.env.BENCH_WORKER_POOL_MAX) : poolSize(config, 'worker'));
  if (process.env.BENCH_WORKER_POOL_MAX) console.log(`EXPERIMENT: the worker's pool has ${poolMax} connections`);
  const pool = createPool(opts.dbUrl ?? stack.dbUrl, poolMax);
  const localPool = createPool(opts.dbUrl ?? stack.dbUrl, poolSize(config, 'local'));
  const activities = { ...benchActivityDeps({ pool, client: stack.client, taskQueue: opts.taskQueue, settings: opts.settings }), localPool };
  const experiment = process.env.BENCH_WORKER_OPTIONS;
  const worker = experiment
    ? // An experiment only (never the reported figures): createWorker's options plus overrides,
      // e.g. BENCH_WORKER_OPTIONS='{"nonStickyToStickyPollRatio": 1}'.
      await Worker.create({
        connection: stack.nativeConnection,
        namespace: 'default',
        taskQueue: opts.taskQueue,
        workflowBundle: await synctideBundle(),
        activities: createActivities(activities),
        shutdownGraceTime: '5s',
        maxHeartbeatThrottleInterval: '1 second',
        maxCachedWorkflows: workflowCacheSize(config),
        ...(JSON.parse(experiment) as Partial<WorkerOptions>),
      })
    : await createWorker({
        connection: stack.nativeConnection,
        namespace: 'default',
        shutdownGraceSeconds: 5,
        workflowBundle: await synctideBundle(),
        activities,
        maxCachedWorkflows: workflowCacheSize(config),
        // The LaneGate `npm run worker` gives it (with no immediate lane here, it never holds back).
        lanes: new LaneGate(config.WORKER_TARGET_CPU, benchCpu().current),
      });
  if (experiment) console.log(`EXPERIMENT: worker options overridden with ${experiment}`);
  const running = runWorker(worker);
  return {
    ...running,
    pool,
    async stop() {
      await running.stop();
      await Promise.all([pool.end(), localPool.end()]);
    },
  };
}

/** Path of a file next to this one. */
export const benchFile = (name: string): string => fileURLToPath(new URL(name, import.meta.url));

// ---------------------------------------------------------------------------------------------
// Workflow histories: where a workflow's time went, as Temporal recorded it

export const { EventType } = proto.temporal.api.enums.v1;
export type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

export const eventMs = (e: HistoryEvent): number => {
  const t = e.eventTime;
  return t ? Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6) : Number.NaN;
};

/** A workflow run's time split by what Temporal recorded (ms). */
export interface HistoryBreakdown {
  /** First event to last event. */
  total: number;
  activities: number;
  /** Activity executions (started → completed). */
  activityExec: number;
  /** Activity queue waits (scheduled → started). */
  activityQueue: number;
  /** Workflow-task queue waits (scheduled → started). */
  wftQueue: number;
  /** Workflow-task processing by the worker (started → completed). */
  wftExec: number;
  workflowTasks: number;
}

/** Splits one workflow's history into activity and workflow-task time. */
export async function historyBreakdown(client: Client, workflowId: string): Promise<HistoryBreakdown> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const byId = new Map<number, HistoryEvent>();
  for (const e of events) byId.set(Number(e.eventId), e);
  const out: HistoryBreakdown = {
    total: eventMs(events[events.length - 1]!) - eventMs(events[0]!),
    activities: 0,
    activityExec: 0,
    activityQueue: 0,
    wftQueue: 0,
    wftExec: 0,
    workflowTasks: 0,
  };
  // A completed task's queue time (scheduled → started) and run time (started → completed).
  const timing = (completed: HistoryEvent, ids: { scheduledEventId?: unknown; startedEventId?: unknown }) => {
    const scheduled = byId.get(Number(ids.scheduledEventId));
    const started = byId.get(Number(ids.startedEventId));
    return scheduled && started ? { queue: eventMs(started) - eventMs(scheduled), exec: eventMs(completed) - eventMs(started) } : null;
  };
  for (const e of events) {
    if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) {
      const t = timing(e, e.activityTaskCompletedEventAttributes!);
      if (t) {
        out.activities += 1;
        out.activityQueue += t.queue;
        out.activityExec += t.exec;
      }
    } else if (e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) {
      const t = timing(e, e.workflowTaskCompletedEventAttributes!);
      if (t) {
        out.workflowTasks += 1;
        out.wftQueue += t.queue;
        out.wftExec += t.exec;
      }
    }
  }
  return out;
}

/** Mean of each field over several breakdowns. */
export function meanBreakdown(items: HistoryBreakdown[]): HistoryBreakdown {
  const keys = Object.keys(items[0]!) as (keyof HistoryBreakdown)[];
  return Object.fromEntries(keys.map((k) => [k, items.reduce((s, b) => s + b[k], 0) / items.length])) as unknown as HistoryBreakdown;
}

// ---------------------------------------------------------------------------------------------
// Postgres statement timing (a profiling pass only: it adds a little overhead of its own)

/** Time and count per statement kind, as seen by the client (round trip included). */
export interface StatementProfile {
  stop(): void;
  /** Rows of [statement, calls, total ms], largest total first. */
  rows(): [string, number, number][];
}

const statementKey = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 70);

/** Times every query of every pg client in this process until stop(). */
export function profileStatements(): StatementProfile {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  const totals = new Map<string, { calls: number; ms: number }>();
  const record = (key: string, start: bigint) => {
    const entry = totals.get(key) ?? { calls: 0, ms: 0 };
    entry.calls += 1;
    entry.ms += msSince(start);
    totals.set(key, entry);
  };
  proto.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string } | undefined;
    const key = statementKey(typeof first === 'string' ? first : first?.text ?? '(query object)');
    const start = process.hrtime.bigint();
    const cb = args.findIndex((a) => typeof a === 'function');
    if (cb >= 0) {
      const callback = args[cb] as (...r: unknown[]) => void;
      args[cb] = (...r: unknown[]) => {
        record(key, start);
        callback(...r);
      };
      return original.apply(this, args);
    }
    const result = original.apply(this, args) as Promise<unknown> | undefined;
    if (result && typeof result.then === 'function') {
      return result.then(
        (v) => {
          record(key, start);
          return v;
        },
        (e: unknown) => {
          record(key, start);
          throw e;
        },
      );
    }
    return result;
  };
  return {
    stop() {
      proto.query = original;
    },
    rows() {
      return [...totals].map(([k, v]): [string, number, number] => [k, v.calls, v.ms]).sort((a, b) => b[2] - a[2]);
    },
  };
}

/** Each completed activity of one workflow's history: its type, queue wait and execution (ms). */
export async function activityDurations(
  client: Client,
  workflowId: string,
): Promise<{ name: string; queueMs: number; execMs: number; result: unknown }[]> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const byId = new Map<number, HistoryEvent>();
  for (const e of events) byId.set(Number(e.eventId), e);
  const out: { name: string; queueMs: number; execMs: number; result: unknown }[] = [];
  for (const e of events) {
    if (e.eventType !== EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) continue;
    const a = e.activityTaskCompletedEventAttributes!;
    const scheduled = byId.get(Number(a.scheduledEventId));
    const started = byId.get(Number(a.startedEventId));
    if (!scheduled || !started) continue;
    const payload = a.result?.payloads?.[0]?.data;
    out.push({
      name: scheduled.activityTaskScheduledEventAttributes?.activityType?.name ?? '?',
      queueMs: eventMs(started) - eventMs(scheduled),
      execMs: eventMs(e) - eventMs(started),
      // Results are JSON payloads (the default data converter).
      result: payload ? JSON.parse(Buffer.from(payload).toString('utf8')) : undefined,
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Production processes (package.json `start:api|worker`, after `npm run build`)

/**
 * The environment of a compiled production process (worker or API) against a bench's servers, as
 * a deployment configures it: none of Synctide's variables from the bench's own environment (a
 * password in the shell must not leak in), the image's environment (scripts/image-env.ts), the
 * prebuilt bundle, no migration (the bench migrated), a fresh credentials key, one reconcile tick
 * at start, and its log at info (its "worker started" or "api listening" line says it serves);
 * then `own` (at least DATABASE_URL and TEMPORAL_ADDRESS; a worker's WORKER_METRICS_PORT, an
 * API's ADMIN_API_KEY and API_PORT).
 */
export function productionEnv(own: Record<string, string>): NodeJS.ProcessEnv {
  const synctideVariables = new Set<string>([...Object.keys(envSchema.shape), ...SECRET_VARIABLES.map((name) => `${name}_FILE`)]);
  return {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !synctideVariables.has(name))),
    // The image's environment (MALLOC_ARENA_MAX among it), its bundle path replaced below.
    ...imageEnv(),
    NODE_ENV: 'production',
    LOG_LEVEL: 'info',
    MIGRATE_ON_START: 'false',
    WORKFLOW_BUNDLE_PATH: benchFile('../dist/workflow-bundle.js'),
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    SCHEDULER_TICK_SECONDS: '3600',
    ...own,
  };
}

/** A production process of the compiled build, started by spawnProductionProcess. */
export interface ProductionProcess {
  pid: number;
  /** SIGTERM (its graceful shutdown), then SIGKILL after 30 s; resolves once it exited. */
  stop(): Promise<void>;
}

/** The arguments after `node` of the image's command of `script` (package.json `start:<script>`), flags included. */
export function productionArgs(script: 'worker' | 'api'): string[] {
  return imageCommand(`start:${script}`).slice(1);
}

/**
 * The command and arguments that run `node <args>`; with `cgroupProcs` (a memory cgroup's
 * cgroup.procs) a shell joins that cgroup and then becomes node, so Node starts inside it and
 * sizes its heaps from its limit, as in a container.
 */
export function nodeCommand(node: string, args: string[], cgroupProcs?: string): [string, string[]] {
  return cgroupProcs ? ['/bin/sh', ['-c', 'echo $$ > "$0" && shift && exec "$@"', cgroupProcs, 'node', node, ...args]] : [node, args];
}

/**
 * The production command of `script` (package.json `start:<script>`, after `npm run build`) with
 * `env`, from the repository root, on `opts.node` (default: this Node), in the memory cgroup of
 * `opts.cgroupProcs` if given (nodeCommand). Resolves once its JSON log prints `readyMsg` (e.g.
 * "worker started", "api listening"); its warnings and errors are passed on to stderr, and each
 * line of its log to `opts.onLine`; rejects if it exits first.
 */
export async function spawnProductionProcess(
  script: 'worker' | 'api',
  env: NodeJS.ProcessEnv,
  readyMsg: string,
  opts: { node?: string; cgroupProcs?: string; onLine?: (line: string) => void } = {},
): Promise<ProductionProcess> {
  const args = productionArgs(script);
  const file = benchFile(`../${args.at(-1)}`);
  if (!fs.existsSync(file)) throw new Error(`${path.relative(process.cwd(), file)} is missing: run npm run build first`);
  const [command, argv] = nodeCommand(opts.node ?? process.execPath, args, opts.cgroupProcs);
  const child = spawn(command, argv, { cwd: benchFile('..'), env, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      opts.onLine?.(line);
      if (line.includes(`"msg":"${readyMsg}"`)) resolve();
      else if (/"level":"(warn|error|fatal)"/.test(line)) console.error(`  ${script}: ${line}`);
    });
    void exited.then(() => reject(new Error(`${args.at(-1)} exited during start (code ${child.exitCode}, signal ${child.signalCode})`)));
  });
  return {
    pid: child.pid!,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

let sampler: CpuUsage | undefined;
/** The bench process's one CPU reading, for the LaneGates of in-process workers. */
export function benchCpu(): CpuUsage {
  sampler ??= cpuUsage();
  return sampler;
}
