import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';
import { WORKFLOWS_PATH } from '../../../infra/workflow-bundle';

const SHIM = fileURLToPath(new URL('./workflow.ts', import.meta.url));
const noop = () => undefined;
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };

/**
 * Synctide's workflows bundled with '@temporalio/workflow' replaced by the patches-off shim: a run
 * started with memo `{ synctide_test_patches_off: ['id', …] }` takes those patches as absent and
 * records the shape runs had before them; any other run is as in the real bundle. The global
 * setup builds it once for the run: tests read it with prebuiltBundle('patchesOffBundlePath').
 */
export function buildPatchesOffBundle(): Promise<WorkflowBundle> {
  return bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    logger: quietLogger,
    webpackConfigHook: (config) => {
      // `$`: the bare specifier only, so the shim's own import of '@temporalio/workflow/lib/index.js' stays real.
      const alias = { ...(config.resolve?.alias as Record<string, string | false>), '@temporalio/workflow$': SHIM };
      config.resolve = { ...config.resolve, alias };
      return config;
    },
  });
}

