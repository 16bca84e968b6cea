// `npm run build`: the production processes as JavaScript in dist/, which the image runs with
// `node --enable-source-maps dist/<entry>.js` (no TypeScript loader in production):
//   dist/api.js, dist/worker.js, dist/migrate.js, dist/rotate-credentials.js (+ .js.map each),
//   dist/migrations/ (the SQL migrations, found next to the bundle that applies them),
//   dist/workflow-bundle.js (the workers' workflow code, for WORKFLOW_BUNDLE_PATH).
//
// esbuild bundles each entry with its project imports into one ES module and leaves every package
// import to node_modules (so packages keep their own file layout: swagger-ui-dist's assets, the
// Temporal core bridge, pino). `tsc` emit is no option here: the sources import each other
// without file extensions, which Node's ES module loader refuses.
import { statSync } from 'node:fs';
import { cp, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { MIGRATIONS_DIR } from '../db/migrate';
import { writeWorkflowBundle } from '../infra/workflow-bundle';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Each production process: its output name in dist/ and its source entry. */
export const ENTRIES: Record<string, string> = {
  api: 'api/main.ts',
  worker: 'workers/main.ts',
  migrate: 'scripts/migrate.ts',
  'rotate-credentials': 'scripts/rotate-credentials.ts',
};

/**
 * Package imports stay external, as written, except a deep import of a package folder (e.g.
 * `@temporalio/common/lib/internal-non-workflow`): Node's ES module loader does not resolve a
 * folder to its index.js, so the import names that file.
 */
const folderImports: Plugin = {
  name: 'folder-imports',
  setup(b) {
    b.onResolve({ filter: /^(?:@[^/]+\/[^/]+|[^@./][^/]*)\/./ }, (args) => {
      const folder = path.join(ROOT, 'node_modules', args.path);
      const isFolder = statSync(folder, { throwIfNoEntry: false })?.isDirectory() ?? false;
      return { path: isFolder ? `${args.path}/index.js` : args.path, external: true };
    });
  },
};

/** Builds the production processes, their migrations and the workflow bundle into `outDir` (emptied first). */
export async function buildDist(outDir: string): Promise<void> {
  await rm(outDir, { recursive: true, force: true });
  await build({
    absWorkingDir: ROOT,
    entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, path.join(ROOT, file)])),
    outdir: outDir,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    plugins: [folderImports],
    sourcemap: 'linked',
    // Shared project modules stay inside each bundle: four self-contained files, no chunk graph.
    splitting: false,
    logLevel: 'warning',
    metafile: false,
  });
  // db/migrate.ts finds the migrations next to the module (db/migrations in the sources).
  await cp(MIGRATIONS_DIR, path.join(outDir, 'migrations'), { recursive: true });
  await mkdir(outDir, { recursive: true });
  await writeWorkflowBundle(path.join(outDir, 'workflow-bundle.js'));
  console.log(`built ${Object.keys(ENTRIES).map((n) => `${n}.js`).join(', ')}, migrations/ and workflow-bundle.js in ${path.relative(ROOT, outDir) || '.'}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  buildDist(path.resolve(process.argv[2] ?? path.join(ROOT, 'dist'))).catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
