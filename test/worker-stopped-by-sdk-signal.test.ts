// The Temporal SDK's runtime stops every worker of the process on SIGQUIT and SIGUSR2 too (its
// default shutdown signals), not only on SIGINT and SIGTERM, which the process's own shutdown
// handles. A worker process whose workers stopped that way used to stay up for good: /healthz
// answered 200 (so no liveness probe or restart policy replaced it) while nothing polled any task
// queue. Once its workers stop, the process now shuts down and exits like on SIGTERM.
import { describe, expect, it } from 'vitest';
import { startSynctide, workerEnv } from './helpers/processes';
import { useServers } from './helpers/stack';
import { eventually } from './helpers/worker';

describe('a worker whose workers the SDK stopped', () => {
  const servers = useServers();

  it.each(['SIGQUIT', 'SIGUSR2'] as const)('does not stay up without polling after %s: it drains and exits 0', async (signal) => {
    const { env, db } = servers;
    const vars = await workerEnv(
      { databaseUrl: db.url, temporalAddress: env.address, taskQueue: `sdk-signal-${signal.toLowerCase()}` },
      { SCHEDULER_TICK_SECONDS: '3600' },
    );
    const worker = await startSynctide('worker', vars);
    try {
      const readyz = async () => (await fetch(`http://127.0.0.1:${vars.WORKER_METRICS_PORT}/readyz`).catch(() => null))?.status;
      await eventually(async () => ((await readyz()) === 200 ? true : undefined), { timeoutMs: 30_000 });

      worker.kill(signal);
      // Its workers stop (readiness 503)...
      await eventually(async () => (!worker.running() || (await readyz()) === 503 ? true : undefined), { timeoutMs: 60_000 });
      // ...and the process does not linger alive: it exits once the drain is done.
      const ended = await Promise.race([worker.exit, new Promise<string>((resolve) => setTimeout(() => resolve('still running 60 s after its workers stopped'), 60_000))]);
      expect(ended).toEqual({ code: 0, signal: null });
      expect(worker.lines.at(-1)).toMatchObject({ event: 'shutdown', msg: 'shutdown complete', exitCode: 0 });
    } finally {
      if (worker.running()) worker.kill('SIGKILL');
    }
  }, 300_000);
});
