// A worker's /readyz says whether it can work: its workers running is not enough, its polls must
// reach Temporal. With the Temporal server stopped, the SDK's workers stay RUNNING (their pollers
// retry), so readiness also asks Temporal over the workers' own connection: 503 while that gets
// no answer, 200 again once the server is back; /healthz (liveness) answers throughout, so the
// process is not restarted for an outage it rides out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { startSynctide, stopAllSynctide, workerEnv } from './helpers/processes';
import { startPersistedDevServer, type RestartableServer } from './helpers/servers';
import { eventually } from './helpers/worker';

let db: TestDatabase;
let temporal: RestartableServer & { address: string };
beforeAll(async () => {
  [db, temporal] = await Promise.all([createTestDatabase(), startPersistedDevServer()]);
});
afterAll(async () => {
  await stopAllSynctide();
  await temporal?.remove();
  await db?.drop();
});

/** A GET of the worker's health server: its status and JSON body. */
async function probe(port: string, path: '/readyz' | '/healthz'): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('worker readiness while Temporal is down', () => {
  it('answers 503 while its polls cannot reach Temporal and 200 again once they can, staying alive throughout', async () => {
    const env = await workerEnv({ databaseUrl: db.url, temporalAddress: temporal.address, taskQueue: 'readiness-temporal-down' }, { SCHEDULER_TICK_SECONDS: '3600' });
    const port = env.WORKER_METRICS_PORT!;
    const worker = await startSynctide('worker', env);
    await eventually(async () => ((await probe(port, '/readyz')).status === 200 ? true : undefined));

    await temporal.stop();
    const down = await eventually(
      async () => {
        const answer = await probe(port, '/readyz');
        return answer.status === 503 ? answer : undefined;
      },
      { timeoutMs: 60_000, describe: () => probe(port, '/readyz') },
    );
    expect(down.body).toMatchObject({ status: 'not_ready', temporal: 'unreachable', workers: { worker: 'RUNNING', immediate: 'RUNNING' } });
    expect((await probe(port, '/healthz')).status).toBe(200);
    expect(worker.running()).toBe(true);

    await temporal.start();
    const back = await eventually(
      async () => {
        const answer = await probe(port, '/readyz');
        return answer.status === 200 ? answer : undefined;
      },
      { timeoutMs: 60_000, describe: () => probe(port, '/readyz') },
    );
    expect(back.body).toEqual({ status: 'ready', temporal: 'ok', workers: { worker: 'RUNNING', immediate: 'RUNNING' } });
    expect(worker.running()).toBe(true);
  }, 300_000);
});
