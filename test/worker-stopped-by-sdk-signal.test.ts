// The Temporal SDK's runtime stops every worker of the process on SIGQUIT and SIGUSR2 too (its
// default shutdown signals), not only on SIGINT and SIGTERM, which the process's own shutdown
// handles. A worker process whose workers stopped that way used to stay up for good: /healthz
// answered 200 (so no liveness probe or restart policy replaced it) while nothing polled any task
// queue. Once its workers stop, the process now shuts down and exits like on SIGTERM.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { freePort } from '../lib/ports';
import { TEST_CREDENTIALS_KEY } from './helpers/deps';
import { useServers } from './helpers/stack';
import { eventually } from './helpers/worker';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('a worker whose workers the SDK stopped', () => {
  const servers = useServers();

  it.each(['SIGQUIT', 'SIGUSR2'] as const)('does not stay up without polling after %s: it drains and exits 0', async (signal) => {
    const { env, db } = servers;
    const metricsPort = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        TEMPORAL_ADDRESS: env.address,
        TEMPORAL_TASK_QUEUE: `sdk-signal-${signal.toLowerCase()}`,
        WORKER_METRICS_PORT: String(metricsPort),
        WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'),
        SCHEDULER_TICK_SECONDS: '3600',
        CREDENTIALS_KEY: TEST_CREDENTIALS_KEY,
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exit = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    try {
      const readyz = async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => null))?.status;
      await eventually(async () => {
        if (child.exitCode !== null) throw new Error(`worker exited early:\n${output}`);
        return (await readyz()) === 200 ? true : undefined;
      }, { timeoutMs: 120_000 });

      child.kill(signal);
      // Its workers stop (readiness 503)...
      await eventually(async () => (child.exitCode !== null || (await readyz()) === 503 ? true : undefined), { timeoutMs: 60_000 });
      // ...and the process does not linger alive: it exits once the drain is done.
      const code = await Promise.race([exit, new Promise<string>((resolve) => setTimeout(() => resolve('still running 60 s after its workers stopped'), 60_000))]);
      expect(code).toBe(0);
      const logs = output
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(logs.at(-1)).toMatchObject({ event: 'shutdown', msg: 'shutdown complete', exitCode: 0 });
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 300_000);
});
