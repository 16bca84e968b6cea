// A process started beside Temporal (compose, Kubernetes) waits, bounded and saying what it waits
// for, until the frontend answers and its namespace is registered, instead of exiting for good.
import { msToTs } from '@temporalio/common/lib/time';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectTemporal } from '../infra/temporal-connection';
import { freePort } from '../lib/ports';
import { createDevServerEnv } from './helpers/temporal';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await createDevServerEnv();
});
afterAll(async () => {
  await env?.teardown();
});

/** A logger whose warn lines are kept, calling `onLine` for each. */
function waitLog(onLine: (message: string) => void = () => undefined) {
  const lines: { fields: Record<string, unknown>; message: string }[] = [];
  return {
    lines,
    logger: {
      warn: ((fields: Record<string, unknown>, message: string) => {
        lines.push({ fields, message });
        onLine(message);
      }) as never,
    },
  };
}

describe('connectTemporal at start-up', () => {
  it('waits for the namespace to be registered, saying so, then connects', async () => {
    const address = env.connection.options.address;
    const namespace = `late-${Date.now()}`;
    let registered: Promise<unknown> | undefined;
    // The namespace is registered only once the process said it waits for it.
    const log = waitLog(() => {
      registered ??= env.connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    });
    const client = await connectTemporal(address, namespace, {}, { timeoutMs: 120_000, retryMs: 200, logger: log.logger });
    try {
      expect(registered).toBeDefined();
      expect(log.lines[0]!.message).toBe(`waiting for Temporal namespace '${namespace}' to be registered at ${address}`);
      expect(log.lines[0]!.fields).toMatchObject({ attempt: 1, bound_seconds: 120 });
      expect(client.options.namespace).toBe(namespace);
      // The search attributes were registered in the new namespace.
      const attrs = await client.connection.operatorService.listSearchAttributes({ namespace });
      expect(Object.keys(attrs.customAttributes ?? {})).toContain('SynctideConnectionId');
    } finally {
      await client.connection.close();
    }
  });

  it('gives up after its bound, naming what it waited for', async () => {
    const address = env.connection.options.address;
    const log = waitLog();
    // A bound of a few tries even on a loaded host (the first try alone took over a second there).
    await expect(connectTemporal(address, 'never-registered', {}, { timeoutMs: 3000, retryMs: 200, logger: log.logger })).rejects.toThrow(
      /^gave up waiting for Temporal namespace 'never-registered' to be registered at .* after \d+ s \(TEMPORAL_STARTUP_WAIT_SECONDS\)/,
    );
    expect(log.lines.length).toBeGreaterThan(0);
  });

  it('waits for a frontend that does not answer yet, and without a wait fails at once as before', async () => {
    // Nothing listens there. Each try waits at most half of what is left of the bound (the client
    // alone would try for 10 s), so it is tried again, logged, and the 2 s bound ends the wait.
    const address = `127.0.0.1:${await freePort()}`;
    const log = waitLog();
    await expect(connectTemporal(address, 'default', {}, { timeoutMs: 2_000, retryMs: 100, logger: log.logger })).rejects.toThrow(
      new RegExp(`^gave up waiting for the Temporal frontend at ${address.replace(/\./g, '\\.')} to answer`),
    );
    expect(log.lines[0]!.message).toBe(`waiting for the Temporal frontend at ${address} to answer`);
    expect(log.lines.at(-1)!.fields).toMatchObject({ bound_seconds: 2 });
    await expect(connectTemporal(env.connection.options.address, 'never-registered')).rejects.toThrow(/not found/i);
  });
});
