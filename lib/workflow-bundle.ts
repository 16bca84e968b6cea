import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOWS_PATH } from '../workers/create-worker';

/**
 * Bundles Synctide's workflows once into `file`, for workers started with WORKFLOW_BUNDLE_PATH
 * (a worker then starts without running webpack). Rebuild it whenever workflow code changes.
 */
export async function writeWorkflowBundle(file: string): Promise<void> {
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietLogger });
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, code);
}

const noop = () => undefined;
// webpack's progress lines are noise here; its errors still fail the build.
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };
