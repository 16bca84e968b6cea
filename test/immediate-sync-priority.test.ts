// An immediate sync's workflow tasks go ahead of scheduled work backed up on the shared task
// queue: a caller waits on its answer, while a connection's run only ever waits a little longer.
// On a dev server with one partition per task queue (so the order the server keeps is the order a
// poller sees), a backlog of default-priority workflow tasks builds up with no worker polling; an
// immediate sync started after all of them is the first a worker picks up.
import { Worker } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startImmediateSync } from '../temporal/client';
import { IMMEDIATE_SYNC_PRIORITY, IMMEDIATE_SYNC_WORKFLOW, type ImmediateSyncInput } from '../temporal/immediate-sync';
import { createDevServerEnv } from './helpers/temporal';
import { eventually, synctideBundle } from './helpers/worker';
import { temporal } from '@temporalio/proto';

const QUEUE = 'priority-backlog';
/** The activities are never served: each workflow stops at its first task, having scheduled one. */
const input = (connectionId: string): ImmediateSyncInput => ({ connectionId, mode: 'full', activityTaskQueue: 'nobody-polls' });
const BACKLOG = 12;

describe('immediate-sync priority', () => {
  let env: TestWorkflowEnvironment;
  beforeAll(async () => {
    env = await createDevServerEnv({ dynamicConfig: { 'matching.numTaskqueueReadPartitions': 1, 'matching.numTaskqueueWritePartitions': 1 } });
  });
  afterAll(async () => {
    await env?.teardown();
  });

  /** When the worker started a workflow's first task (ns since the epoch). */
  const firstTaskStarted = async (workflowId: string): Promise<bigint> => {
    const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const started = events.find((e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED);
    if (!started?.eventTime) throw new Error(`${workflowId}: no workflow task started`);
    return BigInt(String(started.eventTime.seconds)) * 1_000_000_000n + BigInt(started.eventTime.nanos ?? 0);
  };

  it("a worker picks up an immediate sync's first task before a backlog of scheduled work that was there first", async () => {
    const backlog: string[] = [];
    for (let i = 0; i < BACKLOG; i++) {
      const handle = await env.client.workflow.start(IMMEDIATE_SYNC_WORKFLOW, { workflowId: `backlog-${i}`, taskQueue: QUEUE, args: [input(`backlog-${i}`)] });
      backlog.push(handle.workflowId);
    }
    const urgent = await startImmediateSync(env.client, QUEUE, input('urgent'), 60_000);
    expect(urgent).not.toBeNull();
    expect((await urgent!.describe()).raw.workflowExecutionInfo?.priority?.priorityKey).toBe(IMMEDIATE_SYNC_PRIORITY);

    // One workflow task at a time, so the order they are started in is the order they were handed out.
    const worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: 'default',
      taskQueue: QUEUE,
      workflowBundle: await synctideBundle(),
      maxConcurrentWorkflowTaskExecutions: 1,
      maxCachedWorkflows: 0,
    });
    await worker.runUntil(
      eventually(async () => {
        const described = await Promise.all([...backlog, urgent!.workflowId].map((id) => env.client.workflow.getHandle(id).describe()));
        return described.every((d) => (d.raw.pendingActivities ?? []).length === 1) ? true : undefined;
      }),
    );

    const urgentAt = await firstTaskStarted(urgent!.workflowId);
    const backlogAt = await Promise.all(backlog.map(firstTaskStarted));
    expect(backlogAt.filter((t) => t < urgentAt)).toEqual([]);
  });
});
