// `POST /sync` latency under concurrent load vs a Hono hello-world route, in the same process and
// run, over real HTTP (node:http via @hono/node-server) on loopback. Each POST /sync hits a
// different demo connection, so every request does the real work: auth, schema validation, the
// connection lookup, the breaker check, the job INSERT guarded by the unique indexes, and the
// Temporal start of its `sync-job:` workflow on the dev server. No worker runs, so the measured
// cost is the API's alone. The answer comes once the job row is committed; the workflow start runs
// just after, off the request path, so "time to running" (request sent → the `sync-job:` workflow's
// start time on the server) is reported beside the answer latency. BENCH_API_REQUESTS (default 400) requests per route, BENCH_API_CONCURRENCY
// (default 16) in flight; two alternating rounds, the second is reported.
import pMap from 'p-map';
import { Hono } from 'hono';
import { listen, type HttpServer } from '../lib/http';
import { syncJobWorkflowId } from '../temporal/ids';
import { BENCH_ADMIN_KEY, benchApp } from './api-app';
import { type BenchStack, msSince, percentile, runBench, table } from './stack';

const REQUESTS = Number(process.env.BENCH_API_REQUESTS ?? 400);
const CONCURRENCY = Number(process.env.BENCH_API_CONCURRENCY ?? 16);

await runBench('api', `${REQUESTS} requests per route, ${CONCURRENCY} in flight`, main);

async function main(stack: BenchStack) {
  const app = benchApp(stack, { taskQueue: 'bench-api-no-worker', immediateSyncTimeoutMs: 60_000 });
  const hello = new Hono().get('/hello', (c) => c.json({ hello: 'world' }));
  const [api, floor] = await Promise.all([listen(app, '127.0.0.1', 0), listen(hello, '127.0.0.1', 0)]);
  try {
    const rows: (string | number)[][] = [];
    for (const round of [1, 2]) {
      // Fresh connections per round: each POST /sync must create a job, not find one.
      const appKeys = await insertConnections(stack, round, REQUESTS);
      const sentAt: number[] = [];
      const jobIds: string[] = [];
      const sync = await load(api, (i) => ({
        path: '/sync',
        init: {
          method: 'POST',
          headers: { authorization: `Bearer ${BENCH_ADMIN_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ app_key: appKeys[i], tenant_id: 'bench', mode: 'incremental' }),
        },
        expect: 202,
        sent: () => (sentAt[i] = Date.now()),
        answered: (body) => (jobIds[i] = (JSON.parse(body) as { job_id: string }).job_id),
      }));
      const toRunning = await timeToRunning(stack, sentAt, jobIds);
      const helloWorld = await load(floor, () => ({ path: '/hello', init: { method: 'GET' }, expect: 200 }));
      // What the one Temporal call of a POST /sync costs on its own (same concurrency, no HTTP).
      const starts = await timed(async (i) => {
        await stack.client.workflow.start('syncJobWorkflow', {
          workflowId: `bench-start-r${round}-${i}`,
          taskQueue: 'bench-api-no-worker',
          args: [{ jobId: '00000000-0000-0000-0000-000000000000', connectionId: '00000000-0000-0000-0000-000000000000' }],
        });
      });
      if (round === 2) {
        rows.push(
          ['POST /sync (answer)', ...figures(sync)],
          ['POST /sync → workflow running', '', ...spread(toRunning)],
          ['GET /hello (floor)', ...figures(helloWorld)],
          ['workflow start alone', ...figures(starts)],
        );
        const ratio = percentile(sync.latencies, 99) / percentile(helloWorld.latencies, 99);
        table(['route', 'req/s', 'p50 ms', 'p99 ms', 'max ms'], rows);
        console.log(`\np99 ratio POST /sync / hello-world: ${ratio.toFixed(1)}× (aim ≤ 3×)`);
        const jobs = await stack.pool.query<{ n: number }>(`select count(*)::int as n from sync_jobs where trigger = 'api'`);
        console.log(`jobs inserted: ${jobs.rows[0]!.n} (expected ${2 * REQUESTS})`);
      }
    }
  } finally {
    await Promise.all([api.close(), floor.close()]);
  }
}

async function insertConnections(stack: BenchStack, round: number, n: number): Promise<string[]> {
  const keys = Array.from({ length: n }, (_, i) => `bench-r${round}-${i}`);
  await stack.pool.query(
    `insert into connections (tenant_id, provider_slug, app_key, config)
     select 'bench', 'demo', k, '{"records_per_resource": 1}'::jsonb from unnest($1::text[]) as k`,
    [keys],
  );
  return keys;
}

interface LoadResult {
  latencies: number[];
  wallMs: number;
}

/** Runs `op` REQUESTS times, CONCURRENCY at once, and keeps each one's latency. */
async function timed(op: (i: number) => Promise<void>): Promise<LoadResult> {
  const started = process.hrtime.bigint();
  const requests = Array.from({ length: REQUESTS }, (_, i) => i);
  const latencies = await pMap(requests, async (i) => {
    const t = process.hrtime.bigint();
    await op(i);
    return msSince(t);
  }, { concurrency: CONCURRENCY });
  return { latencies: latencies.sort((a, b) => a - b), wallMs: msSince(started) };
}

interface LoadRequest {
  path: string;
  init: RequestInit;
  expect: number;
  sent?: () => void;
  answered?: (body: string) => void;
}

function load(server: HttpServer, request: (i: number) => LoadRequest): Promise<LoadResult> {
  return timed(async (i) => {
    const { path, init, expect, sent, answered } = request(i);
    sent?.();
    const res = await fetch(`${server.url}${path}`, init);
    const body = await res.text();
    if (res.status !== expect) throw new Error(`${path} answered ${res.status}, expected ${expect}`);
    answered?.(body);
  });
}

/**
 * Time to running: from the request's send to its job workflow's start time on the server (both
 * clocks are this host's). Waits for the background starts, then describes each workflow once.
 */
async function timeToRunning(stack: BenchStack, sentAt: number[], jobIds: string[]): Promise<number[]> {
  const ms = await pMap(jobIds, async (jobId, i) => {
    for (let tries = 0; ; tries++) {
      try {
        const d = await stack.client.workflow.getHandle(syncJobWorkflowId(jobId)).describe();
        return d.startTime.getTime() - sentAt[i]!;
      } catch (err) {
        if (tries >= 50) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }, { concurrency: 8 });
  return ms.sort((a, b) => a - b);
}

function spread(sorted: number[]): string[] {
  return [percentile(sorted, 50).toFixed(1), percentile(sorted, 99).toFixed(1), sorted[sorted.length - 1]!.toFixed(1)];
}

function figures(r: LoadResult): (string | number)[] {
  return [
    Math.round((REQUESTS / r.wallMs) * 1000),
    percentile(r.latencies, 50).toFixed(1),
    percentile(r.latencies, 99).toFixed(1),
    r.latencies[r.latencies.length - 1]!.toFixed(1),
  ];
}
