// Records per second of a full sync through the real job path vs a raw multi-row
// `INSERT … ON CONFLICT` of the same rows into `records`, on the same Postgres in the same run.
// Job: a demo connection of BENCH_RECORDS (default 100,000) records in one resource, page_size
// 1000, latency 0, synced by one `full` job run by the real `syncJobWorkflow` on the real
// Synctide worker (each page: fetched while the one before it is stored, then one statement that
// upserts the records, adds the ids it did not write to `sync_seen` and counts the task's and job's
// progress, its own transaction but for the last page, whose cursor joins it in one; then the
// full-pass deletion). Raw: the same rows
// (generated beforehand, not timed), 1000 per statement, one statement per transaction, on one
// connection. Alternating rounds, each into a fresh connection; then one profiled job run that
// shows where the job's time goes.
import { randomUUID } from 'node:crypto';
import { demoRecords } from '../connectors/demo';
import { getConnector, registerConnector } from '../connectors/registry';
import type { Connector } from '../connectors/types';
import { syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobResult } from '../temporal/sync-job';
import {
  type BenchStack,
  cpuMeter,
  formatCpu,
  historyBreakdown,
  msSince,
  profileStatements,
  runBench,
  startSynctideWorker,
  table,
} from './stack';

const RECORDS = Number(process.env.BENCH_RECORDS ?? 100_000);
const PAGE_SIZE = 1000;
const TASK_QUEUE = 'bench-ingest';
const RESOURCE = 'items';

type JobWorkflow = (input: { jobId: string; connectionId: string }) => Promise<SyncJobResult>;

await runBench('ingest', `${RECORDS.toLocaleString('en')} demo records, page_size ${PAGE_SIZE}, latency 0`, main);

