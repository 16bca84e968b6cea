// Starts what every test file shares: one throwaway Postgres server (or DATABASE_URL's) and the
// resolved Temporal binaries. Each file then creates its own database and Temporal environment.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../infra/embedded-postgres';
import { resolveTemporalBinary } from '../infra/temporal-binaries';
import { freePort } from '../lib/ports';
import { writeWorkflowBundle } from '../infra/workflow-bundle';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a database on the test server from which fresh databases are created. */
    pgAdminUrl: string;
    temporalCliPath: string;
    temporalTestServerPath: string;
    /** Synctide's workflows, bundled once for every worker the tests start. */
    workflowBundlePath: string;
  }
}

export default async function setup(project: TestProject) {
  const stops: (() => Promise<unknown>)[] = [];
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-test-pg-'));
    await fs.chmod(dir, 0o755);
    const server = await startEmbeddedPostgres({ dataDir: path.join(dir, 'data'), port: await freePort(), ephemeral: true });
    adminUrl = server.adminUrl;
    stops.push(() => server.stop(), () => fs.rm(dir, { recursive: true, force: true }));
  }
  // Tests must really run against Temporal: no silent fallback to a download that cannot work here.
  const [cli, testServer] = await Promise.all([
    resolveTemporalBinary('cli', { allowSdkDownload: false }),
    resolveTemporalBinary('test-server', { allowSdkDownload: false }),
  ]);
  // Bundled once here instead of by each test file and each worker process a fault test starts.
  const bundleDir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-test-bundle-'));
  stops.push(() => fs.rm(bundleDir, { recursive: true, force: true }));
  const bundlePath = path.join(bundleDir, 'workflow-bundle.js');
  await writeWorkflowBundle(bundlePath);
  project.provide('workflowBundlePath', bundlePath);
  project.provide('pgAdminUrl', adminUrl);
  project.provide('temporalCliPath', cli.path!);
  project.provide('temporalTestServerPath', testServer.path!);
  return async () => {
    for (const stop of stops) await stop();
  };
}
