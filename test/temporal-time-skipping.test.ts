import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleeper } from './fixtures/smoke-workflows';
import { createTimeSkippingEnv } from './helpers/temporal';
import { prebuiltBundle } from './helpers/worker';

const FIFTEEN_MINUTES = 15 * 60 * 1000;

describe('time-skipping Temporal server', () => {
  let env: TestWorkflowEnvironment;
  let bundle: WorkflowBundle;
  beforeAll(async () => {
    [env, bundle] = await Promise.all([
      createTimeSkippingEnv(),
      prebuiltBundle('smokeBundlePath'),
    ]);
  });
  afterAll(async () => {
    await env?.teardown();
  });

  it('completes a workflow that sleeps 15 minutes by skipping time', async () => {
    expect(env.supportsTimeSkipping).toBe(true);
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue: 'smoke',
      workflowBundle: bundle,
      activities: {},
    });
    const serverTimeBefore = await env.currentTimeMs();
    const result = await worker.runUntil(
      env.client.workflow.execute(sleeper, { taskQueue: 'smoke', workflowId: 'sleeper-15m', args: [FIFTEEN_MINUTES] }),
    );
    // The workflow's own clock moved 15 minutes, and so did the server's: time was skipped.
    expect(result.after - result.before).toBeGreaterThanOrEqual(FIFTEEN_MINUTES);
    expect((await env.currentTimeMs()) - serverTimeBefore).toBeGreaterThanOrEqual(FIFTEEN_MINUTES);
  });
});
