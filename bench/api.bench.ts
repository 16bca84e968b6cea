// `POST /sync` under concurrent load vs two floors, in the same process and run, over real HTTP
// (node:http via @hono/node-server) on loopback. The API runs as api/main.ts runs it: background
// workflow starts (the answer comes once the job row is committed; the `sync-job:` workflow is
// started just after, off the request path) and a per-key rate bucket (its limit high enough never
// to refuse). Each POST /sync hits a different demo connection, so every request does the real
// work: auth, rate bucket, zod validation, the connection lookup with its purge and breaker checks,
// the job INSERT guarded by the unique indexes and the purge lock, the audit row, and the Temporal
// start of its `sync-job:` workflow on the dev server. No worker runs, so the measured cost is the
// API's alone.
//
// The floors: `POST /floor`, a bare Hono route on the same pg pool doing exactly the one INSERT a
// sync request needs (a queued `api` job of another fresh bench connection, through the same
// db/models/jobs.ts insertJob) and answering 202 with a small JSON; and `GET /hello`, a Hono
// hello-world. Aims, against the INSERT floor: throughput ≥ 0.5× and p99 ≤ 2×. "Time to running"
// (request sent → the `sync-job:` workflow's start time on the server) is reported beside the
// answer latency, and the CPU each phase used per request (this process: HTTP client and server
// alike; Postgres; the dev server). BENCH_API_REQUESTS (default 400) requests per route,
// BENCH_API_CONCURRENCY (default 16) in flight; two rounds of the same order (sync, INSERT floor,
// hello-world, workflow starts alone), the first a warm-up, the second reported.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import pMap from 'p-map';
import { Hono } from 'hono';
import { insertJob } from '../db/models/jobs';
import { BackgroundStarts } from '../lib/background-starts';
import { listen, type HttpServer } from '../lib/http';
import { syncJobWorkflowId } from '../temporal/ids';
import { BENCH_ADMIN_KEY, benchApp } from './api-app';
import { type BenchStack, type CpuReading, cpuMeter, msSince, percentile, profileStatements, runBench, table } from './stack';

const REQUESTS = Number(process.env.BENCH_API_REQUESTS ?? 400);
const CONCURRENCY = Number(process.env.BENCH_API_CONCURRENCY ?? 16);
/** A file to write a V8 CPU profile of round 2's POST /sync phase to (open it in Chrome DevTools). */
const PROFILE = process.env.BENCH_API_CPU_PROFILE;

await runBench('api', `${REQUESTS} requests per route, ${CONCURRENCY} in flight`, main);

