// Scale-out (issue 7, item 4): two `npm run api` and two `npm run worker` processes against one
// database and one Temporal dev server. Requests alternate between the APIs; every job completes,
// both workers did work, and no connection ever holds two active jobs of one type.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/database';
import { useServers } from '../helpers/stack';
import { activeDuplicates, countOf, jobStatusCounts, overlappingRuns, summariseCounts, watchActiveJobs } from '../helpers/invariants';
import { apiEnv, callApi, createDemoConnection, stopAllSynctide, startSynctide, workerEnv, type SynctideProcess } from '../helpers/processes';
import { eventually } from '../helpers/worker';

const TASK_QUEUE = 'faults-scale-out';
const CONNECTIONS = 20;
const RECORDS = 50;
const RESOURCE_TYPES = 3; // the demo connector's default: issues, pull_requests, users

describe('scale-out: two API and two worker processes', () => {
  const servers = useServers();
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let apis: SynctideProcess[];
  let workers: SynctideProcess[];
  beforeAll(async () => {
    ({ env, db } = servers);
    const endpoints = { databaseUrl: db.url, temporalAddress: env.address, taskQueue: TASK_QUEUE };
    // Start them one after another: both apply migrations at start, and bundling is CPU-bound.
    workers = [];
    for (const name of ['worker-1', 'worker-2']) workers.push(await startSynctide('worker', await workerEnv(endpoints), { name }));
    apis = await Promise.all(['api-1', 'api-2'].map(async (name) => startSynctide('api', await apiEnv(endpoints), { name })));
  });
  afterAll(async () => {
    await stopAllSynctide();
  });

  it('spreads requests over both APIs, runs jobs on both workers, completes every job once', async () => {
    const watch = watchActiveJobs(db.pool, { perType: true });
    const api = (i: number) => apis[i % 2]!;

    // 20 connections, created alternately through each API; each one's workflow bootstraps at once.
    const ids: string[] = [];
    for (let i = 0; i < CONNECTIONS; i++) {
      ids.push(await createDemoConnection(api(i), `scale-${i}`, { records_per_resource: RECORDS, page_size: 10, latency_ms: 20, seed: `scale-${i}` }));
    }
    // A full sync of each, requested alternately through each API (answered 202 at once).
    const requested: string[] = [];
    for (let i = 0; i < CONNECTIONS; i++) {
      const res = await callApi(api(i + 1), 'POST', '/sync', { tenant_id: 'acme', app_key: `scale-${i}`, mode: 'full' });
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      expect(res.body).toMatchObject({ connection_id: ids[i], mode: 'full', total_tasks: RESOURCE_TYPES });
      requested.push(res.body.job_id);
    }
    expect(new Set(requested).size).toBe(CONNECTIONS);

    // Each requested job is read back through the other API until it has finished.
    for (const [i, jobId] of requested.entries()) {
      const job = await eventually(async () => {
        const res = await callApi(api(i), 'GET', `/jobs/${jobId}`);
        return ['completed', 'failed', 'cancelled'].includes(res.body.status) ? res.body : undefined;
      }, { timeoutMs: 120_000 });
      expect(job).toMatchObject({ status: 'completed', completed_tasks: RESOURCE_TYPES, failed_tasks: 0 });
    }
    // And each connection's bootstrap job has finished too; its next run waits an hour. A
    // connection's first sync runs as the full sync it is, so a full sync requested while it ran
    // was answered with it: one completed job then, two when the request came after it.
    const counts = await eventually(async () => {
      const c = await jobStatusCounts(db.pool, ids);
      return [...c.values()].every((s) => Object.keys(s).length === 2 && (s.completed === 1 || s.completed === 2) && s.queued === 1) ? c : undefined;
    }, { timeoutMs: 120_000, describe: async () => summariseCounts(await jobStatusCounts(db.pool, ids)) });
    const { samples, violations } = await watch.stop();

    const records = await countOf(db.pool, 'records');
    const jobs = await countOf(db.pool, 'sync_jobs');
    const failed = await countOf(db.pool, `sync_jobs where status in ('failed', 'cancelled')`);
    const finishedBy = workers.map((w) => w.lines.filter((l) => l.msg === 'sync job finished').map((l) => String(l.job_id)));
    const tasksBy = workers.map((w) => w.lines.filter((l) => l.task_id && /sync task completed/.test(String(l.msg))).length);
    const requestsBy = apis.map((a) => a.lines.filter((l) => l.msg === 'request' && l.method === 'POST').length);
    const syncsBy = apis.map((a) => a.lines.filter((l) => l.msg === 'sync requested').length);
    console.log(
      `[scale-out] ${CONNECTIONS} connections, ${jobs} jobs (per connection ${JSON.stringify(summariseCounts(counts))}), ` +
        `failed/cancelled ${failed}, records ${records} (expected ${CONNECTIONS * RECORDS * RESOURCE_TYPES}); ` +
        `POSTs per API ${requestsBy.join('/')}, POST /sync per API ${syncsBy.join('/')}; ` +
        `jobs finished per worker ${finishedBy.map((f) => f.length).join('/')}, tasks completed per worker ${tasksBy.join('/')}; ` +
        `duplicate active jobs: ${violations.length} in ${samples} samples, overlapping runs: ${(await overlappingRuns(db.pool, { perType: true })).length}`,
    );

    // The jobs that ran: each connection's one or two completed ones (above).
    const ran = [...counts.values()].reduce((sum, s) => sum + s.completed!, 0);
    expect(records).toBe(CONNECTIONS * RECORDS * RESOURCE_TYPES);
    expect(jobs).toBe(ran + CONNECTIONS);
    expect(failed).toBe(0);
    // Both APIs served half of the requests, and both workers ran jobs.
    expect(syncsBy).toEqual([CONNECTIONS / 2, CONNECTIONS / 2]);
    expect(requestsBy).toEqual([CONNECTIONS, CONNECTIONS]);
    expect(finishedBy.every((f) => f.length > 0)).toBe(true);
    expect(tasksBy.every((n) => n > 0)).toBe(true);
    // Every finished job was finished exactly once, by one of the two workers.
    const finished = finishedBy.flat();
    expect(finished).toHaveLength(ran);
    expect(new Set(finished).size).toBe(ran);
    expect(violations).toEqual([]);
    expect(samples).toBeGreaterThan(0);
    expect(await activeDuplicates(db.pool)).toEqual([]);
    expect(await overlappingRuns(db.pool, { perType: true })).toEqual([]);
    // Both workers and both APIs are still up.
    expect([...apis, ...workers].every((p) => p.running())).toBe(true);
  }, 300_000);
});
