// What a process's shutdown leaves to the clients and children of the process: requests in flight
// get their answers, and nothing it started outlives it.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Hono } from 'hono';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../infra/embedded-postgres';
import { startDevServer } from '../infra/temporal-dev-server';
import { listen } from '../lib/http';
import { freePort } from '../lib/ports';
import { createEmptyDatabase, dropDatabase } from './helpers/database';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

let scratch: string;
beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-lifecycle-'));
  // Reachable by the `postgres` user the embedded server runs as under root.
  await fs.chmod(scratch, 0o755);
});
afterAll(async () => {
  await fs.rm(scratch, { recursive: true, force: true });
});

/** Whether process `pid` still runs (a zombie does not count). */
function alive(pid: number): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
    return state !== undefined && state !== 'Z';
  } catch {
    return false;
  }
}

/** A `temporal` CLI whose dev server never answers (a first start, a slow disk): it writes its pid to `pidFile` and stays up. */
async function silentTemporalCli(dir: string, pidFile: string): Promise<string> {
  const cli = path.join(dir, 'temporal');
  await fs.writeFile(cli, `#!/bin/sh\necho $$ > "${pidFile}"\nexec sleep 600\n`, { mode: 0o755 });
  return cli;
}

describe('the API server stopped at shutdown', () => {
  /** An app whose `POST /work` answers once `finish` is called; `entered` resolves when it is under way. */
  function slowApp() {
    let enter!: () => void;
    const entered = new Promise<void>((resolve) => (enter = resolve));
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const app = new Hono();
    // A command under way: its row written, its workflow being signalled.
    app.post('/work', async (c) => {
      enter();
      await finished;
      return c.json({ done: true }, 201);
    });
    return { app, entered, finish };
  }

  const post = (url: string) =>
    fetch(`${url}/work`, { method: 'POST' }).then(
      async (res) => ({ status: res.status, connection: res.headers.get('connection'), body: await res.json() }),
      (err: Error) => ({ status: 0, connection: null, body: String((err.cause as Error | undefined)?.message ?? err.message) }),
    );

  it('lets a request in flight get its answer before the server closes (the `http` shutdown step of npm run api)', async () => {
    const { app, entered, finish } = slowApp();
    const server = await listen(app, '127.0.0.1', 0);
    const answer = post(server.url);
    await entered;
    // SIGTERM: shutdown runs the `http` step (server.close()) while the request is in flight.
    const closed = server.close();
    finish();
    await closed;
    // The answer ends its keep-alive connection: the close does not wait for the client to drop it.
    expect(await answer).toEqual({ status: 201, connection: 'close', body: { done: true } });
  });

  it('cuts a request that is still unanswered at the end of the grace, so the shutdown goes on', async () => {
    const { app, entered, finish } = slowApp();
    const server = await listen(app, '127.0.0.1', 0);
    const answer = post(server.url);
    await entered;
    await server.close(50);
    expect(await answer).toMatchObject({ status: 0 });
    finish();
  });
});

describe('npm start stopped while it boots', () => {
  let dbUrl: string | undefined;
  let serverPid: number | undefined;
  afterAll(async () => {
    // Only the fake server this test started, by its id.
    if (serverPid && alive(serverPid)) process.kill(serverPid, 'SIGKILL');
    if (dbUrl) await dropDatabase(dbUrl);
  });

  it('stops the Temporal dev server it spawned when SIGTERM arrives before that server answers', async () => {
    const dir = await fs.mkdtemp(path.join(scratch, 'start-'));
    const pidFile = path.join(dir, 'server.pid');
    const cli = await silentTemporalCli(dir, pidFile);
    dbUrl = await createEmptyDatabase();
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: dbUrl,
        TEMPORAL_ADDRESS: '',
        TEMPORAL_CLI_PATH: cli,
        DATA_DIR: path.join(dir, 'data'),
        API_PORT: String(await freePort()),
        TEMPORAL_DEV_PORT: String(await freePort()),
        TEMPORAL_UI_PORT: String(await freePort()),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

    for (;;) {
      if (existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim()) break;
      if (child.exitCode !== null) throw new Error(`npm start exited early:\n${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    serverPid = Number(readFileSync(pidFile, 'utf8').trim());
    expect(alive(serverPid)).toBe(true);

    // `kill <pid>` of npm start (or npm forwarding SIGTERM to it): only the node process gets it.
    child.kill('SIGTERM');
    expect(await exit, output).toBe(0);
    expect(alive(serverPid), `the dev server ${serverPid} outlived npm start:\n${output}`).toBe(false);
    // A stop is no failed start.
    expect(output).not.toMatch(/start failed/);
  }, 120_000);
});

describe('servers a process starts hand over their stop as soon as they are spawned', () => {
  it('the Temporal dev server: stopped before it answers, its start fails and no process is left', async () => {
    const dir = await fs.mkdtemp(path.join(scratch, 'temporal-'));
    const pidFile = path.join(dir, 'server.pid');
    let stopped: Promise<void> | undefined;
    const starting = startDevServer({
      cliPath: await silentTemporalCli(dir, pidFile),
      port: await freePort(),
      namespace: 'default',
      onSpawn: (stop) => {
        stopped = stop();
      },
    });
    const outcome = await starting.then(() => 'started', (err: Error) => err.message);
    expect(stopped, 'onSpawn is called with the stop').toBeDefined();
    await stopped;
    expect(outcome).toMatch(/temporal dev server exited during start/);
    // The script may not have got as far as writing its pid before the stop: then it never ran on.
    if (existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim()) expect(alive(Number(readFileSync(pidFile, 'utf8').trim()))).toBe(false);
  });

  it('the Temporal dev server: a CLI that cannot be run fails the start naming it', async () => {
    const cliPath = path.join(scratch, 'no-such-temporal');
    const outcome = await startDevServer({ cliPath, port: await freePort(), namespace: 'default' }).then(
      () => 'started',
      (err: Error) => err.message,
    );
    expect(outcome).toMatch(new RegExp(`temporal dev server could not be started \\(${cliPath}\\): .*ENOENT`));
  });

  it('embedded Postgres: stopped before it accepts connections, its start fails and nothing listens on its port', async () => {
    const port = await freePort();
    let stopped: Promise<void> | undefined;
    let started: EmbeddedPostgres | undefined;
    const outcome = await startEmbeddedPostgres({
      dataDir: path.join(scratch, 'pg', 'postgres'),
      port,
      ephemeral: true,
      onSpawn: (stop) => {
        stopped = stop();
      },
    }).then(
      (server) => {
        started = server;
        return 'started';
      },
      (err: Error) => err.message,
    );
    await started?.stop();
    expect(stopped, 'onSpawn is called with the stop').toBeDefined();
    await stopped;
    expect(outcome).toMatch(/embedded Postgres did not start/);
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password: 'x', database: 'postgres' });
    const refused = await client.connect().then(() => null, (err: { code?: string }) => err.code);
    await client.end().catch(() => undefined);
    expect(refused).toBe('ECONNREFUSED');
  }, 120_000);
});
