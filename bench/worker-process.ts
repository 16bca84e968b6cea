// Child process of worker-memory.bench.ts: the real Synctide worker (workers/create-worker.ts,
// production options) alone in its own process, so that its memory is measured in isolation. It
// loads a prebuilt workflow bundle (no webpack in this process) and answers over IPC:
// `{ type: 'measure', gc }` → its memory (after a full GC of the main thread when `gc`), the
// worker's status and cache settings;
// `{ type: 'stop' }` → shuts the worker down and exits.
import v8 from 'node:v8';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createPool } from '../db/pool';
import { workflowCacheSize } from '../infra/boot';
import { loadConfig } from '../lib/config';
import { createWorker } from '../workers/create-worker';
import { benchActivityDeps } from './deps';

/** What the child reports. Sizes in MiB. */
export interface WorkerMemoryReport {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  heapLimit: number;
  numCachedWorkflows: number;
  inFlightActivations: number;
  inFlightActivities: number;
  maxCachedWorkflows: number;
  maxConcurrentWorkflowTaskExecutions: number | string;
  reuseV8Context: boolean;
  workflowThreadPoolSize: number;
}

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

Runtime.install({ logger: new DefaultLogger('WARN') });
const address = env('BENCH_TEMPORAL_ADDRESS');
const taskQueue = env('BENCH_TASK_QUEUE');
const pool = createPool(env('BENCH_DB_URL'), 10);
const connection = await Connection.connect({ address });
const client = new Client({ connection, namespace: 'default' });
const native = await NativeConnection.connect({ address });
const worker = await createWorker({
  connection: native,
  namespace: 'default',
  shutdownGraceSeconds: 5,
  workflowBundle: { codePath: env('BENCH_BUNDLE_PATH') },
  // The worker's default (sized to this process's memory limit) unless a run compares sizes (BENCH_MAX_CACHED=<n>).
  maxCachedWorkflows: workflowCacheSize(loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: process.env.BENCH_MAX_CACHED })),
  activities: benchActivityDeps({ pool, client, taskQueue }),
});
const running = worker.run();

const MiB = 2 ** 20;
process.on('message', async (message: { type: string; gc?: boolean }) => {
  if (message.type === 'measure') {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (message.gc) {
      gc?.();
      gc?.();
    }
    const mem = process.memoryUsage();
    const status = worker.getStatus();
    const options = worker.options as unknown as Record<string, unknown>;
    const tuner = options.tuner as { workflowTaskSlotSupplier?: { numSlots?: number } } | undefined;
    const report: WorkerMemoryReport = {
      rss: mem.rss / MiB,
      heapUsed: mem.heapUsed / MiB,
      heapTotal: mem.heapTotal / MiB,
      external: mem.external / MiB,
      heapLimit: v8.getHeapStatistics().heap_size_limit / MiB,
      numCachedWorkflows: status.numCachedWorkflows,
      inFlightActivations: status.numInFlightWorkflowActivations,
      inFlightActivities: status.numInFlightActivities,
      maxCachedWorkflows: options.maxCachedWorkflows as number,
      maxConcurrentWorkflowTaskExecutions: tuner?.workflowTaskSlotSupplier?.numSlots ?? 'tuner',
      reuseV8Context: options.reuseV8Context as boolean,
      workflowThreadPoolSize: options.workflowThreadPoolSize as number,
    };
    process.send?.({ type: 'report', report });
  } else if (message.type === 'stop') {
    worker.shutdown();
    await running.catch(() => undefined);
    await native.close();
    await connection.close();
    await pool.end();
    process.exit(0);
  }
});
process.send?.({ type: 'ready' });
