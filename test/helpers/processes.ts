// Real Synctide processes for fault tests: `npm run worker`, `npm run api` and `npm start` (on
// servers given to it, so it spawns none of its own) as child processes (spawned as the node command of the npm script itself, so a signal reaches the process that
// does the work and not npm), with their JSON log lines parsed as they arrive.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { freePort } from '../../lib/ports';
import { TEST_CREDENTIALS_KEY } from './deps';
import type { LogLines } from './logs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SCRIPTS = (JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts;

/** The admin key every API process of a fault test uses: random, as the configuration requires. */
export const TEST_ADMIN_KEY = randomBytes(32).toString('hex');

/** How a process ended. */
export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A running `npm run worker`, `npm run api` or `npm start`. */
export interface SynctideProcess {
  name: string;
  pid: number;
  /** Its JSON log lines (stdout), parsed, in order. */
  lines: LogLines;
  /** The API's base URL (api and start processes only). */
  url?: string;
  /** Everything it printed that was not a JSON line (the last 200 lines). */
  otherOutput(): string;
  exit: Promise<ExitStatus>;
  running(): boolean;
  /** Resolves with the first log line (already seen or still to come) that `match` accepts. */
  waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Sends a signal (SIGKILL: kill -9) without waiting. */
  kill(signal: NodeJS.Signals): void;
  /** SIGTERM, then waits for the exit (SIGKILL after 60 s). */
  stop(): Promise<ExitStatus>;
}

const spawned = new Set<SynctideProcess>();

/** The node arguments of `npm run <script>` (e.g. `--import tsx workers/main.ts`). */
function scriptArgs(script: Script): string[] {
  const parts = SCRIPTS[script]!.trim().split(/\s+/);
  if (parts[0] !== 'node') throw new Error(`npm run ${script} is not a plain node command: ${SCRIPTS[script]}`);
  return parts.slice(1);
}

/** The npm scripts a test may start: `npm run worker`, `npm run api`, `npm start`. */
export type Script = 'worker' | 'api' | 'start';

/**
 * How a process says it is ready: the message of a log line, or for `npm start` the banner it
 * prints once its API listens (the API's URL is read from it).
 */
const READY: Record<Script, string> = { worker: 'worker started', api: 'api listening', start: 'Synctide is running.' };

/**
 * Starts `npm run <script>` with `env` on top of this process's environment and resolves once it
 * logs that it is ready (the worker: polling, reconcile tick ensured, metrics served; the API:
 * listening). Throws with its output if it exits first.
 */
