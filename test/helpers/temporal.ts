import { TestWorkflowEnvironment } from '@temporalio/testing';
import { inject } from 'vitest';
import { startDevServer, type DevServerOptions } from '../../infra/temporal-dev-server';
import { ensureSearchAttributes } from '../../infra/temporal-namespace';
import { freePort } from '../../lib/ports';

/**
 * A time-skipping test server of its own for one test file (from the pinned PyPI wheel), with
 * Synctide's search attributes registered (it rejects unknown ones, like a real server).
 */
export async function createTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: inject('temporalTestServerPath') } },
  });
  await ensureSearchAttributes(env.connection, env.namespace ?? 'default');
  return env;
}

/**
 * A Temporal CLI dev server of its own (in memory, no Web UI), with Synctide's search attributes
 * registered. Its output is kept by the process that started it, not printed; it logs errors
 * only, or what `logLevel` (the CLI's --log-level: debug, info, warn, error, never) says.
 * `teardown()` closes the connections and kills the server: it keeps its state in memory only,
 * so there is nothing a graceful stop (seconds of draining) would save.
 */
export async function createDevServerEnv(opts: { logLevel?: string; dynamicConfig?: DevServerOptions['dynamicConfig'] } = {}): Promise<TestWorkflowEnvironment> {
  const server = await startDevServer({
    cliPath: inject('temporalCliPath'),
    port: await freePort(),
    namespace: 'default',
    logLevel: opts.logLevel ?? 'error',
    dynamicConfig: opts.dynamicConfig,
  });
  const env = await TestWorkflowEnvironment.createFromExistingServer({ address: server.address, namespace: 'default' });
  const teardown = env.teardown.bind(env);
  env.teardown = async () => {
    await teardown();
    // A pid of -1 (never spawned) must not reach kill(2): it would signal every process.
    if (server.pid > 0) {
      try {
        process.kill(server.pid, 'SIGKILL');
      } catch {
        // Exited already.
      }
    }
    await server.stop(); // resolves once the process has exited
  };
  return env;
}
