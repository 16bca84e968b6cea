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
async function restartable<S extends { stop(): Promise<void> }>(start: () => Promise<S>, dir: string): Promise<RestartableServer & { first: S; current(): S | null }> {
  const first = await start();
  let server: S | null = first;
  const stop = async () => {
    await server?.stop();
    server = null;
  };
  return {
    first,
    current: () => server,
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

/**
 * An embedded Postgres of the test's own with a migrated `synctide` database (`url`); `pid()` is
 * its postmaster's while it runs (-1 while stopped).
 */
export async function startOwnedPostgres(): Promise<RestartableServer & { url: string; pid(): number }> {
  const dir = await scratchDir('synctide-fault-pg-');
  const options = { dataDir: path.join(dir, 'data'), port: await freePort(), ephemeral: true };
  const server = await restartable(() => startEmbeddedPostgres(options), dir);
  await createDatabaseIfMissing(server.first.adminUrl, 'synctide');
  const url = server.first.urlFor('synctide');
  await migrate(url);
  return { ...server, url, pid: () => server.current()?.pid ?? -1 };
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

/** The pids of `pid`'s children (Linux: each process's parent is the fourth field of /proc/<pid>/stat). */
async function childPids(pid: number): Promise<number[]> {
  const children: number[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await fs.readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // The command name (second field) is in parentheses and may hold spaces: read after its last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === pid) children.push(Number(entry));
  }
  return children;
}

/**
 * Makes a server silent without closing anything: SIGSTOP to `pid` (a Postgres postmaster) first,
 * so it forks no one new, then to each of its children (every session's backend). Connections stay
 * open and the kernel still accepts new ones, but nothing answers. Resolves with `thaw`, which
 * sends SIGCONT to all of them (call it before stopping the server).
 */
export async function freezeProcessTree(pid: number): Promise<() => void> {
  if (pid <= 0) throw new Error(`no process to freeze (pid ${pid})`);
  process.kill(pid, 'SIGSTOP');
  const frozen = [pid, ...(await childPids(pid))];
  for (const child of frozen.slice(1)) process.kill(child, 'SIGSTOP');
  return () => {
    for (const p of frozen) {
      try {
        process.kill(p, 'SIGCONT');
      } catch {
        // Exited meanwhile.
      }
    }
  };
}
