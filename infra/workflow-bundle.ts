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

const INLINE_SOURCE_MAP = '//# sourceMappingURL=data:application/json;charset=utf-8;base64,';

/**
 * The bundle with its inline source map keeping every mapping (a workflow's stack trace still
 * names the original file and line) but not the source text of dependencies (`node_modules`),
 * most of the map, which the worker's main thread and every workflow thread parse and hold. The
 * SDK reads source text only for stack-trace queries with `showStackTraceSources`, which Synctide
 * does not set.
 */
export function withoutDependencySources(code: string): string {
  const at = code.lastIndexOf(INLINE_SOURCE_MAP);
  if (at < 0) throw new Error('the workflow bundle has no inline source map');
  const map = JSON.parse(Buffer.from(code.slice(at + INLINE_SOURCE_MAP.length).trimEnd(), 'base64').toString()) as {
    sources: string[];
    sourcesContent?: (string | null)[];
  };
  map.sourcesContent = map.sources.map((source, i) => (/[\\/]node_modules[\\/]/.test(source) ? null : (map.sourcesContent?.[i] ?? null)));
  return `${code.slice(0, at)}${INLINE_SOURCE_MAP}${Buffer.from(JSON.stringify(map)).toString('base64')}`;
}

/** Bundles a workflows module (Synctide's by default) and the tracing interceptors with webpack: a few seconds of CPU. */
export async function bundleWorkflows(workflowsPath: string = WORKFLOWS_PATH): Promise<WorkflowBundle> {
  const { code } = await bundleWorkflowCode({ workflowsPath, workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES, logger: quietLogger });
  return { code: withoutDependencySources(code) };
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
