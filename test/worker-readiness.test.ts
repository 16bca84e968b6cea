// A worker's readiness is real: ready only while its workers are running and polling (and, when
// asked, Temporal answers them); false before run() and from the moment shutdown begins, while
// in-flight work still drains.
import type { NativeConnection } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerReadiness } from '../workers/run-worker';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { createTimeSkippingEnv } from './helpers/temporal';
import { createTestWorker } from './helpers/worker';

let env: TestWorkflowEnvironment;
let db: TestDatabase;
beforeAll(async () => {
  [env, db] = await Promise.all([createTimeSkippingEnv(), createTestDatabase()]);
});
afterAll(async () => {
  await env?.teardown();
  await db?.drop();
});

describe('workerReadiness', () => {
  it('is false before run(), true while polling, false as soon as shutdown begins', async () => {
    const connection: NativeConnection = env.nativeConnection;
    const { worker } = await createTestWorker({ connection, client: env.client, pool: db.pool, taskQueue: 'readiness' });
    const { worker: second } = await createTestWorker({ connection, client: env.client, pool: db.pool, taskQueue: 'readiness-2' });
    const workers = { worker, immediate: second };
    expect(workerReadiness(workers)).toEqual({ ready: false, workers: { worker: 'INITIALIZED', immediate: 'INITIALIZED' } });

    const running = [worker.run(), second.run()];
    expect(workerReadiness(workers)).toEqual({ ready: true, workers: { worker: 'RUNNING', immediate: 'RUNNING' } });
    // Running, but Temporal does not answer their connection: no poll gets through, so not ready.
    expect(workerReadiness(workers, 'unreachable')).toEqual({ ready: false, workers: { worker: 'RUNNING', immediate: 'RUNNING' }, temporal: 'unreachable' });
    expect(workerReadiness(workers, 'ok')).toEqual({ ready: true, workers: { worker: 'RUNNING', immediate: 'RUNNING' }, temporal: 'ok' });

    // One worker stopping is enough to be unready.
    second.shutdown();
    const draining = workerReadiness(workers);
    expect(draining.ready).toBe(false);
    expect(draining.workers.worker).toBe('RUNNING');
    expect(draining.workers.immediate).not.toBe('RUNNING');

    worker.shutdown();
    await Promise.all(running);
    expect(workerReadiness(workers)).toEqual({ ready: false, workers: { worker: 'STOPPED', immediate: 'STOPPED' } });
  });
});
