import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import type { Registry } from 'prom-client';
import type { Keyring } from '../../lib/credentials';
import type { SyncMetrics } from '../../lib/metrics';
import { afterAll, beforeAll } from 'vitest';
import { createTestDatabase, type TestDatabase } from './database';
import { createDevServerEnv, createTimeSkippingEnv } from './temporal';
import { createTestWorker, type LogLines } from './worker';

/** What a workflow test file runs against: its own Temporal server, database and worker. */
export interface WorkerStack {
  env: TestWorkflowEnvironment;
  db: TestDatabase;
  worker: Worker;
  /** The worker's log lines, parsed. */
  lines: LogLines;
  /** The metrics registry of the worker's activities, and their metrics on it. */
  registry: Registry;
  metrics: SyncMetrics;
}

/**
 * Registers beforeAll/afterAll hooks that give the test file a Temporal server of `kind`, a
 * fresh database and a running Synctide worker on `taskQueue`; the returned object is filled in
 * by the time the file's own beforeAll hooks and tests run.
 */
export function useWorkerStack(kind: 'time-skipping' | 'dev-server', taskQueue: string, opts: { credentials?: Keyring } = {}): WorkerStack {
  const stack = {} as WorkerStack;
  let running: Promise<void> | undefined;
  beforeAll(async () => {
    [stack.env, stack.db] = await Promise.all([
      kind === 'dev-server' ? createDevServerEnv() : createTimeSkippingEnv(),
      createTestDatabase(),
    ]);
    const { worker, lines, registry, metrics } = await createTestWorker({
      connection: stack.env.nativeConnection,
      client: stack.env.client,
      pool: stack.db.pool,
      taskQueue,
      credentials: opts.credentials,
    });
    stack.worker = worker;
    stack.lines = lines;
    stack.registry = registry;
    stack.metrics = metrics;
    running = worker.run();
  });
  afterAll(async () => {
    stack.worker?.shutdown();
    await running;
    await stack.env?.teardown();
    await stack.db?.drop();
  });
  return stack;
}
