// Memory of the worker process with 1,000 and 10,000 sleeping connection workflows (override with
// BENCH_SLEEPING=1000,10000). The real Synctide worker runs alone in a child process
// (bench/worker-process.ts, prebuilt bundle), so its RSS is its own. Connections use a 3600 s
// interval and each already has a finished incremental job (seeded in SQL, as for a connection
// that synced a minute ago), so their workflows plan a normal run an hour ahead, enqueue it and
// sleep (phase `sleeping`), without running a bootstrap job each.
import pMap from 'p-map';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ensureConnectionWorkflow } from '../temporal/client';
import { connectionWorkflowId } from '../temporal/ids';
import type { WorkerMemoryReport } from './worker-process';
import {
  benchFile,
  type BenchStack,
  cpuMeter,
  formatCpu,
  msSince,
  percentile,
  rssMiB,
  runBench,
  sleep,
  synctideBundle,
  table,
} from './stack';

const TARGETS = (process.env.BENCH_SLEEPING ?? '1000,10000').split(',').map(Number);
const TASK_QUEUE = 'bench-memory';

// The measured figure is the worker's own memory, which does not depend on where the dev server
// keeps its SQLite file; on tmpfs the dev server starts the workflows about 2.5× faster than on
// this machine's disk (see BENCHMARKS.md), which keeps 10,000 within a few minutes.
await runBench('worker-memory', `sleeping connection workflows: ${TARGETS.join(', ')} (interval 3600 s)`, main, {
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

/** The worker child process and a request/response over IPC. */
async function startChild(stack: BenchStack, bundlePath: string) {
  const child: ChildProcess = spawn(
    process.execPath,
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
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`worker process exited during start (code ${code})`)));
    child.on('message', (m: { type: string }) => m.type === 'ready' && resolve());
  });
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
    pid: child.pid!,
    measure,
    async stop() {
      child.send({ type: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function main(stack: BenchStack) {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'synctide-bench-bundle-'));
  const bundlePath = path.join(dir, 'workflows.js');
  await fsp.writeFile(bundlePath, (await synctideBundle()).code);
  const child = await startChild(stack, bundlePath);
  try {
    await sleep(3000);
    type Row = { sleeping: number; report: WorkerMemoryReport; procRss: number; temporalRss: number; startSeconds: number; cpu: string };
    const rows: Row[] = [];
    rows.push({ sleeping: 0, report: await child.measure(true), procRss: rssMiB(child.pid), temporalRss: rssMiB(stack.temporal.pid), startSeconds: 0, cpu: '' });

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
        const status = await child.measure(false);
        // The visibility count is asked only once every job is queued (it costs the server work).
        const sleeping =
          q[0]!.n >= target
            ? (await stack.client.workflow.count(`SynctidePhase = 'sleeping' AND ExecutionStatus = 'Running'`)).count
            : q[0]!.n;
        if (q[0]!.n >= target && sleeping >= target && status.inFlightActivations === 0 && status.inFlightActivities === 0) break;
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
      await sleep(5000);
      rows.push({ sleeping: target, report: await child.measure(true), procRss: rssMiB(child.pid), temporalRss: rssMiB(stack.temporal.pid), startSeconds, cpu });
    }

    const idle = rows[0]!;
    table(
      ['sleeping workflows', 'worker RSS MiB', 'Δ RSS', 'main heap used', 'Δ heap', 'cached workflows', 'Δ RSS per cached KiB', 'dev server RSS MiB', 'all asleep after s'],
      rows.map((r) => {
        const dRss = r.procRss - idle.procRss;
        const dHeap = r.report.heapUsed - idle.report.heapUsed;
        return [
          r.sleeping,
          r.procRss.toFixed(0),
          r.sleeping ? dRss.toFixed(0) : '',
          r.report.heapUsed.toFixed(1),
          r.sleeping ? dHeap.toFixed(1) : '',
          r.report.numCachedWorkflows,
          r.report.numCachedWorkflows ? ((dRss * 1024) / r.report.numCachedWorkflows).toFixed(0) : '',
          r.temporalRss.toFixed(0),
          r.sleeping ? r.startSeconds.toFixed(0) : '',
        ];
      }),
    );
    const s = idle.report;
    console.log('');
    console.log(
      `workflow cache in effect: maxCachedWorkflows ${s.maxCachedWorkflows} (SDK default for a ${s.heapLimit.toFixed(0)} MiB heap limit: ` +
        `max(floor((heap − 200 MiB) × 600 / 1024 MiB), 10)), reuseV8Context ${s.reuseV8Context}, ` +
        `workflowThreadPoolSize ${s.workflowThreadPoolSize}, maxConcurrentWorkflowTaskExecutions ${s.maxConcurrentWorkflowTaskExecutions}`,
    );
    console.log(
      'worker RSS is /proc VmRSS of the worker process (every thread, including the workflow thread whose V8 heap ' +
        'process.memoryUsage() does not show); main heap used is the main thread after a forced GC.',
    );
    for (const r of rows.slice(1)) console.log(`starting ${r.sleeping} (cumulative): ${r.cpu}`);
    await wakeUpCost(stack);
  } finally {
    await child.stop();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