async function main(stack: BenchStack) {
  const worker = await startSynctideWorker(stack, { taskQueue: TASK_QUEUE });
  try {
    const configFor = (records: number) => ({
      resource_types: [RESOURCE],
      records_per_resource: records,
      page_size: PAGE_SIZE,
      latency_ms: 0,
    });
    const newConnection = async (records: number) => {
      const { rows } = await stack.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
         values ('bench', 'demo', $1, $2, '{"sync": {"interval_seconds": 3600}}') returning id`,
        [`ingest-${randomUUID().slice(0, 8)}`, configFor(records)],
      );
      return rows[0]!.id;
    };
    const countRecords = async (connectionId: string) =>
      (await stack.pool.query<{ n: number }>('select count(*)::int as n from records where connection_id = $1', [connectionId])).rows[0]!.n;

    /** One full job of a fresh connection, through the job workflow; seconds from start to result. */
    const jobRun = async (records: number) => {
      const connectionId = await newConnection(records);
      const jobId = randomUUID();
      await stack.pool.query(
        `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, workflow_id)
         values ($1, $2, 'bench', 'full', 'manual', $3)`,
        [jobId, connectionId, syncJobWorkflowId(jobId)],
      );
      const t0 = process.hrtime.bigint();
      const result = await stack.client.workflow.execute<JobWorkflow>('syncJobWorkflow', {
        taskQueue: TASK_QUEUE,
        workflowId: syncJobWorkflowId(jobId),
        args: [{ jobId, connectionId }],
      });
      const seconds = msSince(t0) / 1000;
      if (result.status !== 'completed') throw new Error(`job ended ${result.status}: ${result.error}`);
      const n = await countRecords(connectionId);
      if (n !== records) throw new Error(`job stored ${n} records, expected ${records}`);
      return { seconds, workflowId: syncJobWorkflowId(jobId) };
    };

    // The raw side's rows: exactly what the connector serves (generated here, outside the timing).
    const t = process.hrtime.bigint();
    const allRows = demoRecords(configFor(RECORDS), RESOURCE);
    const generateMs = msSince(t);

    /** The same rows into a fresh connection, 1000 per multi-row INSERT … ON CONFLICT. */
    const rawRun = async (records: number) => {
      const connectionId = await newConnection(records);
      const rows = allRows.slice(0, records);
      const client = await stack.pool.connect();
      try {
        const t0 = process.hrtime.bigint();
        const at = new Date();
        for (let i = 0; i < rows.length; i += PAGE_SIZE) {
          const batch = rows.slice(i, i + PAGE_SIZE);
          const params: unknown[] = [connectionId, RESOURCE, at];
          const values = batch.map((r) => {
            params.push(r.externalId, JSON.stringify(r.data), r.updatedAt);
            const n = params.length;
            return `($1, $2, $${n - 2}, $${n - 1}, $${n}, $3)`;
          });
          await client.query(
            `insert into records (connection_id, resource_type, external_id, data, source_updated_at, synced_at)
             values ${values.join(', ')}
             on conflict (connection_id, resource_type, external_id) do update
                set data = excluded.data, source_updated_at = excluded.source_updated_at, synced_at = excluded.synced_at`,
            params,
          );
        }
        const seconds = msSince(t0) / 1000;
        const n = await countRecords(connectionId);
        if (n !== records) throw new Error(`raw insert stored ${n} records, expected ${records}`);
        return { seconds };
      } finally {
        client.release();
      }
    };

    // Warm-up of both paths (JIT, caches, the worker's sticky cache, the pool).
    const warmRecords = Math.min(RECORDS, 10_000);
    await jobRun(warmRecords);
    await rawRun(warmRecords);

    const results: { kind: 'raw' | 'job'; round: number; seconds: number; cpu: string }[] = [];
    for (let round = 1; round <= 2; round++) {
      let meter = cpuMeter(stack);
      const raw = await rawRun(RECORDS);
      results.push({ kind: 'raw', round, seconds: raw.seconds, cpu: formatCpu(meter.read()) });
      meter = cpuMeter(stack);
      const job = await jobRun(RECORDS);
      results.push({ kind: 'job', round, seconds: job.seconds, cpu: formatCpu(meter.read()) });
    }
    const rate = (seconds: number) => RECORDS / seconds;
    table(
      ['run', 'records', 'seconds', 'records/s'],
      results.map((r) => [`${r.kind} ${r.round}`, RECORDS, r.seconds.toFixed(2), rate(r.seconds).toFixed(0)]),
    );
    const mean = (kind: 'raw' | 'job') => {
      const rs = results.filter((r) => r.kind === kind);
      return rs.reduce((s, r) => s + rate(r.seconds), 0) / rs.length;
    };
    const jobRate = mean('job');
    const rawRate = mean('raw');
    console.log('');
    console.log(`job ${jobRate.toFixed(0)} records/s   raw ${rawRate.toFixed(0)} records/s   ratio ${(jobRate / rawRate).toFixed(2)}× (aim ≥ 0.8×)`);
    console.log('');
    for (const r of results) console.log(`${r.kind} ${r.round}: ${r.cpu}`);
    console.log('');

    // Where a job's time goes: one more job, profiled (Postgres statements and connector time),
    // not part of the figures above.
    let connectorMs = 0;
    let pages = 0;
    // The demo connector registered for the benchmark, restored afterwards.
    const demoConnector = getConnector('demo');
    const timed: Connector = {
      ...demoConnector,
      async fetchPage(input) {
        const start = process.hrtime.bigint();
        try {
          return await demoConnector.fetchPage(input);
        } finally {
          connectorMs += msSince(start);
          pages += 1;
        }
      },
    };
    registerConnector(timed);
    const profile = profileStatements();
    const meter = cpuMeter(stack);
    const profiled = await jobRun(RECORDS);
    const cpu = meter.read();
    profile.stop();
    registerConnector(demoConnector);
    const b = await historyBreakdown(stack.client, profiled.workflowId);
    // The benchmark's own statements (creating the connection and job, counting) are left out.
    const own = ['select count(*)::int as n from records', 'insert into connections', 'insert into sync_jobs'];
    const statements = profile.rows().filter(([k]) => !own.some((prefix) => k.startsWith(prefix)));
    const pgMs = statements.reduce((s, [, , ms]) => s + ms, 0);
    console.log(
      `profiled job: ${profiled.seconds.toFixed(2)} s wall; ${b.activities} activities executing ${(b.activityExec / 1000).toFixed(2)} s, ` +
        `${b.workflowTasks} workflow tasks ${(b.wftExec / 1000).toFixed(2)} s (+ ${(b.wftQueue / 1000).toFixed(2)} s queued)`,
    );
    console.log(
      `  connector fetchPage (demo data generation): ${(connectorMs / 1000).toFixed(2)} s over ${pages} pages ` +
        `(generating all ${RECORDS.toLocaleString('en')} rows up front for the raw side took ${(generateMs / 1000).toFixed(2)} s)`,
    );
    console.log(`  Postgres statements (client-side, round trip included): ${(pgMs / 1000).toFixed(2)} s`);
    console.log(`  ${formatCpu(cpu)}`);
    table(
      ['statement', 'calls', 'total ms', 'ms/call'],
      statements.slice(0, 10).map(([k, calls, ms]) => [k, calls, ms.toFixed(0), (ms / calls).toFixed(2)]),
    );
  } finally {
    await worker.stop();
  }
}
