import { TestWorkflowEnvironment } from '@temporalio/testing';
import { inject } from 'vitest';
import { ensureSearchAttributes } from '../../lib/temporal-namespace';
import { SYNCTIDE_SEARCH_ATTRIBUTES } from '../../workflows/search-attributes';

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
 * A Temporal CLI dev server of its own, with Synctide's search attributes registered. It logs
 * errors only, or what `logLevel` (the CLI's --log-level: debug, info, warn, error, never) says.
 */
export function createDevServerEnv(opts: { logLevel?: string } = {}): Promise<TestWorkflowEnvironment> {
  return TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: inject('temporalCliPath') },
      searchAttributes: [...SYNCTIDE_SEARCH_ATTRIBUTES],
      log: { format: 'pretty', level: opts.logLevel ?? 'error' },
    },
  });
}

export { bundleWorkflows } from '../../lib/workflow-bundle';

