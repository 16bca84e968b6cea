// The API's `/readyz` answers 503 from the start of its shutdown, on every connection the process
// still serves (the listener itself closes at SIGTERM): a probe answered during the drain takes
// the process out of its balancer while requests in flight finish, never a 200 from a process that
// is going away. Its body says why (`reason: "stopping"`) beside the last checks, with
// `Retry-After`. The same rule in `npm run api` and in `npm start`, which serve the API alike.
import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp } from '../api/app';
import { createSyncMetrics } from '../lib/metrics';
import { TEST_KEYRING } from './helpers/deps';
import { capturingLogger } from './helpers/logs';
import { apiEnv, startEnv, startSynctide, stopAllSynctide, type ExitStatus, type ServerEnv } from './helpers/processes';
import { useServers } from './helpers/stack';
import { eventually } from './helpers/worker';

afterAll(async () => {
  await stopAllSynctide();
});

const servers = useServers();

/** What a /readyz answer shows: its status, Retry-After and body. */
async function readiness(res: Response) {
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Record<string, unknown> };
}

describe('the API app\'s /readyz once its process is stopping', () => {
  it('answers 200 while the process serves on, and 503 `stopping` with Retry-After once its shutdown began', async () => {
    const { env, db } = servers;
    let stopping = false;
    const registry = new Registry();
    const app = createApp({
      pool: db.pool, temporal: env.client, registry, metrics: createSyncMetrics(registry), logger: capturingLogger().logger,
      credentials: TEST_KEYRING, taskQueue: 'readiness-shutdown', adminApiKey: 'f3a9c1e07b5d48e2a6c9f0d1b7e4a352f3a9c1e07b5d48e2',
      maxIntervalSeconds: 86_400, immediateSyncTimeoutMs: 60_000, stopping: () => stopping,
    });
    expect(await readiness(await app.request('/readyz'))).toMatchObject({ status: 200, retryAfter: null, body: { status: 'ok' } });
    stopping = true;
    const answer = await readiness(await app.request('/readyz'));
    expect(answer).toMatchObject({ status: 503, body: { status: 'unavailable', reason: 'stopping', checks: { postgres: 'ok', temporal: 'ok' } } });
    expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
  });
});

const PROCESSES = [
  { script: 'api', env: apiEnv },
  { script: 'start', env: startEnv },
] as const satisfies readonly { script: 'api' | 'start'; env: (servers: ServerEnv, extra: Record<string, string>) => Promise<Record<string, string>> }[];

describe.each(PROCESSES)('/readyz of npm $script at SIGTERM', ({ script, env: envOf }) => {
  // The probe is held in flight by its freshness count for at most that check's 2 s: on a host
  // too loaded for the signal to land within them it answers before the shutdown, and the test is
  // tried again with a new process.
  it('answers a probe still in flight when the shutdown begins with 503 `stopping`, and the process exits 0', { retry: 2, timeout: 120_000 }, async () => {
    const { env, db } = servers;
    const api = await startSynctide(
      script,
      await envOf(
        { databaseUrl: db.url, temporalAddress: env.address, taskQueue: `readiness-shutdown-${script}` },
        // Room within the grace for the probe's checks (2 s each at most) to end.
        { API_SHUTDOWN_GRACE_SECONDS: '8', SCHEDULER_TICK_SECONDS: '3600' },
      ),
    );
    const apiBackends = async () =>
      (await db.pool.query<{ waiting: boolean }>(
        `select wait_event_type = 'Lock' as waiting from pg_stat_activity where datname = current_database() and application_name = 'synctide-api'`,
      )).rows;

    // The connections table is locked: the probe's freshness count waits (until its check's 2 s
    // are over), so the probe is in flight when the signal comes.
    const holder = await db.pool.connect();
    let answer: Promise<Awaited<ReturnType<typeof readiness>> | 'cut'>;
    try {
      await holder.query('begin');
      await holder.query('lock table connections in access exclusive mode');
      answer = fetch(`${api.url}/readyz`).then(readiness, () => 'cut' as const);
      await eventually(async () => ((await apiBackends()).some((b) => b.waiting) ? true : undefined));
      api.kill('SIGTERM');
      await api.waitForLog((l) => l.msg === 'shutting down');
    } finally {
      await holder.query('rollback');
      holder.release();
    }
    const answered = await answer;
    expect(answered).toMatchObject({ status: 503, body: { status: 'unavailable', reason: 'stopping' } });
    expect(Number((answered as Awaited<ReturnType<typeof readiness>>).retryAfter)).toBeGreaterThanOrEqual(1);
    const ended: ExitStatus = await api.exit;
    expect(ended).toEqual({ code: 0, signal: null });
  });
});