export async function startSynctide(
  script: Script,
  env: Record<string, string>,
  opts: { name?: string; readyTimeoutMs?: number; command?: ContainerCommand } = {},
): Promise<SynctideProcess> {
  const name = opts.name ?? script;
  const child: ChildProcess = opts.command
    ? spawnContainerCommand(opts.command, { ...process.env, LOG_LEVEL: 'info', ...env })
    : spawn(process.execPath, scriptArgs(script), {
        cwd: ROOT,
        env: { ...process.env, LOG_LEVEL: 'info', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
  // The process a signal goes to: the command itself (PID 1 of its namespace, when it has one).
  let target = child.pid ?? -1;
  const lines: LogLines = [];
  const other: string[] = [];
  // SYNCTIDE_TEST_LOG_DIR keeps every line each process printed, for reading after a failed run.
  const logDir = process.env.SYNCTIDE_TEST_LOG_DIR;
  if (logDir) mkdirSync(logDir, { recursive: true });
  const logFile = logDir ? `${logDir}/${name}-${child.pid}.log` : null;
  const waiters = new Set<() => void>();
  const take = (text: string) => {
    if (logFile) appendFileSync(logFile, `${text}\n`);
    if (text.startsWith('{')) {
      try {
        lines.push(JSON.parse(text) as Record<string, unknown>);
        for (const wake of waiters) wake();
        return;
      } catch {
        // not a log line after all
      }
    }
    other.push(text);
    if (other.length > 200) other.shift();
    for (const wake of waiters) wake();
  };
  for (const stream of [child.stdout!, child.stderr!]) {
    let partial = '';
    stream.on('data', (chunk: Buffer) => {
      const parts = (partial + chunk.toString('utf8')).split('\n');
      partial = parts.pop()!;
      for (const part of parts) if (part.trim()) take(part);
    });
  }
  let ended: ExitStatus | null = null;
  const exit = new Promise<ExitStatus>((resolve) =>
    child.once('exit', (code, signal) => {
      ended = { code, signal };
      for (const wake of waiters) wake();
      resolve(ended);
    }),
  );

  const proc: SynctideProcess = {
    name,
    pid: target,
    lines,
    otherOutput: () => other.join('\n'),
    exit,
    running: () => ended === null,
    waitForLog(match, timeoutMs = 120_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${name}: no matching log line within ${timeoutMs} ms\n${describeOutput(proc)}`));
        }, timeoutMs);
        const check = () => {
          const found = lines.find(match);
          if (found || ended) {
            waiters.delete(check);
            clearTimeout(timer);
            if (found) resolve(found);
            else reject(new Error(`${name} exited (${JSON.stringify(ended)}) before the expected log line\n${describeOutput(proc)}`));
          }
        };
        waiters.add(check);
        check();
      });
    },
    kill(signal) {
      if (ended === null) signalPid(target, signal);
    },
    async stop() {
      if (ended !== null) return ended;
      signalPid(target, 'SIGTERM');
      const timer = setTimeout(() => signalPid(target, 'SIGKILL'), 60_000);
      const status = await exit;
      clearTimeout(timer);
      return status;
    },
  };
  spawned.add(proc);
  void exit.then(() => spawned.delete(proc));
  if (opts.command?.pidNamespace) proc.pid = target = await namespaceInit(child);

  if (script === 'start') {
    proc.url = await startBanner(proc, waiters, opts.readyTimeoutMs ?? 180_000);
    return proc;
  }
  const ready = await proc.waitForLog((l) => l.msg === READY[script], opts.readyTimeoutMs ?? 180_000);
  if (script === 'api') proc.url = String(ready.url);
  return proc;
}

/** Waits for `npm start`'s banner (a plain text line, not a log line) and resolves with the API's URL it names. */
function startBanner(proc: SynctideProcess, waiters: Set<() => void>, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      waiters.delete(check);
      reject(new Error(`${proc.name}: no "${READY.start}" within ${timeoutMs} ms\n${describeOutput(proc)}`));
    }, timeoutMs);
    const check = () => {
      const output = proc.otherOutput();
      const url = output.includes(READY.start) ? /^\s*API\s+(http\S+)/m.exec(output)?.[1] : undefined;
      if (url || !proc.running()) {
        waiters.delete(check);
        clearTimeout(timer);
        if (url) resolve(url);
        else reject(new Error(`${proc.name} exited before it was running\n${describeOutput(proc)}`));
      }
    };
    waiters.add(check);
    check();
  });
}

/**
 * A process started as a container runtime starts its command: `argv` (exec form, `node` found on
 * PATH as in the image) in `cwd`; with `pidNamespace`, as PID 1 of a PID namespace of its own
 * (`unshare --pid --fork --mount-proc`, root only), where the kernel kills every other process of
 * the namespace when PID 1 exits, as in a container.
 */
export interface ContainerCommand {
  argv: string[];
  cwd: string;
  pidNamespace?: boolean;
}

function spawnContainerCommand(command: ContainerCommand, env: NodeJS.ProcessEnv): ChildProcess {
  const [file, ...args] = command.pidNamespace
    ? ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child', ...command.argv]
    : command.argv;
  return spawn(file!, args, { cwd: command.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The host pid of the namespace's PID 1: the one child `unshare --fork` started. */
async function namespaceInit(unshare: ChildProcess): Promise<number> {
  for (let i = 0; i < 200; i++) {
    try {
      const children = readFileSync(`/proc/${unshare.pid}/task/${unshare.pid}/children`, 'utf8').trim();
      if (children) return Number(children.split(/\s+/)[0]);
    } catch {
      // not started yet, or already gone
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`unshare (pid ${unshare.pid}) started no child`);
}

function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function describeOutput(proc: SynctideProcess): string {
  const tail = proc.lines.slice(-30).map((l) => JSON.stringify(l));
  return [...tail, proc.otherOutput()].join('\n');
}

/** What a worker or API of a fault test needs: its servers, task queue and ports. */
export interface ServerEnv {
  databaseUrl: string;
  temporalAddress: string;
  taskQueue: string;
}

/** The variables that point a process at `servers`. */
function serverVars(servers: ServerEnv): Record<string, string> {
  return {
    DATABASE_URL: servers.databaseUrl, TEMPORAL_ADDRESS: servers.temporalAddress, TEMPORAL_TASK_QUEUE: servers.taskQueue,
    // DEMO_CONNECTOR: the fault tests sync demo connections, a provider production leaves off.
    DEMO_CONNECTOR: 'true',
    // The same key as the in-process test workers and APIs, so either side opens what the other sealed.
    CREDENTIALS_KEY: TEST_CREDENTIALS_KEY,
  };
}

/** Environment of an `npm run worker` on `servers`, with a free metrics port. */
export async function workerEnv(servers: ServerEnv, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return {
    ...serverVars(servers),
    WORKER_METRICS_PORT: String(await freePort()),
    WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'),
    ...extra,
  };
}

/** Environment of an `npm run api` on `servers`, with a free port and TEST_ADMIN_KEY. */
export async function apiEnv(servers: ServerEnv, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return {
    ...serverVars(servers),
    API_PORT: String(await freePort()),
    ADMIN_API_KEY: TEST_ADMIN_KEY,
    // Fault tests poll hard with the admin key: the per-key limit is not what they probe.
    API_RATE_LIMIT_PER_SECOND: '100000',
    API_RATE_LIMIT_BURST: '100000',
    ...extra,
  };
}

/**
 * Environment of an `npm start` on `servers` (so it spawns no Postgres and no Temporal dev server
 * of its own): an API's, with the prebuilt workflow bundle and no demo connection.
 */
export async function startEnv(servers: ServerEnv, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return apiEnv(servers, { WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'), START_DEMO: 'false', ...extra });
}

/** Stops (SIGTERM, then SIGKILL after 60 s) every process started here that still runs; for afterAll. */
export async function stopAllSynctide(): Promise<void> {
  await Promise.all([...spawned].map((proc) => proc.stop()));
}

/** An HTTP answer of the API, its body parsed when it is JSON. */
export interface ApiAnswer<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** Calls an API process with the admin key. */
export async function callApi<T = any>(api: { url?: string }, method: string, path: string, body?: unknown): Promise<ApiAnswer<T>> {
  const headers: Record<string, string> = { authorization: `Bearer ${TEST_ADMIN_KEY}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${api.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed as T, headers: res.headers };
}

/**
 * `POST /connections` of a demo connection (tenant `acme`, an hour between scheduled runs) through
 * `api`; returns its id. Its connection workflow starts and runs the first sync at once.
 */
export async function createDemoConnection(api: { url?: string }, appKey: string, config: Record<string, unknown>): Promise<string> {
  const res = await callApi(api, 'POST', '/connections', {
    tenant_id: 'acme', app_key: appKey, provider: 'demo', config, schedule: { interval_seconds: 3600 },
  });
  if (res.status !== 201) throw new Error(`POST /connections answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.id;
}
