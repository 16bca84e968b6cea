// Servers a fault test owns and can stop and start again: a Temporal CLI dev server persisted to a
// SQLite file, and an embedded Postgres on its own data directory, each on a fixed port so that
// processes connected to it find it again after a restart.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, inject } from 'vitest';
import { createDatabaseIfMissing } from '../../infra/database';
import { startEmbeddedPostgres } from '../../infra/embedded-postgres';
import { migrate } from '../../db/migrate';
import { freePort } from '../../lib/ports';
import { startDevServer } from '../../infra/temporal-dev-server';
import { createTestDatabase, type TestDatabase } from './database';
import { stopAllSynctide } from './processes';

/** A server that can be stopped and started again on the same port and state. */
export interface RestartableServer {
  /** Stops the server (gracefully) and resolves once its process has exited. */
  stop(): Promise<void>;
  /** Starts it again on the same port and state; resolves once it answers. */
  start(): Promise<void>;
  /** Stops it and deletes its state. */
  remove(): Promise<void>;
}

/** A scratch directory Postgres (run as the `postgres` user under root) can also use. */
async function scratchDir(prefix: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  await fs.chmod(dir, 0o755);
  return dir;
}

/** Wraps a server's start function: stop and start it again as often as a test likes. */
async function restartable<S extends { stop(): Promise<void> }>(start: () => Promise<S>, dir: string): Promise<RestartableServer & { first: S }> {
  const first = await start();
  let server: S | null = first;
  const stop = async () => {
    await server?.stop();
    server = null;
  };
  return {
    first,
    stop,
    async start() {
      if (!server) server = await start();
    },
    async remove() {
      await stop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

/** `temporal server start-dev --db-filename <tmp>/temporal.db` with Synctide's search attributes. */
export async function startPersistedDevServer(): Promise<RestartableServer & { address: string }> {
  const dir = await scratchDir('synctide-fault-temporal-');
  const options = {
    cliPath: inject('temporalCliPath'),
    dbFilename: path.join(dir, 'temporal.db'),
    port: await freePort(),
    uiPort: await freePort(),
    namespace: 'default',
  };
  const server = await restartable(() => startDevServer(options), dir);
  return { ...server, address: server.first.address };
}

/** An embedded Postgres of the test's own with a migrated `synctide` database (`url`). */
export async function startOwnedPostgres(): Promise<RestartableServer & { url: string }> {
  const dir = await scratchDir('synctide-fault-pg-');
  const options = { dataDir: path.join(dir, 'data'), port: await freePort(), ephemeral: true };
  const server = await restartable(() => startEmbeddedPostgres(options), dir);
  await createDatabaseIfMissing(server.first.adminUrl, 'synctide');
  const url = server.first.urlFor('synctide');
  await migrate(url);
  return { ...server, url };
}

/**
 * Registers hooks giving a test file a fresh database on the suite's Postgres and a persisted dev
 * server; afterwards every Synctide process the file started is stopped and both are removed.
 */
export function usePersistedStack(): { db: TestDatabase; temporal: RestartableServer & { address: string } } {
  const stack = {} as { db: TestDatabase; temporal: RestartableServer & { address: string } };
  beforeAll(async () => {
    [stack.db, stack.temporal] = await Promise.all([createTestDatabase(), startPersistedDevServer()]);
  });
  afterAll(async () => {
    await stopAllSynctide();
    await stack.temporal?.remove();
    await stack.db?.drop();
  });
  return stack;
}
