// What continue-as-new after every cycle costs, against several cycles per run, on the bare shape
// of a connection's cycle (bench/cycles-per-run-workflows.ts), on the same dev server in one run.
// Each round starts BENCH_SHAPE_WORKFLOWS (400) workflows spread evenly over one interval
// (BENCH_SHAPE_INTERVAL_MS, 40 s), lets them settle for one interval, then reads the CPU the dev
// server and this process (worker included) spent per completed cycle over BENCH_SHAPE_WINDOW_MS
// (80 s). BENCH_SHAPE_CACHE (100) sets the worker's cache, a quarter of the workflows as the
// default cache of 250 is for 1,000 connections, so a woken run is usually replayed.
// BENCH_SHAPE_ROUNDS lists the cycles per run of each round (default `1,8`).
import { Worker } from '@temporalio/worker';
import { bundleWorkflows } from '../infra/workflow-bundle';
import type { CycleShapeActivities } from './cycles-per-run-workflows';
import { benchFile, cpuMeter, formatCpu, runBench, runWorker, sleep, table, type BenchStack } from './stack';

const N = Number(process.env.BENCH_SHAPE_WORKFLOWS ?? 400);
const INTERVAL_MS = Number(process.env.BENCH_SHAPE_INTERVAL_MS ?? 40_000);
const WINDOW_MS = Number(process.env.BENCH_SHAPE_WINDOW_MS ?? 80_000);
const CACHE = Number(process.env.BENCH_SHAPE_CACHE ?? 100);
const ROUNDS = (process.env.BENCH_SHAPE_ROUNDS ?? '1,8').split(',').map(Number);

await runBench('cycles-per-run', `${N} bare cycles @ ${INTERVAL_MS} ms, worker cache ${CACHE}, cycles per run: ${ROUNDS.join(', ')}`, main);

async function main(stack: BenchStack) {
  const bundle = await bundleWorkflows(benchFile('cycles-per-run-workflows.ts'));
  const rows: (string | number)[][] = [];
  for (const [round, cyclesPerRun] of ROUNDS.entries()) {
    let cycles = 0;
    const activities: CycleShapeActivities = { job: async () => { cycles += 1; }, step: async () => undefined };
    const taskQueue = `bench-cycles-per-run-${round}`;
    const worker = runWorker(
      await Worker.create({ connection: stack.nativeConnection, namespace: 'default', taskQueue, workflowBundle: bundle, maxCachedWorkflows: CACHE, activities }),
    );
    const ids = Array.from({ length: N }, (_, i) => `cycles-per-run-${round}-${i}`);
    for (const [i, workflowId] of ids.entries()) {
      await stack.client.workflow.start('cycleShapeWorkflow', {
        taskQueue, workflowId, args: [INTERVAL_MS, cyclesPerRun], startDelay: Math.round((i / N) * INTERVAL_MS),
      });
    }
    await sleep(INTERVAL_MS + 15_000);
    const before = cycles;
    const meter = cpuMeter(stack);
    await sleep(WINDOW_MS);
    const cpu = meter.read();
    const done = cycles - before;
    const perCycle = (seconds: number) => ((seconds / done) * 1000).toFixed(1);
    rows.push([`${round + 1}`, cyclesPerRun, done, (done / cpu.wall).toFixed(1), perCycle(cpu.temporal), perCycle(cpu.bench), perCycle(cpu.temporal + cpu.bench)]);
    console.log(`round ${round + 1} (${cyclesPerRun} a run): ${formatCpu(cpu)}`);
    for (const workflowId of ids) await stack.client.workflow.getHandle(workflowId).terminate().catch(() => undefined);
    await worker.stop();
  }
  console.log('');
  table(['round', 'cycles a run', 'cycles', 'per s', 'dev server ms CPU a cycle', 'worker + bench ms', 'both ms'], rows);
}
