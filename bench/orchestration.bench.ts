// Small-job throughput end to end vs the orchestration floor, on the same dev server, Postgres and
// process in the same run. Jobs: BENCH_JOBS (default 200) sync jobs of demo connections with one
// resource and one record, each run by the real `syncJobWorkflow` on the real Synctide worker
// (claim → prepare → task → breaker reset → finish, every step a Postgres transaction). Floor: the
// same number of bare workflows (bench/floor-workflows.ts, bundled separately) each running as
// many no-op activities as one job ran (counted from a job's history). Both are started at once
// (50 start calls in flight) and timed until the last result; two alternating rounds.
import pMap from 'p-map';
import { bundleWorkflows } from '../infra/workflow-bundle';
import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobResult } from '../temporal/sync-job';
import type { FloorActivities } from './floor-workflows';
import {
  benchFile,
  type BenchStack,
  cpuMeter,
  formatCpu,
  historyBreakdown,
  type HistoryBreakdown,
  meanBreakdown,
  msSince,
  percentile,
  profileStatements,
  runBench,
  runWorker,
  startSynctideWorker,
  table,
} from './stack';

const JOBS = Number(process.env.BENCH_JOBS ?? 200);
const JOBS_QUEUE = 'bench-jobs';
const FLOOR_QUEUE = 'bench-floor';
const START_CONCURRENCY = 50;

type JobWorkflow = (input: { jobId: string; connectionId: string }) => Promise<SyncJobResult>;

await runBench('orchestration', `${JOBS} jobs (1 resource, 1 record each) vs ${JOBS} bare workflows`, main);

