// Fault: kill -9 of the `npm run worker` process in the middle of a 20-page full sync, five times
// (one job per kill, each killed at a different page), with a new worker started after each kill.
// Every job completes with exact records, counts and pages: the retried task resumes after its
// last stored page, nothing is written twice, and no connection ever has two active jobs.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { insertJob } from '../../db/models/jobs';
import { ensureJobWorkflow } from '../../temporal/client';
import { syncJobWorkflowId } from '../../temporal/ids';
import { useServers } from '../helpers/stack';
import { activeDuplicates, countOf, overlappingRuns, watchActiveJobs } from '../helpers/invariants';
import { stopAllSynctide, startSynctide, workerEnv, type SynctideProcess } from '../helpers/processes';
import { eventually } from '../helpers/worker';

const TASK_QUEUE = 'faults-worker-kill';
const RESOURCE_TYPES = ['issues', 'pull_requests'];
const RECORDS = 500; // per resource type: 10 pages of 50, 20 pages per job
const PAGE_SIZE = 50;
const PAGES = (RECORDS / PAGE_SIZE) * RESOURCE_TYPES.length;
// Kill once this many records are stored: in pages 3, 6, 8 (issues) and 14, 17 (pull_requests),
// never at a task boundary.
const KILL_AFTER = [100, 250, 350, 650, 800];

