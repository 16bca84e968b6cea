// The one setup of the connection-loop files that run the connection workflow against in-memory
// stub activities (no Postgres, so not `useWorkerStack`): a time-skipping server, a worker on
// `taskQueue` with the stubs, connections started by id, and their workflows ended after each test.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { ScheduleSettings } from '../../policy/schedule';
import { ensureConnectionWorkflow } from '../../temporal/client';
import type { ConnectionState } from '../../temporal/connection';
import { connectionWorkflowId } from '../../temporal/ids';
import { waitForState } from './connection-state';
import { stubActivities, type StubConnection } from './stub-activities';
import { createTimeSkippingEnv } from './temporal';
import { synctideBundle } from './worker';

/** A stub-activity connection loop; `env` is filled in by the time the file's tests run. */
export interface StubLoop {
  env: TestWorkflowEnvironment;
  store: ReturnType<typeof stubActivities>;
  /** Adds a connection with `sync` as its stored `metadata.sync` and starts its workflow. */
  start(
    sync?: Record<string, unknown>,
    opts?: { pausedUntil?: number; settings?: ScheduleSettings },
  ): Promise<{ id: string; handle: Awaited<ReturnType<typeof ensureConnectionWorkflow>>; connection: StubConnection }>;
  /** Waits until connection `id`'s state passes `ok`, naming its jobs when it never does. */
  waitForState(id: string, ok: (s: ConnectionState) => boolean): Promise<ConnectionState>;
}

/** Registers the hooks of a stub-activity connection loop on `taskQueue` for the calling test file. */
export function useStubLoop(taskQueue: string): StubLoop {
  const store = stubActivities();
  const loop = { store } as StubLoop;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  beforeAll(async () => {
    loop.env = await createTimeSkippingEnv();
    worker = await Worker.create({ connection: loop.env.nativeConnection, taskQueue, workflowBundle: await synctideBundle(), activities: store.activities });
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await loop.env?.teardown();
  });

  // Each test's workflows end with it, so time skips only for the next test's.
  const started: string[] = [];
  afterEach(async () => {
    for (const id of started.splice(0)) {
      await loop.env.client.workflow.getHandle(connectionWorkflowId(id)).terminate('test done').catch(() => undefined);
    }
  });

  let seq = 0;
  loop.start = async (sync, opts = {}) => {
    seq += 1;
    const id = `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`;
    const connection = store.addConnection(id, await loop.env.currentTimeMs(), sync);
    if (opts.pausedUntil !== undefined) connection.pausedUntil = opts.pausedUntil;
    if (opts.settings) connection.settings = opts.settings;
    started.push(id);
    const handle = await ensureConnectionWorkflow(loop.env.client, taskQueue, { id, tenantId: 'acme', providerSlug: 'demo' });
    return { id, handle, connection };
  };
  loop.waitForState = (id, ok) => waitForState(loop.env, id, ok, async () => store.jobsOf(id).map((j) => `${j.jobType}/${j.trigger}/${j.status}`));
  return loop;
}
