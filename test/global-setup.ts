// Starts what every test file shares: one throwaway Postgres server (or DATABASE_URL's) with one
// migrated template database, the resolved Temporal binaries, and the workflow bundles. Each file
// then clones its own database from the template and starts its own Temporal environment.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { build } from 'esbuild';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { migrate } from '../db/migrate';
import { createDatabaseIfMissing } from '../infra/database';
import { startEmbeddedPostgres } from '../infra/embedded-postgres';
import { resolveTemporalBinary } from '../infra/temporal-binaries';
import { freePort } from '../lib/ports';
import { bundleWorkflows, writeWorkflowBundle } from '../infra/workflow-bundle';
import { buildPatchesOffBundle } from './helpers/patches-off/bundle';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a database on the test server from which fresh databases are created. */
    pgAdminUrl: string;
    /**
     * A database on that server with every migration applied, which no one may connect to: test
     * files clone it (CREATE DATABASE ... TEMPLATE) instead of migrating a database each.
     */
    pgTemplateDatabase: string;
    temporalCliPath: string;
    temporalTestServerPath: string;
    /** Synctide's workflows, bundled once for every worker the tests start. */
    workflowBundlePath: string;
    /** The smoke workflows of test/fixtures, bundled once for the Temporal server tests. */
    smokeBundlePath: string;
    /** Synctide's workflows with the patches-off shim (test/helpers/patches-off), bundled once. */
    patchesOffBundlePath: string;
    /**
     * The CLI (cli/main.ts and what it imports) as one ES module, bundled once by esbuild (what
     * tsx compiles it with) for the tests that run it as a process: tsx's loader costs each process
     * about half a second of CPU. test/cli-process.test.ts still runs it through tsx.
     */
    cliBundlePath: string;
  }
}

/** The project's root directory. */
const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** What the setup shares with the test files, and how to let go of it. */
interface Shared {
  values: {
    [K in 'pgAdminUrl' | 'pgTemplateDatabase' | 'temporalCliPath' | 'temporalTestServerPath' | 'workflowBundlePath' | 'smokeBundlePath' | 'patchesOffBundlePath' | 'cliBundlePath']: string;
  };
  stop(): Promise<void>;
}

/**
 * The run's shared servers and files, started by the first project whose setup runs and stopped
 * with the last one's teardown: vitest runs a global setup once per project (and once for the
 * root config), and every project must see the same Postgres, template and bundle. Kept on
 * globalThis because each project may load this module afresh.
 */
const SHARED = Symbol.for('synctide.test.global-setup');
type Holder = { shared: Promise<Shared>; users: number };
const registry = globalThis as unknown as { [SHARED]?: Holder };

export default async function setup(project: TestProject) {
  const holder = (registry[SHARED] ??= { shared: startShared(), users: 0 });
  holder.users += 1;
  const shared = await holder.shared;
  for (const [key, value] of Object.entries(shared.values)) project.provide(key as keyof Shared['values'], value);
  return async () => {
    holder.users -= 1;
    if (holder.users > 0) return;
    delete registry[SHARED];
    await shared.stop();
  };
}

async function startShared(): Promise<Shared> {
  const stops: (() => Promise<unknown>)[] = [];
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-test-pg-'));
    await fs.chmod(dir, 0o755);
    const server = await startEmbeddedPostgres({ dataDir: path.join(dir, 'data'), port: await freePort(), ephemeral: true });
    adminUrl = server.adminUrl;
    stops.push(() => server.stop(), () => fs.rm(dir, { recursive: true, force: true }));
  }
  // Migrated once and cloned by each file: cloning is several times faster than migrating.
  const template = `synctide_template_${randomBytes(6).toString('hex')}`;
  const templateReady = createTemplateDatabase(adminUrl, template);
  templateReady.catch(() => undefined); // awaited below; a failure must not surface as unhandled first
  stops.unshift(() => dropTemplateDatabase(adminUrl!, template));
  // Tests must really run against Temporal: no silent fallback to a download that cannot work here.
  const [cli, testServer] = await Promise.all([
    resolveTemporalBinary('cli', { allowSdkDownload: false }),
    resolveTemporalBinary('test-server', { allowSdkDownload: false }),
  ]);
  // Bundled once here instead of by each test file and each worker process a fault test starts.
  // The two test-only bundles too (a few seconds each when a test file made them itself): one
  // after the other, as webpack runs on this thread, where a bundle after the first takes less
  // time (its modules and loaders are loaded); the template migrates meanwhile.
  const bundleDir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-test-bundle-'));
  stops.push(() => fs.rm(bundleDir, { recursive: true, force: true }));
  const bundlePath = path.join(bundleDir, 'workflow-bundle.js');
  const smokeBundlePath = path.join(bundleDir, 'smoke-bundle.js');
  const patchesOffBundlePath = path.join(bundleDir, 'patches-off-bundle.js');
  // The CLI reads its version from ../package.json beside its own module: the bundle sits in a
  // cli/ directory with the package's package.json one level up, as cli/main.ts does.
  const cliBundlePath = path.join(bundleDir, 'cli', 'main.mjs');
  const cliReady = (async () => {
    await build({ entryPoints: [path.join(root, 'cli/main.ts')], bundle: true, platform: 'node', format: 'esm', target: 'node20', outfile: cliBundlePath, logLevel: 'warning' });
    await fs.copyFile(path.join(root, 'package.json'), path.join(bundleDir, 'package.json'));
  })();
  cliReady.catch(() => undefined); // awaited below
  const bundlesReady = (async () => {
    await writeWorkflowBundle(bundlePath);
    await fs.writeFile(smokeBundlePath, (await bundleWorkflows(path.join(root, 'test/fixtures/smoke-workflows.ts'))).code);
    await fs.writeFile(patchesOffBundlePath, (await buildPatchesOffBundle()).code);
  })();
  await Promise.all([bundlesReady, templateReady, cliReady]);
  return {
    values: {
      workflowBundlePath: bundlePath,
      smokeBundlePath,
      patchesOffBundlePath,
      cliBundlePath,
      pgAdminUrl: adminUrl,
      pgTemplateDatabase: template,
      temporalCliPath: cli.path!,
      temporalTestServerPath: testServer.path!,
    },
    async stop() {
      for (const stop of stops) await stop();
    },
  };
}

/** Runs `sql` on the admin database of `adminUrl`. */
async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * Creates `name`, applies every migration, and marks it a template no one can connect to: a
 * clone fails while any session is connected to its template.
 */
async function createTemplateDatabase(adminUrl: string, name: string): Promise<void> {
  await createDatabaseIfMissing(adminUrl, name);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  await migrate(url.toString());
  await adminQuery(adminUrl, `alter database ${pg.escapeIdentifier(name)} is_template true allow_connections false`);
}

/** Drops the template (a template database must be unmarked first). */
async function dropTemplateDatabase(adminUrl: string, name: string): Promise<void> {
  const id = pg.escapeIdentifier(name);
  await adminQuery(adminUrl, `alter database ${id} is_template false`).catch(() => undefined);
  await adminQuery(adminUrl, `drop database if exists ${id}`);
}