async function main(stack: BenchStack) {
  const synctide = await startSynctideWorker(stack, { taskQueue: JOBS_QUEUE });
  const floorActivities: FloorActivities = { noop: async () => undefined };
  const floorWorker = runWorker(
    await Worker.create({
      connection: stack.nativeConnection,
      namespace: 'default',
      taskQueue: FLOOR_QUEUE,
      workflowBundle: await bundleWorkflows(benchFile('floor-workflows.ts')),
      activities: floorActivities,
    }),
  );
  try {
    const { rows } = await stack.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
       select 'bench', 'demo', 'orch-' || i, $1, '{"sync": {"interval_seconds": 3600}}'
         from generate_series(1, $2) as i returning id`,
      [{ resource_types: ['items'], records_per_resource: 1, page_size: 1, latency_ms: 0 }, JOBS],
    );
    const connections = rows.map((r) => r.id);

    /** Inserts one queued full job per connection (not timed: in production the enqueue is the connection workflow's step). */
    const queueJobs = async (ids: string[]) => {
      const jobs = ids.map((connectionId) => ({ jobId: randomUUID(), connectionId }));
      await stack.pool.query(
        `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, workflow_id)
         select j.id, j.connection_id, 'bench', 'full', 'manual', 'sync-job:' || j.id
           from unnest($1::uuid[], $2::uuid[]) as j(id, connection_id)`,
        [jobs.map((j) => j.jobId), jobs.map((j) => j.connectionId)],
      );
      return jobs;
    };

    /** Starts every job at once and waits for all; returns wall ms and per-job latencies. */
    const runJobs = async (ids: string[]) => startJobs(await queueJobs(ids));
    const startJobs = async (jobs: { jobId: string; connectionId: string }[]) => {
      const t0 = process.hrtime.bigint();
      const handles = await pMap(jobs, async (job) => ({
        started: process.hrtime.bigint(),
        handle: await stack.client.workflow.start<JobWorkflow>('syncJobWorkflow', {
          taskQueue: JOBS_QUEUE,
          workflowId: syncJobWorkflowId(job.jobId),
          args: [job],
        }),
      }), { concurrency: START_CONCURRENCY });
      const latencies = await Promise.all(
        handles.map(async ({ started, handle }) => {
          const result = await handle.result();
          if (result.status !== 'completed') throw new Error(`job ${result.jobId} ended ${result.status}: ${result.error}`);
          return msSince(started);
        }),
      );
      return { wallMs: msSince(t0), latencies, workflowIds: handles.map((h) => h.handle.workflowId) };
    };

    const runFloor = async (count: number, activities: number) => {
      const t0 = process.hrtime.bigint();
      const handles = await pMap(Array.from({ length: count }, (_, i) => i), async () => ({
        started: process.hrtime.bigint(),
        handle: await stack.client.workflow.start('floorWorkflow', {
          taskQueue: FLOOR_QUEUE,
          workflowId: `floor-${randomUUID()}`,
          args: [activities],
        }),
      }), { concurrency: START_CONCURRENCY });
      const latencies = await Promise.all(
        handles.map(async ({ started, handle }) => {
          await handle.result();
          return msSince(started);
        }),
      );
      return { wallMs: msSince(t0), latencies, workflowIds: handles.map((h) => h.handle.workflowId) };
    };

    // Warm-up (JIT, sticky caches, pools), and how many activities one job runs.
    const warm = await runJobs(connections.slice(0, 50));
    const perJob = meanBreakdown(await Promise.all(warm.workflowIds.map((id) => historyBreakdown(stack.client, id))));
    const activities = Math.round(perJob.activities);
    await runFloor(50, activities);
    console.log(`one sync job ran ${activities} activities (from its history); each floor workflow runs ${activities} no-op activities`);
    console.log('');

    // Timed rounds, alternating.
    type Round = { kind: 'jobs' | 'floor'; round: number; wallMs: number; latencies: number[]; cpu: string; ids: string[] };
    const rounds: Round[] = [];
    for (let round = 1; round <= 2; round++) {
      let meter = cpuMeter(stack);
      const jobs = await runJobs(connections);
      rounds.push({ kind: 'jobs', round, ...jobs, cpu: formatCpu(meter.read()), ids: jobs.workflowIds });
      meter = cpuMeter(stack);
      const floor = await runFloor(JOBS, activities);
      rounds.push({ kind: 'floor', round, ...floor, cpu: formatCpu(meter.read()), ids: floor.workflowIds });
    }
    const rate = (r: Round) => (JOBS / r.wallMs) * 1000;
    table(
      ['round', 'workflows', 'wall s', 'per s', 'latency p50 ms', 'p99 ms'],
      rounds.map((r) => {
        const sorted = [...r.latencies].sort((a, b) => a - b);
        return [`${r.kind} ${r.round}`, JOBS, (r.wallMs / 1000).toFixed(2), rate(r).toFixed(1), percentile(sorted, 50).toFixed(0), percentile(sorted, 99).toFixed(0)];
      }),
    );
    const mean = (kind: Round['kind']) => {
      const rs = rounds.filter((r) => r.kind === kind);
      return rs.reduce((s, r) => s + rate(r), 0) / rs.length;
    };
    const jobsPerS = mean('jobs');
    const floorPerS = mean('floor');
    console.log('');
    console.log(`jobs/s ${jobsPerS.toFixed(1)}   floor/s ${floorPerS.toFixed(1)}   ratio ${(jobsPerS / floorPerS).toFixed(2)}× (aim ≥ 0.9×)`);
    console.log('');
    for (const r of rounds) console.log(`${r.kind} ${r.round}: ${r.cpu}`);
    console.log('');

    // Where the time goes: each workflow's history (last round of each), averaged.
    const last = (kind: Round['kind']) => rounds.filter((r) => r.kind === kind).at(-1)!;
    const jobsB = meanBreakdown(await pMap(last('jobs').ids, (id) => historyBreakdown(stack.client, id), { concurrency: 20 }));
    const floorB = meanBreakdown(await pMap(last('floor').ids, (id) => historyBreakdown(stack.client, id), { concurrency: 20 }));
    const row = (name: string, b: HistoryBreakdown) => [
      name, b.total.toFixed(0), b.activities.toFixed(1), b.activityExec.toFixed(0), b.activityQueue.toFixed(0),
      b.workflowTasks.toFixed(1), b.wftExec.toFixed(0), b.wftQueue.toFixed(0),
    ];
    console.log(`mean per workflow at ${JOBS} concurrent (ms, from histories):`);
    table(
      ['', 'total', 'activities', 'act exec', 'act queue', 'WFTs', 'WFT exec', 'WFT queue'],
      [row('job', jobsB), row('floor', floorB)],
    );
    console.log('');

    // One at a time: the per-job cost with no queueing, and the Postgres statements of those jobs
    // (client-side time; the profiler only runs here, never during the timed rounds above).
    const seqJobs: number[] = [];
    const seqFloor: number[] = [];
    const seqJobB: HistoryBreakdown[] = [];
    const seqFloorB: HistoryBreakdown[] = [];
    const SEQ = 20;
    const seqQueued = await queueJobs(connections.slice(0, SEQ));
    const profile = profileStatements();
    for (let i = 0; i < SEQ; i++) {
      const r = await startJobs([seqQueued[i]!]);
      seqJobs.push(r.wallMs);
      seqJobB.push(await historyBreakdown(stack.client, r.workflowIds[0]!));
      const f = await runFloor(1, activities);
      seqFloor.push(f.wallMs);
      seqFloorB.push(await historyBreakdown(stack.client, f.workflowIds[0]!));
    }
    profile.stop();
    const med = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
    console.log(`one at a time (${SEQ} each): median start → result: job ${med(seqJobs).toFixed(1)} ms, floor ${med(seqFloor).toFixed(1)} ms; mean per workflow (ms, from histories):`);
    table(
      ['', 'total', 'activities', 'act exec', 'act queue', 'WFTs', 'WFT exec', 'WFT queue'],
      [row('job', meanBreakdown(seqJobB)), row('floor', meanBreakdown(seqFloorB))],
    );
    console.log('');
    const statements = profile.rows().filter(([k]) => !k.startsWith('show '));
    const totalMs = statements.reduce((s, [, , ms]) => s + ms, 0);
    console.log(`Postgres statements per job, one at a time (${(totalMs / SEQ).toFixed(1)} ms per job in all; client-side time):`);
    table(
      ['statement', 'per job', 'ms per job'],
      statements.slice(0, 12).map(([k, calls, ms]) => [k, (calls / SEQ).toFixed(1), (ms / SEQ).toFixed(2)]),
    );
  } finally {
    await floorWorker.stop();
    await synctide.stop();
  }
}
