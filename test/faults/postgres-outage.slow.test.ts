// Fault: Postgres unreachable for 30 s while syncs run. The test owns an embedded Postgres, stops
// it in the middle of the connections' first syncs and starts it again on the same port and data
// directory. The worker's activities retry and every job completes (none lost, none stuck), and
// meanwhile the `npm run api` process answers 503 with a JSON error, never 500.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../db/pool';
import { activeDuplicates, countOf, overlappingRuns, summariseCounts, untilEveryConnection, watchActiveJobs } from '../helpers/invariants';
import { apiEnv, callApi, createDemoConnection, stopAllSynctide, startSynctide, workerEnv, type SynctideProcess } from '../helpers/processes';
import { startOwnedPostgres } from '../helpers/servers';
import { createDevServerEnv } from '../helpers/temporal';
import { eventually } from '../helpers/worker';

const TASK_QUEUE = 'faults-postgres-outage';
const CONNECTIONS = 4;
const RECORDS = 300; // per resource type, pages of 10: 90 pages of ~200 ms per job
const RESOURCE_TYPES = 3;
const OUTAGE_MS = 30_000;

describe('Postgres unreachable for 30 s during syncs', () => {
  let env: TestWorkflowEnvironment;
  let postgres: Awaited<ReturnType<typeof startOwnedPostgres>>;
  let pool: Pool;
  let worker: SynctideProcess;
  let api: SynctideProcess;
  beforeAll(async () => {
    [env, postgres] = await Promise.all([createDevServerEnv(), startOwnedPostgres()]);
    pool = createPool(postgres.url, 4);
    const servers = { databaseUrl: postgres.url, temporalAddress: env.address, taskQueue: TASK_QUEUE };
    worker = await startSynctide('worker', await workerEnv(servers));
    api = await startSynctide('api', await apiEnv(servers));
  });
  afterAll(async () => {
    await stopAllSynctide();
    await pool?.end();
    await env?.teardown();
    await postgres?.remove();
  });

  it('retries through the outage: every job completes, none is lost or stuck; the API answers 503 meanwhile', async () => {
    const ids: string[] = [];
    for (let i = 0; i < CONNECTIONS; i++) {
      ids.push(await createDemoConnection(api, `outage-${i}`, { records_per_resource: RECORDS, page_size: 10, latency_ms: 200, seed: `outage-${i}` }));
    }
    const watch = watchActiveJobs(pool);
    // Every connection's first sync is under way (a few pages stored, most still to come).
    const { rows: started } = await eventually(async () => {
      const result = await pool.query<{ id: string; processed: number }>(
        `select id, processed_entities::int as processed from sync_jobs where connection_id = any($1::uuid[]) and status = 'running'`,
        [ids],
      );
      return result.rows.length === CONNECTIONS && result.rows.every((r) => r.processed >= 50) ? result : undefined;
    }, { timeoutMs: 120_000 });
    const jobIds = started.map((j) => j.id);

    // Postgres goes away. Ask the API what a client would ask, every 2 s, until it is back.
    await postgres.stop();
    const stoppedAt = Date.now();
    const answers: { path: string; status: number; body: any; retryAfter: string | null }[] = [];
    const ask = async (method: string, path: string, body?: unknown) => {
      const res = await callApi(api, method, path, body);
      answers.push({ path: `${method} ${path}`, status: res.status, body: res.body, retryAfter: res.headers.get('retry-after') });
    };
    while (Date.now() - stoppedAt < OUTAGE_MS) {
      await ask('GET', '/jobs');
      await ask('GET', `/jobs/${jobIds[0]}`);
      await ask('POST', '/sync', { tenant_id: 'acme', app_key: 'outage-0', mode: 'full' });
      await ask('GET', '/readyz');
      await new Promise((r) => setTimeout(r, 2000));
    }
    const processesUp = worker.running() && api.running();
    // A process that died would leave the jobs running for ever: say so now, not after the wait.
    expect(processesUp, `worker or API exited during the outage\n${worker.otherOutput()}\n${api.otherOutput()}`).toBe(true);
    await postgres.start();
    const downSeconds = Math.round((Date.now() - stoppedAt) / 1000);

    // The API is ready again, and every job finishes.
    await eventually(async () => ((await callApi(api, 'GET', '/readyz')).status === 200 ? true : undefined), { timeoutMs: 60_000 });
    const jobsAfterOutage = await callApi(api, 'GET', '/jobs?limit=50');
    // Every first sync finishes and every connection workflow moves on to plan its next run.
    const counts = await untilEveryConnection(pool, ids, { completed: 1, queued: 1 }, 360_000);
    const { rows: finished } = await pool.query(
      `select id, status, retry_count, processed_entities::int as processed, completed_tasks, failed_tasks
         from sync_jobs where id = any($1::uuid[])`,
      [jobIds],
    );
    const { samples, violations } = await watch.stop();

    const { rows: active } = await pool.query(
      `select id, trigger, status, scheduled_at from sync_jobs where status in ('queued', 'running', 'retrying')`,
    );
    const records = await countOf(pool, 'records');
    const attemptLogs = await countOf(pool, `sync_job_logs where outcome = 'retrying'`);
    const retriedLines = worker.lines.filter((l) => l.msg === 'sync job attempt failed: job waits before retrying').length;
    const statuses: Record<string, number> = {};
    for (const a of answers) statuses[`${a.path.replace(/[0-9a-f-]{36}/, ':id')} → ${a.status}`] = (statuses[`${a.path.replace(/[0-9a-f-]{36}/, ':id')} → ${a.status}`] ?? 0) + 1;
    console.log(
      `[postgres-outage] Postgres down ${downSeconds} s during ${CONNECTIONS} running syncs; API answers meanwhile ${JSON.stringify(statuses)}; ` +
        `jobs ${finished.map((j) => `${j.status}(retries ${j.retry_count}, processed ${j.processed})`).join(', ')}; ` +
        `per connection ${JSON.stringify(summariseCounts(counts))}; failed attempts logged ${attemptLogs} (worker lines ${retriedLines}); ` +
        `records ${records} (expected ${CONNECTIONS * RECORDS * RESOURCE_TYPES}); duplicate active jobs: ${violations.length} in ${samples} samples; ` +
        `worker and API up throughout: ${processesUp && worker.running() && api.running()}`,
    );

    // Meanwhile: 503 with a JSON error (and Retry-After) for every call that needs Postgres; never 500.
    expect(answers.length).toBeGreaterThanOrEqual(4 * 10);
    for (const a of answers) {
      expect(a.status, `${a.path}: ${JSON.stringify(a.body)}`).toBe(503);
      if (a.path === 'GET /readyz') {
        expect(a.body).toEqual({ status: 'unavailable', checks: { postgres: 'unreachable', temporal: 'ok' } });
      } else {
        expect(a.body).toEqual({ error: { code: 'unavailable', message: 'Postgres is unreachable; try again shortly' } });
        expect(a.retryAfter).toBe('5');
      }
    }
    expect(jobsAfterOutage.status).toBe(200);
    // No job lost or stuck: each first sync completed with all its records; nothing else ran or
    // waits, except each connection's next scheduled run an hour away.
    expect(finished).toHaveLength(CONNECTIONS);
    for (const job of finished) {
      expect(job).toMatchObject({ status: 'completed', processed: RECORDS * RESOURCE_TYPES, completed_tasks: RESOURCE_TYPES, failed_tasks: 0 });
    }
    for (const byStatus of counts.values()) expect(byStatus).toEqual({ completed: 1, queued: 1 });
    expect(active).toHaveLength(CONNECTIONS);
    for (const job of active) {
      expect(job).toMatchObject({ trigger: 'schedule', status: 'queued' });
      expect(job.scheduled_at.getTime()).toBeGreaterThan(Date.now() + 30 * 60_000);
    }
    expect(records).toBe(CONNECTIONS * RECORDS * RESOURCE_TYPES);
    expect(violations).toEqual([]);
    expect(await activeDuplicates(pool)).toEqual([]);
    expect(await overlappingRuns(pool)).toEqual([]);
    // Both processes rode the outage out.
    expect(processesUp && worker.running() && api.running()).toBe(true);
  }, 600_000);
});
