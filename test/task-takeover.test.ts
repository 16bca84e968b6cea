// A sync task taken over while the attempt that held it still runs: Temporal starts a retry once an
// attempt's heartbeat times out, and that attempt may be alive on a worker that was only slow (a
// starved event loop, a paused VM). The retry resumes after the last stored page; the earlier
// attempt must then store nothing more, or its pages count twice. Real Postgres, the demo
// connector with latency, both attempts run as a worker runs them (MockActivityEnvironment). And a
// retry of an attempt that stored its last page but died before the end step reads no page again.
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncTask } from '../activities/sync-task';
import type { SyncTaskInput, SyncTaskResult } from '../temporal/activities';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { eventually } from './helpers/worker';

const RECORDS = 500;
const PAGE_SIZE = 50;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

async function syncTaskOf(mode: SyncTaskInput['mode']): Promise<SyncTaskInput> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, $2) returning id`,
    [`takeover-${randomUUID().slice(0, 8)}`, { resource_types: ['issues'], records_per_resource: RECORDS, page_size: PAGE_SIZE, latency_ms: 60, seed: 'takeover' }],
  );
  const { rows: job } = await db.pool.query<{ id: string }>(
    `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at) values ($1, 'acme', $2, 'manual', 'running', now()) returning id`,
    [rows[0]!.id, mode],
  );
  const { rows: task } = await db.pool.query<{ id: string }>(`insert into sync_tasks (job_id, resource_type) values ($1, 'issues') returning id`, [job[0]!.id]);
  return { jobId: job[0]!.id, taskId: task[0]!.id, resourceType: 'issues', mode };
}

function attempt(input: SyncTaskInput, n: number) {
  const { deps, lines } = testActivityDeps({ pool: db.pool });
  return { lines, result: new MockActivityEnvironment({ attempt: n }).run(syncTask(deps), input) as Promise<SyncTaskResult> };
}

describe('a sync task taken over by a retry while its earlier attempt still runs', () => {
  it.each(['full', 'incremental'] as const)('%s: counts every page once; the earlier attempt stores nothing after the takeover and ends skipped', async (mode) => {
    const input = await syncTaskOf(mode);
    const first = attempt(input, 1);
    await eventually(async () => {
      const { rows } = await db.pool.query<{ pages: number }>('select pages_done as pages from sync_tasks where id = $1', [input.taskId]);
      return rows[0]!.pages >= 2 ? true : undefined;
    }, { timeoutMs: 30_000 });
    const second = attempt(input, 2);
    const [a, b] = await Promise.all([first.result, second.result]);

    const { rows: task } = await db.pool.query('select status, pages_done, entity_count from sync_tasks where id = $1', [input.taskId]);
    const { rows: job } = await db.pool.query('select processed_entities::int as processed from sync_jobs where id = $1', [input.jobId]);
    const { rows: records } = await db.pool.query(
      'select count(*)::int as n, count(distinct external_id)::int as ids from records r join sync_jobs j on j.connection_id = r.connection_id where j.id = $1',
      [input.jobId],
    );
    expect(task[0]).toEqual({ status: 'completed', pages_done: RECORDS / PAGE_SIZE, entity_count: RECORDS });
    expect(job[0]).toEqual({ processed: RECORDS });
    expect(records[0]).toEqual({ n: RECORDS, ids: RECORDS });
    // The retry resumed after the earlier attempt's last stored page and completed the task.
    expect(second.lines.some((l) => l.msg === 'resuming sync task after its last stored page')).toBe(true);
    expect(b).toMatchObject({ status: 'completed', entityCount: RECORDS, pages: RECORDS / PAGE_SIZE });
    // The earlier attempt learnt at its next page that the task was no longer its own.
    expect(a.status).toBe('skipped');
    expect(first.lines.some((l) => l.msg === 'sync task no longer held by this run (a later attempt took it over, or it ended): this attempt stops')).toBe(true);
  }, 60_000);
});

describe('a sync task whose attempt stored its last page but ended before completing it', () => {
  it('is completed by its retry without reading a page again: every page counts once', async () => {
    const input = await syncTaskOf('incremental');
    const first = await attempt(input, 1).result;
    expect(first).toMatchObject({ status: 'completed', pages: RECORDS / PAGE_SIZE });
    // Where a worker killed between the last page's write and the task's end step leaves it: every
    // page stored (no next page token), the task still processing, the job not yet told.
    await db.pool.query(`update sync_tasks set status = 'processing', completed_at = null where id = $1`, [input.taskId]);
    await db.pool.query(`update sync_jobs set completed_tasks = completed_tasks - 1 where id = $1`, [input.jobId]);
    const { rows: before } = await db.pool.query('select page_token, pages_done from sync_tasks where id = $1', [input.taskId]);
    expect(before[0]).toEqual({ page_token: null, pages_done: RECORDS / PAGE_SIZE });

    const retry = attempt(input, 2);
    expect(await retry.result).toMatchObject({ status: 'completed', entityCount: RECORDS, pages: RECORDS / PAGE_SIZE });
    const { rows: task } = await db.pool.query('select status, pages_done, entity_count from sync_tasks where id = $1', [input.taskId]);
    const { rows: job } = await db.pool.query('select processed_entities::int as processed, completed_tasks from sync_jobs where id = $1', [input.jobId]);
    expect(task[0]).toEqual({ status: 'completed', pages_done: RECORDS / PAGE_SIZE, entity_count: RECORDS });
    expect(job[0]).toEqual({ processed: RECORDS, completed_tasks: 1 });
    expect(retry.lines.some((l) => l.msg === 'resuming sync task after its last stored page')).toBe(true);
  }, 60_000);
});
