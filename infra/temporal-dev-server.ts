import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { SYNCTIDE_SEARCH_ATTRIBUTES } from '../temporal/search-attributes';
import { followOutput, stopChild, watchExit } from './child-process';

/** Options for the local Temporal dev server (`temporal server start-dev`). */
export interface DevServerOptions {
  /** Path of the `temporal` CLI. */
  cliPath: string;
  /** SQLite file that persists the server's state across restarts; in memory when omitted. */
  dbFilename?: string;
  port: number;
  /** Port of the Web UI; no UI when omitted. */
  uiPort?: number;
  namespace: string;
  /** The server's own log level (debug, info, warn, error, never); default warn. */
  logLevel?: string;
  /**
   * SQLite pragmas of a persisted server; default WAL with synchronous=normal (see
   * DEV_SERVER_SQLITE_PRAGMAS). An empty list keeps SQLite's own defaults.
   */
  sqlitePragmas?: readonly string[];
  /** Dynamic-config values (`--dynamic-config-value KEY=VALUE`, the value as JSON). */
  dynamicConfig?: Readonly<Record<string, string | number | boolean>>;
  onLog?: (line: string) => void;
  /**
   * Called as soon as the server process is spawned, before it answers, with its stop (as
   * DevServer.stop): a process stopped while the server starts stops the server too.
   */
  onSpawn?: (stop: () => Promise<void>) => void;
}

/**
 * The dev server's SQLite settings: a write-ahead log with `synchronous=normal` instead of a
 * rollback journal synced at every commit. On this machine it more than doubled the dev server's
 * throughput (see BENCHMARKS.md). It trades nothing against a crash of the process (the database
 * stays consistent); a power loss can lose the last moments of writes. Production runs a
 * Temporal cluster, not the dev server.
 */
export const DEV_SERVER_SQLITE_PRAGMAS = ['journal_mode=wal', 'synchronous=normal'] as const;

/** A running dev server. */
export interface DevServer {
  address: string;
  /** The Web UI, when one was started. */
  uiUrl: string | null;
  pid: number;
  /** SIGTERM, then SIGKILL after 10 s; resolves once the process has exited. */
  stop(): Promise<void>;
}

/**
 * Starts the Temporal CLI dev server with the Web UI and Synctide's search attributes registered,
 * and resolves once its frontend answers and, with a UI port, its Web UI answers too (within 60 s
 * of the start in all; after that it throws with the server's last output). When it throws, the
 * server process is gone.
 */
export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  if (options.dbFilename) await fs.mkdir(path.dirname(path.resolve(options.dbFilename)), { recursive: true });
  const args = [
    'server', 'start-dev',
    '--ip', '127.0.0.1',
    '--port', String(options.port),
    ...(options.uiPort === undefined ? ['--headless'] : ['--ui-port', String(options.uiPort)]),
    ...(options.dbFilename ? ['--db-filename', path.resolve(options.dbFilename)] : []),
    ...(options.dbFilename ? (options.sqlitePragmas ?? DEV_SERVER_SQLITE_PRAGMAS).flatMap((pragma) => ['--sqlite-pragma', pragma]) : []),
    '--namespace', options.namespace,
    '--log-level', options.logLevel ?? 'warn',
    ...Object.entries(options.dynamicConfig ?? {}).flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${JSON.stringify(value)}`]),
    ...SYNCTIDE_SEARCH_ATTRIBUTES.flatMap((key) => ['--search-attribute', `${key.name}=Keyword`]),
  ];
  const child = spawn(options.cliPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const tail = followOutput(child, 30, options.onLog);
  const { exited, spawnError } = watchExit(child);
  const stop = () => stopChild(child, exited, 'SIGTERM', 10_000);
  options.onSpawn?.(stop);
  const address = `127.0.0.1:${options.port}`;

  const deadline = Date.now() + 60_000;
  /** Calls `probe` every 250 ms until it resolves; past the deadline, or once the server exits, throws with its output. */
  const waitUntil = async (probe: () => Promise<unknown>, what: string): Promise<void> => {
    for (;;) {
      const notRun = spawnError();
      if (notRun) throw new Error(`temporal dev server could not be started (${options.cliPath}): ${notRun.message}`);
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`temporal dev server exited during start (code ${child.exitCode ?? child.signalCode}):\n${tail.join('\n')}`);
      }
      try {
        await probe();
        return;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`temporal dev server${what} not reachable: ${(err as Error).message}\n${tail.join('\n')}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  };
  try {
    await waitUntil(async () => {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        await connection.workflowService.describeNamespace({ namespace: options.namespace });
      } finally {
        await connection.close();
      }
    }, ` on ${address}`);
    // The Web UI starts beside the frontend and may answer later: the URL handed out must answer.
    if (options.uiPort !== undefined) {
      const ui = `http://127.0.0.1:${options.uiPort}/`;
      await waitUntil(() => fetch(ui, { signal: AbortSignal.timeout(1000) }), `'s Web UI on ${ui} (is the port taken?)`);
    }
  } catch (err) {
    child.kill('SIGKILL');
    await exited;
    throw err;
  }

  return {
    address,
    uiUrl: options.uiPort === undefined ? null : `http://127.0.0.1:${options.uiPort}`,
    pid: child.pid ?? -1,
    stop,
  };
}
