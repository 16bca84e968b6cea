import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import pg from 'pg';
import type { Registry } from 'prom-client';
import { reconcileConnections } from '../../activities/reconcile-connections';
import type { CommandDeps } from '../../commands/deps';
import type { RateLimitSettings } from '../../activities/deps';
import type { Keyring } from '../../lib/credentials';
import type { SyncMetrics } from '../../lib/metrics';
import type { ReconcileResult } from '../../temporal/activities';
import type { Pool } from '../../db/pool';
import { createWorker } from '../../workers/create-worker';
import { LaneGate } from '../../workers/lane-gate';
import { afterAll, beforeAll } from 'vitest';
import { startTestApi, type TestApi } from './api';
import { createTestDatabase, type TestDatabase } from './database';
import { TEST_KEYRING, testActivityDeps } from './deps';
import { createDevServerEnv, createTimeSkippingEnv } from './temporal';
import { createTestWorker, synctideBundle, type LogLines } from './worker';

/** A test file's own Temporal server and database. */
export interface Servers {
  env: TestWorkflowEnvironment;
  db: TestDatabase;
}

/**
 * Registers beforeAll/afterAll hooks that give the test file a Temporal server of `kind` and a
 * fresh database, torn down after the file's own afterAll hooks (vitest runs after-hooks in
 * reverse order, and these are registered first); the returned object is filled in by the time
 * the file's own beforeAll hooks run.
 */
export function useServers(kind: 'time-skipping' | 'dev-server' = 'dev-server'): Servers {
  const servers = {} as Servers;
  beforeAll(async () => {
    [servers.env, servers.db] = await Promise.all([kind === 'dev-server' ? createDevServerEnv() : createTimeSkippingEnv(), createTestDatabase()]);
  });
  afterAll(async () => {
    await servers.env?.teardown();
    await servers.db?.drop();
  });
  return servers;
}

/** What a workflow test file runs against: its own Temporal server, database and worker. */
export interface WorkerStack extends Servers {
  worker: Worker;
  /** The worker's log lines, parsed. */
  lines: LogLines;
  /** The metrics registry of the worker's activities, and their metrics on it. */
  registry: Registry;
  metrics: SyncMetrics;
}

/** What a test drives a worker stack by, in place of an API process and the scheduled reconcile tick. */
export interface StackControls {
  /**
   * Command deps on the stack, as its API process would have them: its database, Temporal client,
   * task queue and metrics, the test keyring, a day as the longest interval, a minute for an
   * immediate sync.
   */
  commands: CommandDeps;
  /** Runs one reconcile tick now (real time) on the stack, with activity deps of its own. */
  tick(): Promise<ReconcileResult>;
}

/**
 * Registers beforeAll/afterAll hooks that give the test file a Temporal server of `kind`, a
 * fresh database and a running Synctide worker on `taskQueue` (rate-limit settings
 * `opts.rateLimit`, the defaults when omitted), with command deps and a reconcile tick on them;
 * the returned object is filled in by the time the file's own beforeAll hooks and tests run.
 */
export function useWorkerStack(kind: 'time-skipping' | 'dev-server', taskQueue: string, opts: { credentials?: Keyring; rateLimit?: RateLimitSettings } = {}): WorkerStack & StackControls {
  const stack = useServers(kind) as WorkerStack & StackControls;
  let running: Promise<void> | undefined;
  beforeAll(async () => {
    const { worker, lines, registry, metrics } = await createTestWorker({
      connection: stack.env.nativeConnection,
      client: stack.env.client,
      pool: stack.db.pool,
      taskQueue,
      credentials: opts.credentials,
      rateLimit: opts.rateLimit,
    });
    stack.worker = worker;
    stack.lines = lines;
    stack.registry = registry;
    stack.metrics = metrics;
    stack.commands = {
      pool: stack.db.pool,
      temporal: stack.env.client,
      taskQueue,
      metrics,
      credentials: TEST_KEYRING,
      maxIntervalSeconds: 86_400,
      immediateSyncTimeoutMs: 60_000,
    };
    stack.tick = () => reconcileConnections(testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue }).deps)({ at: Date.now() });
    running = worker.run();
  });
  afterAll(async () => {
    stack.worker?.shutdown();
    await running;
  });
  return stack;
}

/** A worker whose activities share a small pool of their own, and an API on its task queue. */
export interface SmallPoolStack extends Servers {
  worker: Worker;
  /** The scheduled worker's pool: `poolMax` connections, given up on after a second of waiting (30 s in production). */
  workerPool: Pool;
  api: TestApi;
}

/**
 * Registers beforeAll/afterAll hooks that give the test file a dev server, a fresh database, and
 * a real Synctide worker on `taskQueue` whose activities use a pool of `poolMax` connections (as
 * a production worker's scheduled pool; its workflow-task bookkeeping has the database's own
 * pool, as in production), with an API on the same queue.
 */
export function useSmallPoolStack(taskQueue: string, poolMax: number): SmallPoolStack {
  const stack = useServers() as SmallPoolStack;
  let running: Promise<void> | undefined;
  beforeAll(async () => {
    const { env, db } = stack;
    stack.workerPool = new pg.Pool({ connectionString: db.url, max: poolMax, connectionTimeoutMillis: 1_000 });
    stack.workerPool.on('error', () => undefined);
    const { deps, lines, registry } = testActivityDeps({ pool: stack.workerPool, temporal: env.client, taskQueue });
    stack.worker = await createWorker({
      connection: env.nativeConnection,
      namespace: 'default',
      shutdownGraceSeconds: 5,
      // A gate that never holds the lane back: the one a production worker has, on a cool node.
      lanes: new LaneGate(1, () => 0),
      workflowBundle: await synctideBundle(),
      activities: { ...deps, localPool: db.pool },
    });
    running = stack.worker.run();
    stack.api = await startTestApi({ env, db, worker: stack.worker, registry, metrics: deps.metrics, lines }, taskQueue);
  });
  afterAll(async () => {
    await stack.api?.server.close();
    if (stack.worker?.getState() === 'RUNNING') stack.worker.shutdown();
    await running;
    await stack.workerPool?.end();
  });
  return stack;
}