async function main(stack: BenchStack) {
  const background = new BackgroundStarts((err, what) => console.error(`background start failed: ${what}`, err));
  const app = benchApp(stack, {
    taskQueue: 'bench-api-no-worker',
    immediateSyncTimeoutMs: 60_000,
    background,
    // As production runs it (API_RATE_LIMIT_*), with a limit this run never reaches.
    rateLimit: { ratePerSecond: 1_000_000, burst: 1_000_000 },
  });
  const floors = new Hono()
    .get('/hello', (c) => c.json({ hello: 'world' }))
    // The one INSERT a sync request needs, and nothing else: no auth, no lookup, no audit, no start.
    .post('/floor', async (c) => {
      const body = await c.req.json<{ connection_id: string; tenant_id: string }>();
      const id = randomUUID();
      const inserted = await insertJob(stack.pool, {
        id,
        workflowId: syncJobWorkflowId(id),
        connectionId: body.connection_id,
        tenantId: body.tenant_id,
        jobType: 'incremental',
        trigger: 'api',
        scheduledAt: null,
        payload: {},
      });
      if (!inserted) return c.json({ error: 'not inserted' }, 409);
      return c.json({ job_id: id, status: 'queued' }, 202);
    });
  const [api, floor] = await Promise.all([listen(app, '127.0.0.1', 0), listen(floors, '127.0.0.1', 0)]);
  try {
    for (const round of [1, 2]) {
      // Fresh connections per round and per route: each request must create a job, not find one.
      const syncTargets = await insertConnections(stack, `bench-r${round}`, REQUESTS);
      const floorTargets = await insertConnections(stack, `bench-floor-r${round}`, REQUESTS);
      const sentAt: number[] = [];
      const jobIds: string[] = [];
      const profiler = PROFILE && round === 2 ? await startProfiler() : null;
      let meter = cpuMeter(stack);
      const sync = await load(api, (i) => ({
        path: '/sync',
        init: {
          method: 'POST',
          headers: { authorization: `Bearer ${BENCH_ADMIN_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ app_key: syncTargets[i]!.app_key, tenant_id: 'bench', mode: 'incremental' }),
        },
        expect: 202,
        sent: () => (sentAt[i] = Date.now()),
        answered: (body) => (jobIds[i] = (JSON.parse(body) as { job_id: string }).job_id),
      }));
      // The background starts are part of a POST /sync's cost: the CPU reading waits for them.
      await background.drain();
      const syncCpu = meter.read();
      if (profiler) await profiler.stop(PROFILE!);
      const toRunning = await timeToRunning(stack, sentAt, jobIds);
      meter = cpuMeter(stack);
      const insertFloor = await load(floor, (i) => ({
        path: '/floor',
        init: {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ connection_id: floorTargets[i]!.id, tenant_id: 'bench' }),
        },
        expect: 202,
      }));
      const floorCpu = meter.read();
      meter = cpuMeter(stack);
      const helloWorld = await load(floor, () => ({ path: '/hello', init: { method: 'GET' }, expect: 200 }));
      const helloCpu = meter.read();
      // What the one Temporal call of a POST /sync costs on its own (same concurrency, no HTTP).
      meter = cpuMeter(stack);
      const starts = await timed(async (i) => {
        await stack.client.workflow.start('syncJobWorkflow', {
          workflowId: `bench-start-r${round}-${i}`,
          taskQueue: 'bench-api-no-worker',
          args: [{ jobId: '00000000-0000-0000-0000-000000000000', connectionId: '00000000-0000-0000-0000-000000000000' }],
        });
      });
      const startsCpu = meter.read();
      if (round === 2) {
        table(
          ['route', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'CPU ms/req: bench process', 'postgres', 'dev server'],
          [
            ['POST /sync (answer)', ...figures(sync), ...cpuPerRequest(syncCpu)],
            ['POST /sync → workflow running', '', ...spread(toRunning), '', '', ''],
            ['POST /floor (one INSERT, floor)', ...figures(insertFloor), ...cpuPerRequest(floorCpu)],
            ['GET /hello (hello-world)', ...figures(helloWorld), ...cpuPerRequest(helloCpu)],
            ['workflow start alone', ...figures(starts), ...cpuPerRequest(startsCpu)],
          ],
        );
        const throughput = insertFloor.wallMs / sync.wallMs;
        const p99 = percentile(sync.latencies, 99) / percentile(insertFloor.latencies, 99);
        const hello = percentile(sync.latencies, 99) / percentile(helloWorld.latencies, 99);
        console.log(`\nthroughput POST /sync / INSERT floor: ${throughput.toFixed(2)}× (aim ≥ 0.5×): ${throughput >= 0.5 ? 'met' : 'missed'}`);
        console.log(`p99 POST /sync / INSERT floor: ${p99.toFixed(1)}× (aim ≤ 2×): ${p99 <= 2 ? 'met' : 'missed'}`);
        console.log(`p99 POST /sync / hello-world: ${hello.toFixed(1)}×`);
        const jobs = await stack.pool.query<{ sync: number; floor: number }>(
          `select count(*) filter (where c.app_key like 'bench-r%')::int as sync, count(*) filter (where c.app_key like 'bench-floor-%')::int as floor
             from sync_jobs j join connections c on c.id = j.connection_id`,
        );
        console.log(`jobs inserted: POST /sync ${jobs.rows[0]!.sync}, floor ${jobs.rows[0]!.floor} (expected ${2 * REQUESTS} each)`);
      }
    }
    // A separate profiling pass (never during the timed rounds): the Postgres statements one
    // POST /sync makes, each a round trip to the server.
    const profiled = 50;
    const targets = await insertConnections(stack, 'bench-profile', profiled);
    const profile = profileStatements();
    for (const target of targets) {
      const res = await fetch(`${api.url}/sync`, {
        method: 'POST',
        headers: { authorization: `Bearer ${BENCH_ADMIN_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ app_key: target.app_key, tenant_id: 'bench', mode: 'incremental' }),
      });
      await res.text();
    }
    await background.drain();
    profile.stop();
    const statements = profile.rows();
    const perRequest = statements.reduce((n, [, calls]) => n + calls, 0) / profiled;
    console.log(`\nPostgres statements per POST /sync (${profiled} requests one at a time, background start included): ${perRequest.toFixed(1)}`);
    table(['statement', 'per request', 'ms per request'], statements.map(([k, calls, ms]) => [k, (calls / profiled).toFixed(1), (ms / profiled).toFixed(2)]));
  } finally {
    await Promise.all([api.close(), floor.close()]);
  }
}

async function insertConnections(stack: BenchStack, prefix: string, n: number): Promise<{ id: string; app_key: string }[]> {
  const keys = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  const { rows } = await stack.pool.query<{ id: string; app_key: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config)
     select 'bench', 'demo', k, '{"records_per_resource": 1}'::jsonb from unnest($1::text[]) as k
     returning id, app_key`,
    [keys],
  );
  const byKey = new Map(rows.map((r) => [r.app_key, r]));
  return keys.map((k) => byKey.get(k)!);
}

/** The V8 CPU profiler of this process, started; stop() writes the profile to a file. */
async function startProfiler(): Promise<{ stop(file: string): Promise<void> }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  return {
    async stop(file) {
      const { profile } = await session.post('Profiler.stop');
      fs.writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
      console.log(`CPU profile of round 2's POST /sync phase: ${file}`);
    },
  };
}

/** CPU milliseconds per request of a phase: this process, Postgres, the dev server. */
function cpuPerRequest(c: CpuReading): string[] {
  const ms = (s: number | null) => (s === null ? 'n/a' : ((s * 1000) / REQUESTS).toFixed(2));
  return [ms(c.bench), ms(c.postgres), ms(c.temporal)];
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
