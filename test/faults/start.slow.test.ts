// `npm start` as a newcomer runs it: a real process tree with embedded Postgres and the Temporal
// dev server, checked over HTTP and with the `temporal` CLI, then stopped by a signal.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../lib/ports';
import { SDK_METRICS_READ } from '../../infra/sdk-runtime';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Started {
  child: ChildProcess;
  output: () => string;
  exit: Promise<number | null>;
}

function startStack(env: Record<string, string>): Started {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], {
    cwd: ROOT,
    // The embedded defaults are under test: ignore a DATABASE_URL/TEMPORAL_ADDRESS given to the suite.
    env: { ...process.env, DATABASE_URL: '', TEMPORAL_ADDRESS: '', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exit };
}

async function waitFor(started: Started, text: string): Promise<void> {
  // Bounded by the hook/test timeout; fails early if the process exits first.
  for (;;) {
    if (started.output().includes(text)) return;
    if (started.child.exitCode !== null) throw new Error(`start exited early:\n${started.output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Processes whose command line mentions `dir` (the stack's postgres and temporal children). */
async function processesUsing(dir: string): Promise<string[]> {
  const { stdout } = await run('ps', ['-eo', 'pid=,args=']);
  return stdout.split('\n').filter((line) => line.includes(dir));
}

describe('npm start', () => {
  let dataDir: string;
  let ports: Record<string, string>;
  beforeAll(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-start-'));
    await fs.chmod(dataDir, 0o755);
    ports = {
      API_PORT: String(await freePort()),
      TEMPORAL_DEV_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
      EMBEDDED_PG_PORT: String(await freePort()),
    };
  });
  afterAll(async () => {
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('stops with an error naming API_PORT when it is invalid', async () => {
    const started = startStack({ DATA_DIR: dataDir, API_PORT: 'abc' });
    expect(await started.exit).toBe(1);
    expect(started.output()).toMatch(/API_PORT: must be an integer port number/);
    expect(await processesUsing(dataDir)).toEqual([]);
  });

  it('refuses a short ADMIN_API_KEY naming the variable and its rule, never the value', async () => {
    const value = 'short-secret-x';
    const started = startStack({ DATA_DIR: dataDir, ADMIN_API_KEY: value, DATABASE_URL: 'mysql://synctide:pa55-w0rd-value@127.0.0.1:1/x' });
    expect(await started.exit).toBe(1);
    expect(started.output()).toMatch(/ADMIN_API_KEY: must be at least 32 random characters/);
    expect(started.output()).toMatch(/DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ connection URL \(got "mysql:\/\/synctide:\*\*\*@127\.0\.0\.1:1\/x"\)/);
    expect(started.output()).not.toContain(value);
    expect(started.output()).not.toContain('pa55-w0rd-value');
  });

  it('runs Postgres, Temporal with its UI, the worker and the API, and stops them all on SIGTERM', async () => {
    const env = { DATA_DIR: dataDir, ...ports };
    const first = startStack(env);
    await waitFor(first, 'Synctide is running.');

    const ready = await fetch(`http://127.0.0.1:${ports.API_PORT}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ok', checks: { postgres: 'ok', temporal: 'ok' }, details: { stale_connections: 0 } });
    expect((await fetch(`http://127.0.0.1:${ports.API_PORT}/healthz`)).status).toBe(200);
    // /metrics needs the admin key `npm start` generated into DATA_DIR, as does the credentials key.
    const adminKey = (await fs.readFile(path.join(dataDir, 'admin-api-key'), 'utf8')).trim();
    const auth = { headers: { authorization: `Bearer ${adminKey}` } };
    expect((await fetch(`http://127.0.0.1:${ports.API_PORT}/metrics`)).status).toBe(401);
    const metrics = await fetch(`http://127.0.0.1:${ports.API_PORT}/metrics`, auth);
    expect(await metrics.text()).toContain('process_cpu_user_seconds_total');
    expect((await fs.stat(path.join(dataDir, 'credentials-key'))).mode & 0o777).toBe(0o600);
    expect((await fetch(`http://127.0.0.1:${ports.TEMPORAL_UI_PORT}/`)).status).toBe(200);

    const { stdout } = await run(inject('temporalCliPath'), [
      'operator', 'search-attribute', 'list', '--address', `127.0.0.1:${ports.TEMPORAL_DEV_PORT}`,
    ]);
    for (const name of ['SynctideConnectionId', 'SynctideTenantId', 'SynctideProvider', 'SynctidePhase']) {
      expect(stdout).toContain(name);
    }

    // The demo connection's workflow shows up in Temporal at once, and so does its first cycle's
    // run ending (its job runs inside it) and the next one starting: two runs of `connection:`.
    const address = `127.0.0.1:${ports.TEMPORAL_DEV_PORT}`;
    for (;;) {
      const { stdout: runs } = await run(inject('temporalCliPath'), [
        'workflow', 'list', '--address', address, '--query', `WorkflowType='connectionWorkflow'`,
      ]);
      if ((runs.match(/connection:/g) ?? []).length >= 2) break;
      await new Promise((r) => setTimeout(r, 500));
    }

    // One /metrics for the one process: job-lifecycle metrics, then the Temporal SDK's worker metrics.
    // The SDK reports a latency once a task of its kind ran (the first regular activity is the
    // job's sync task, a moment after its workflow shows): scraped again until each is there, for
    // at most a minute; the assertions below say which one is missing if it never comes.
    const sdkMetric = (name: string) => new RegExp(`^${name}(_bucket)?\\{`, 'm');
    let scrape = '';
    for (let tries = 0; tries < 120; tries++) {
      scrape = await (await fetch(`http://127.0.0.1:${ports.API_PORT}/metrics`, auth)).text();
      if (SDK_METRICS_READ.every((name) => sdkMetric(name).test(scrape))) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(scrape).toMatch(/^sync_jobs_total\{status="queued",provider="demo"[^}]*\} [1-9]/m);
    for (const status of ['queued', 'running', 'retrying']) {
      expect(scrape).toMatch(new RegExp(`^sync_jobs_queue_depth\\{status="${status}"[^}]*\\} \\d+$`, 'm'));
    }
    expect(scrape).toMatch(/^temporal_worker_task_slots_available\{[^}]*task_queue="synctide"[^}]*\} \d+/m);
    expect(scrape).toMatch(/^temporal_workflow_task_execution_latency_count\{/m);
    // Every SDK metric the dashboard and the alert rules read is in a real worker's scrape.
    for (const name of SDK_METRICS_READ) expect(scrape, name).toMatch(sdkMetric(name));

    // Leave a mark in the database to prove that a second start reuses DATA_DIR; its credentials
    // are plaintext, as rows written before encryption are, and the next start seals them.
    // The embedded server wants the superuser's password, kept in DATA_DIR (mode 0600).
    const password = (await fs.readFile(path.join(dataDir, 'postgres-password'), 'utf8')).trim();
    expect((await fs.stat(path.join(dataDir, 'postgres-password'))).mode & 0o777).toBe(0o600);
    const dbUrl = `postgres://postgres:${password}@127.0.0.1:${ports.EMBEDDED_PG_PORT}/synctide`;
    const client = new pg.Client({ connectionString: dbUrl });
    await client.connect();
    await client.query(`insert into connections (tenant_id, provider_slug, app_key, credentials) values ('t', 'demo', 'kept', '{"token": "plain-kept-token"}')`);
    await client.end();

    expect((await processesUsing(dataDir)).length).toBeGreaterThanOrEqual(2);
    first.child.kill('SIGTERM');
    expect(await first.exit).toBe(0);
    expect(await processesUsing(dataDir)).toEqual([]);

    const second = startStack(env);
    await waitFor(second, 'Synctide is running.');
    const again = new pg.Client({ connectionString: dbUrl });
    await again.connect();
    const { rows } = await again.query(`select app_key from connections order by app_key`);
    const { rows: sealed } = await again.query(`select credentials #>> '{}' as stored from connections where app_key = 'kept'`);
    await again.end();
    expect(sealed[0].stored).toMatch(/^enc:v1:default:/);
    expect(sealed[0].stored).not.toContain('plain-kept-token');
    // The demo connection is created only once, in the empty database of the first start.
    expect(rows).toEqual([{ app_key: 'demo' }, { app_key: 'kept' }]);
    second.child.kill('SIGINT');
    expect(await second.exit).toBe(0);
    expect(await processesUsing(dataDir)).toEqual([]);
  }, 240_000);
});