describe('kill -9 of the worker during a full sync', () => {
  const servers = useServers();
  let worker: SynctideProcess;
  afterAll(async () => {
    await stopAllSynctide();
  });

  it('completes each of 5 killed jobs with exact records and no duplicates', async () => {
    const { env, db } = servers;
    // One reconcile tick at the first start and none after (the tick workflow then sleeps an
    // hour), so the connections below have no scheduler of their own: the requested full syncs
    // are the only jobs.
    const endpoints = { databaseUrl: db.url, temporalAddress: env.address, taskQueue: TASK_QUEUE };
    const startWorker = async () => startSynctide('worker', await workerEnv(endpoints, { SCHEDULER_TICK_SECONDS: '3600' }));
    worker = await startWorker();
    await worker.waitForLog((l) => l.msg === 'reconcile tick');
    const workers = [worker];
    const watch = watchActiveJobs(db.pool, { everyMs: 100 });

    const jobIds: string[] = [];
    const connectionIds: string[] = [];
    const atKill: { processed: number; resumable: boolean; exit: string }[] = [];
    for (const [round, threshold] of KILL_AFTER.entries()) {
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
         values ('acme', 'demo', $1, $2, '{"sync": {"interval_seconds": 3600}}') returning id`,
        [`kill-${round}`, { resource_types: RESOURCE_TYPES, records_per_resource: RECORDS, page_size: PAGE_SIZE, latency_ms: 150, seed: `kill-${round}` }],
      );
      const connectionId = rows[0]!.id;
      // What POST /sync {mode: "full"} does: insert the job, start its sync-job workflow.
      const jobId = randomUUID();
      expect(await insertJob(db.pool, { id: jobId, connectionId, tenantId: 'acme', jobType: 'full', trigger: 'api', scheduledAt: null, workflowId: syncJobWorkflowId(jobId) })).toBe(true);
      await ensureJobWorkflow(env.client, TASK_QUEUE, { id: jobId, connection: { id: connectionId, tenantId: 'acme', providerSlug: 'demo' } });
      connectionIds.push(connectionId);
      jobIds.push(jobId);

      await eventually(async () => {
        const { rows: job } = await db.pool.query('select processed_entities::int as n from sync_jobs where id = $1', [jobId]);
        return job[0].n >= threshold ? true : undefined;
      }, { timeoutMs: 120_000 });
      worker.kill('SIGKILL');
      const exit = await worker.exit;
      // Where the job stood when its worker died: a task part-way through must resume, not restart.
      const { rows: tasks } = await db.pool.query(
        `select status, pages_done from sync_tasks where job_id = $1 and status = 'processing'`,
        [jobId],
      );
      const { rows: job } = await db.pool.query('select processed_entities::int as n from sync_jobs where id = $1', [jobId]);
      atKill.push({ processed: job[0].n, resumable: tasks.some((t) => t.pages_done > 0), exit: exit.signal ?? String(exit.code) });
      worker = await startWorker();
      workers.push(worker);
    }

    // Each killed attempt is timed out by its heartbeat timeout and retried on the new worker.
    const jobs = await eventually(async () => {
      const { rows } = await db.pool.query(
        `select id, status, processed_entities::int as processed, completed_tasks, failed_tasks, retry_count
           from sync_jobs where id = any($1::uuid[])`,
        [jobIds],
      );
      return rows.every((r) => !['queued', 'running', 'retrying'].includes(r.status)) ? rows : undefined;
    }, { timeoutMs: 420_000 });
    const { samples, violations } = await watch.stop();

    const { rows: tasks } = await db.pool.query(
      `select job_id, status, entity_count, pages_done from sync_tasks where job_id = any($1::uuid[])`,
      [jobIds],
    );
    const { rows: perConnection } = await db.pool.query(
      `select connection_id, count(*)::int as n, count(distinct external_id)::int as distinct_ids from records group by 1`,
    );
    const records = await countOf(db.pool, 'records');
    const allJobs = await countOf(db.pool, 'sync_jobs');
    const resumed = workers.flatMap((w) => w.lines.filter((l) => l.msg === 'resuming sync task after its last stored page'));
    const overlapping = await overlappingRuns(db.pool);
    console.log(
      `[worker-kill] ${KILL_AFTER.length} kills (-9) at processed ${atKill.map((k) => k.processed).join('/')} of ${RECORDS * RESOURCE_TYPES.length} ` +
        `(exit ${atKill.map((k) => k.exit).join('/')}); jobs ${allJobs}: ${jobs.map((j) => j.status).join('/')}, ` +
        `processed ${jobs.map((j) => j.processed).join('/')}, job-level retries ${jobs.map((j) => j.retry_count).join('/')}; ` +
        `pages stored per job ${jobIds.map((id) => tasks.filter((t) => t.job_id === id).reduce((s, t) => s + t.pages_done, 0)).join('/')} (expected ${PAGES}); ` +
        `tasks resumed after their last stored page ${resumed.length}; records ${records} (expected ${KILL_AFTER.length * RECORDS * RESOURCE_TYPES.length}); ` +
        `duplicate active jobs: ${violations.length} in ${samples} samples; overlapping runs: ${overlapping.length}`,
    );

    expect(atKill.every((k) => k.exit === 'SIGKILL')).toBe(true);
    expect(allJobs).toBe(KILL_AFTER.length);
    for (const job of jobs) {
      expect(job).toMatchObject({ status: 'completed', processed: RECORDS * RESOURCE_TYPES.length, completed_tasks: RESOURCE_TYPES.length, failed_tasks: 0 });
    }
    // No page was stored twice: exactly 10 pages and 500 records per task.
    expect(tasks).toHaveLength(KILL_AFTER.length * RESOURCE_TYPES.length);
    for (const task of tasks) expect(task).toMatchObject({ status: 'completed', entity_count: RECORDS, pages_done: RECORDS / PAGE_SIZE });
    expect(records).toBe(KILL_AFTER.length * RECORDS * RESOURCE_TYPES.length);
    expect(perConnection).toHaveLength(KILL_AFTER.length);
    for (const c of perConnection) expect(c).toMatchObject({ n: RECORDS * RESOURCE_TYPES.length, distinct_ids: RECORDS * RESOURCE_TYPES.length });
    // A task killed part-way resumed on a new worker from its last stored page.
    expect(resumed.length).toBeGreaterThanOrEqual(atKill.filter((k) => k.resumable).length);
    expect(atKill.filter((k) => k.resumable).length).toBeGreaterThan(0);
    expect(violations).toEqual([]);
    expect(samples).toBeGreaterThan(0);
    expect(overlapping).toEqual([]);
    expect(await activeDuplicates(db.pool)).toEqual([]);
  }, 600_000);
});
