// Cancelling a job whose tasks run in a batch (`max_parallel_tasks` > 1), on the Temporal dev
// server with real Postgres: the job shows `cancelled` only once every task of the batch stopped,
// not as soon as the first one did (runs recorded before CANCEL_WAITS_FOR_BATCH_PATCH: as soon as
// it did; recorded with the patches-off bundle). One task is held in a page fetch that ignores the
// abort, so the order is decided by the test, never by timing.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerConnector } from '../connectors/registry';
import { syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobInput, SyncJobResult } from '../temporal/sync-job';
import { CANCEL_WAITS_FOR_BATCH_PATCH } from '../workflows/sync-job/attempt';
import { STEPPED_WAIT_BEHIND_PATCH } from '../workflows/sync-job/bookkeeping';
import type { TestDatabase } from './helpers/database';
import { demoConnector } from './helpers/demo';
import { patchIds, recordHistory } from './helpers/histories';
import { PATCHES_OFF_MEMO } from './helpers/patches-off/workflow';
import { useWorkerStack } from './helpers/stack';
import { createTestWorker, eventually, prebuiltBundle } from './helpers/worker';

const TASK_QUEUE = 'sync-job-cancel-batch';
const OLD_TASK_QUEUE = 'sync-job-cancel-batch-patches-off';
const SLUG = 'demo-held-batch';

/** A gate the test opens: `reached` resolves when a fetch waits at it, `open()` lets it through. */
function gate() {
  let open!: () => void;
  let arrive!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  const reached = new Promise<void>((r) => (arrive = r));
  return { open, reached, pass: () => (arrive(), opened) };
}

let held = gate();

// The demo connector, except that the first page of `users` waits at the test's gate, ignoring
// the abort (a provider request that does not stop when the activity is cancelled).
registerConnector({
  slug: SLUG,
  resourceTypes: (config) => demoConnector.resourceTypes(config),
  async fetchPage(input) {
    if (input.resource === 'users' && input.pageToken === null) await held.pass();
    return demoConnector.fetchPage(input);
  },
});

describe('cancelling a job mid-batch', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  // A worker of the patches-off bundle, for runs recorded before CANCEL_WAITS_FOR_BATCH_PATCH.
  let oldWorker: Worker;
  let oldRunning: Promise<void>;
  beforeAll(async () => {
    ({ env, db } = stack);
    ({ worker: oldWorker } = await createTestWorker({
      connection: env.nativeConnection, client: env.client, pool: db.pool, taskQueue: OLD_TASK_QUEUE,
      workflowBundle: await prebuiltBundle('patchesOffBundlePath'),
    }));
    oldRunning = oldWorker.run();
  });
  afterAll(async () => {
    oldWorker?.shutdown();
    await oldRunning;
  });

  const job = async (jobId: string) => (await db.pool.query('select status from sync_jobs where id = $1', [jobId])).rows[0];
  const tasks = async (jobId: string) =>
    (await db.pool.query('select resource_type, status from sync_tasks where job_id = $1 order by resource_type', [jobId])).rows;

  /**
   * Starts a full job of a new connection with two resource types run two at a time, waits until
   * both tasks run (`users` held in its first fetch), cancels it, and waits until the workflow
   * handled the cancellation of `issues` (a workflow task completed after its ActivityTaskCanceled),
   * while `users` cannot have stopped. The caller opens `held` when done.
   */
  async function cancelMidBatch(taskQueue: string, patchesOff: string[] = []) {
    held = gate();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', $1, $2, $3) returning id`,
      [SLUG, `held-${randomUUID()}`, { resource_types: ['issues', 'users'], records_per_resource: 5000, page_size: 100, latency_ms: 100, max_parallel_tasks: 2 }],
    );
    const connectionId = rows[0]!.id;
    const jobId = randomUUID();
    await db.pool.query(`insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', 'full', 'manual')`, [jobId, connectionId]);
    const handle = await env.client.workflow.start<(input: SyncJobInput) => Promise<SyncJobResult>>('syncJobWorkflow', {
      taskQueue, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId }],
      ...(patchesOff.length > 0 && { memo: { [PATCHES_OFF_MEMO]: patchesOff } }),
    });
    const fetchedIssues = () => demoConnector.fetchLog.filter((e) => e.resource === 'issues').length;
    const before = fetchedIssues();
    await held.reached;
    await eventually(async () => (fetchedIssues() > before ? true : undefined));
    await handle.cancel();
    const events = async () => (await handle.fetchHistory()).events ?? [];
    await eventually(async () => {
      const all = await events();
      const cancelled = all.findIndex((e) => e.activityTaskCanceledEventAttributes);
      return cancelled >= 0 && all.slice(cancelled + 1).some((e) => e.workflowTaskCompletedEventAttributes) ? true : undefined;
    });
    expect((await events()).filter((e) => e.activityTaskCanceledEventAttributes)).toHaveLength(1);
    return { jobId, handle, events };
  }

  it('marks the job cancelled only after every task of the batch stopped', async () => {
    try {
      const { jobId, handle, events } = await cancelMidBatch(TASK_QUEUE);
      expect({ job: await job(jobId), users: (await tasks(jobId))[1] }).toEqual({
        job: { status: 'running' },
        users: { resource_type: 'users', status: 'processing' },
      });

      held.open();
      expect(await handle.result()).toMatchObject({ jobId, status: 'cancelled' });
      expect({ job: await job(jobId), tasks: await tasks(jobId), markers: patchIds(await events()) }).toEqual({
        job: { status: 'cancelled' },
        tasks: [{ resource_type: 'issues', status: 'cancelled' }, { resource_type: 'users', status: 'cancelled' }],
        markers: [STEPPED_WAIT_BEHIND_PATCH, 'lean-job', CANCEL_WAITS_FOR_BATCH_PATCH],
      });
      await recordHistory(env.client, 'sync-job-cancelled-mid-batch', handle.workflowId);
    } finally {
      held.open(); // a failed check must not leave the worker's shutdown waiting for the held fetch
    }
  });

  it(`before ${CANCEL_WAITS_FOR_BATCH_PATCH}, the job was cancelled as soon as the first task of the batch stopped`, async () => {
    try {
      // Recorded as runs of that time were: before the stepped wait behind a running job too.
      const { jobId, handle, events } = await cancelMidBatch(OLD_TASK_QUEUE, [CANCEL_WAITS_FOR_BATCH_PATCH, STEPPED_WAIT_BEHIND_PATCH]);
      expect(await handle.result()).toMatchObject({ jobId, status: 'cancelled' });
      expect({ job: await job(jobId), tasks: await tasks(jobId), markers: patchIds(await events()) }).toEqual({
        job: { status: 'cancelled' },
        tasks: [{ resource_type: 'issues', status: 'cancelled' }, { resource_type: 'users', status: 'cancelled' }],
        markers: ['lean-job'],
      });
      await recordHistory(env.client, `sync-job-cancelled-mid-batch.pre-${CANCEL_WAITS_FOR_BATCH_PATCH}`, handle.workflowId);
    } finally {
      held.open();
    }
  });
});
