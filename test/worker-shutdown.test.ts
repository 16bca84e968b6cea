// Graceful shutdown of `npm run worker`: SIGTERM during a reconcile tick lets the tick finish its
// work, logs the shutdown, starts no further tick and exits 0.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { RECONCILE_WORKFLOW_ID } from '../temporal/ids';
import { freePort } from '../lib/ports';
import { useServers } from './helpers/stack';
import { eventually } from './helpers/worker';
import { TEST_CREDENTIALS_KEY } from './helpers/deps';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CONNECTIONS = 150;

describe('worker shutdown', () => {
  const servers = useServers();

  it('finishes the in-flight tick, logs the shutdown and exits 0 on SIGTERM', async () => {
    const { env, db } = servers;
    const metricsPort = await freePort();
    await db.pool.query(
      `insert into connections (tenant_id, provider_slug, app_key, metadata)
       select 'acme', 'demo', 'c' || i, '{"sync": {"interval_seconds": 3600}}' from generate_series(1, $1) i`,
      [CONNECTIONS],
    );
    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        TEMPORAL_ADDRESS: env.address,
        TEMPORAL_TASK_QUEUE: 'shutdown-test',
        WORKER_METRICS_PORT: String(metricsPort),
        // The workflows bundled once by the global setup, as the image sets it: the worker does not
        // bundle them again at its start (webpack, many seconds of CPU on a loaded machine).
        WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'),
        SCHEDULER_TICK_SECONDS: '3600',
        DEMO_CONNECTOR: 'true',
        CREDENTIALS_KEY: TEST_CREDENTIALS_KEY,
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    // 'close', not 'exit': the exit can be seen before the last lines written to the pipes are read
    // (the shutdown's last line was missing from `output` on a loaded machine).
    const exit = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));

    // The first tick has started once its first connection workflow has enqueued a job.
    await eventually(async () => {
      if (child.exitCode !== null) throw new Error(`worker exited early:\n${output}`);
      const { rows } = await db.pool.query('select count(*)::int as n from sync_jobs');
      return rows[0].n > 0 ? true : undefined;
    }, { timeoutMs: 120_000 });
    // Ready while its workers poll (the Kubernetes readiness probe of the chart).
    const ready = await fetch(`http://127.0.0.1:${metricsPort}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', temporal: 'ok', workers: { worker: 'RUNNING', immediate: 'RUNNING' } });
    child.kill('SIGTERM');
    expect(await exit).toBe(0);

    const logs = output
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const ticks = logs.filter((l) => l.msg === 'reconcile tick');
    expect(ticks).toHaveLength(1);
    expect(ticks[0]).toMatchObject({ ensured: CONNECTIONS });
    const shutdown = logs.filter((l) => l.event === 'shutdown');
    expect(shutdown[0]).toMatchObject({ reason: 'SIGTERM', msg: 'shutting down' });
    expect(shutdown.some((l) => l.component === 'worker' && l.msg === 'stopped')).toBe(true);
    expect(shutdown.at(-1)).toMatchObject({ msg: 'shutdown complete', exitCode: 0 });
    // Shutdown came after the tick's last write: the tick finished inside the grace time.
    expect(logs.indexOf(ticks[0]!)).toBeLessThan(logs.indexOf(shutdown.at(-1)!));

    // Every connection got its workflow from that one tick.
    const ids = new Set<string>();
    await eventually(async () => {
      ids.clear();
      for await (const wf of env.client.workflow.list({ query: `WorkflowType = 'connectionWorkflow' AND TaskQueue = 'shutdown-test'` })) ids.add(wf.workflowId);
      return ids.size === CONNECTIONS ? true : undefined;
    });
    expect(ids.size).toBe(CONNECTIONS);
  }, 180_000);
  it('starts the reconcile tick again, without a restart, when it was terminated', async () => {
    const { env, db } = servers;
    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        TEMPORAL_ADDRESS: env.address,
        TEMPORAL_TASK_QUEUE: 'reconcile-keeper',
        WORKER_METRICS_PORT: String(await freePort()),
        WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'),
        SCHEDULER_TICK_SECONDS: '1',
        DEMO_CONNECTOR: 'true',
        CREDENTIALS_KEY: TEST_CREDENTIALS_KEY,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const handle = env.client.workflow.getHandle(RECONCILE_WORKFLOW_ID);
    const running = async () => {
      if (child.exitCode !== null) throw new Error(`worker exited early:\n${output}`);
      const d = await handle.describe().catch(() => undefined);
      return d?.status.name === 'RUNNING' ? d : undefined;
    };
    try {
      const first = await eventually(running, { timeoutMs: 60_000 });
      await handle.terminate('simulated operator mistake');
      const again = await eventually(async () => {
        const d = await running();
        return d && d.runId !== first.runId ? d : undefined;
      }, { timeoutMs: 30_000 });
      expect({ running: again.status.name, queue: again.taskQueue }).toEqual({ running: 'RUNNING', queue: 'reconcile-keeper' });
    } finally {
      child.kill('SIGTERM');
      await exit;
    }
  }, 120_000);
});
