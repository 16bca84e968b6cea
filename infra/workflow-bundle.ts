import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';

/** Entry module of all Synctide workflows, bundled by the worker. */
export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

/**
 * The workflow interceptors of tracing, in every bundle: a run started with a trace context is
 * traced, any other run is left exactly as it was (see the module).
 */
export const WORKFLOW_INTERCEPTOR_MODULES = [fileURLToPath(new URL('../workflows/tracing-interceptors.ts', import.meta.url))];

const noop = () => undefined;
// webpack's progress lines are noise here; its errors still reject the bundle.
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };

/** Bundles a workflows module (Synctide's by default) and the tracing interceptors with webpack: a few seconds of CPU. */
export function bundleWorkflows(workflowsPath: string = WORKFLOWS_PATH): Promise<WorkflowBundle> {
  return bundleWorkflowCode({ workflowsPath, workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES, logger: quietLogger });
}

/**
 * Bundles Synctide's workflows once into `file`, for workers started with WORKFLOW_BUNDLE_PATH
 * (a worker then starts without running webpack). Rebuild it whenever workflow code changes.
 */
export async function writeWorkflowBundle(file: string): Promise<void> {
  const { code } = await bundleWorkflows();
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, code);
}
