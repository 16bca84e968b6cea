// The deletion step of a full pass when its seen-set (`sync_seen`, an UNLOGGED table) is lost in
// the middle of the pass, as Postgres crash recovery or a promoted standby leaves it: the pass
// must not delete a record the provider still has, and must still delete what the provider did
// delete. Runs sync jobs on the Temporal dev server with real Postgres and the demo connector.
import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { demoFetchLog, demoRecords, resetDemoFailures, resetDemoFetchLog, demoConnectionRows } from './helpers/demo';
import { syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobResult } from '../temporal/sync-job';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'full-sync-seen-set';

describe('full sync after the seen-set was lost', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  beforeEach(() => {
    resetDemoFetchLog();
    resetDemoFailures();
  });

  const { insert: connection, setConfig } = demoConnectionRows(() => stack.db.pool, 'seen');

  /** Starts one full job workflow, as the connection workflow's child would. */
  async function startFullJob(connectionId: string) {
    const jobId = randomUUID();
    await stack.db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', 'full', 'manual')`,
      [jobId, connectionId],
    );
    const handle = await stack.env.client.workflow.start<(i: { jobId: string; connectionId: string }) => Promise<SyncJobResult>>(
      'syncJobWorkflow',
      { taskQueue: TASK_QUEUE, workflowId: syncJobWorkflowId(jobId), args: [{ jobId, connectionId }] },
    );
    return { jobId, handle };
  }

  const storedIds = async (connectionId: string) =>
    (await stack.db.pool.query<{ external_id: string }>('select external_id from records where connection_id = $1 and deleted_at is null', [connectionId])).rows.map(
      (r) => r.external_id,
    );
  const fetchesOfIssues = () => demoFetchLog.filter((e) => e.resource === 'issues').length;
  /** What a crash does to an UNLOGGED table: every row is gone. */
  const loseSeenSet = () => stack.db.pool.query('truncate sync_seen');

  const BASE = { resource_types: ['issues'], records_per_resource: 1000, page_size: 100 };
  // Gone at the provider since the first pass: two on pages the lost seen-set covered, one after.
  const DELETED = [3, 42, 777];

  /** A first full pass stores all 1000 records; then the provider deletes DELETED. */
  async function syncedConnection(extra: Record<string, unknown>) {
    const id = await connection(BASE);
    const first = await startFullJob(id);
    expect(await first.handle.result()).toMatchObject({ status: 'completed' });
    expect((await storedIds(id)).length).toBe(1000);
    const config = { ...BASE, ...extra, changes: { deleted: { issues: DELETED } } };
    await setConfig(id, config);
    resetDemoFetchLog();
    return { id, expected: demoRecords(config, 'issues').map((r) => r.externalId) };
  }

  /** Every record the provider has is stored, and none it deleted. */
  async function expectExactlyTheProvidersRecords(id: string, expected: string[]) {
    const stored = new Set(await storedIds(id));
    const missing = expected.filter((externalId) => !stored.has(externalId));
    expect(missing.length, `records the provider still has were deleted (${missing.slice(0, 3).join(', ')}, …)`).toBe(0);
    const want = new Set(expected);
    const extra = [...stored].filter((externalId) => !want.has(externalId)).sort();
    expect(extra, 'records the provider deleted are still stored').toEqual([]);
    expect(expected).toHaveLength(997);
  }

  const seenSetWarnings = (taskId: string) =>
    stack.lines.filter((l) => l.task_id === taskId && l.level === 'warn' && /seen-set/.test(String(l.msg))).map((l) => String(l.msg));
  const taskOf = async (jobId: string) => (await stack.db.pool.query('select * from sync_tasks where job_id = $1', [jobId])).rows[0];

  it('a task resumed after its seen-set was lost restarts its pass: it deletes exactly what the provider deleted', async () => {
    // Page 5 fails once: the activity's retry resumes from the stored page token of page 5.
    const { id, expected } = await syncedConnection({ fail: { resource: 'issues', at_page: 5, kind: 'transient', times: 1 } });
    const { jobId, handle } = await startFullJob(id);
    // Pages 1–4 are stored once page 5 is requested; the seen-set then vanishes, as in a crash.
    await eventually(async () => (fetchesOfIssues() >= 5 ? true : undefined));
    await loseSeenSet();
    expect(await handle.result()).toMatchObject({ status: 'completed' });

    await expectExactlyTheProvidersRecords(id, expected);
    const task = await taskOf(jobId);
    // The restarted pass counts its own pages and records only; it rewrote nothing (no record changed).
    expect(task).toMatchObject({ status: 'completed', deleted_count: 3, entity_count: 997, written_count: 0, pages_done: 10 });
    expect((await stack.db.pool.query('select processed_entities from sync_jobs where id = $1', [jobId])).rows[0].processed_entities).toBe('997');
    expect(seenSetWarnings(task.id)).toEqual([expect.stringMatching(/while the task was interrupted/)]);
    // Restarted from page one: the first page was fetched twice (before the loss and after it).
    expect(demoFetchLog.filter((e) => e.resource === 'issues' && e.pageToken === null)).toHaveLength(2);
  });

  it('a running pass whose seen-set was lost before its deletion step restarts instead of deleting', async () => {
    const { id, expected } = await syncedConnection({ latency_ms: 150 });
    const { jobId, handle } = await startFullJob(id);
    await eventually(async () => (fetchesOfIssues() >= 5 ? true : undefined));
    await loseSeenSet();
    expect(await handle.result()).toMatchObject({ status: 'completed' });

    await expectExactlyTheProvidersRecords(id, expected);
    const task = await taskOf(jobId);
    expect(task).toMatchObject({ status: 'completed', deleted_count: 3, entity_count: 997, written_count: 0, pages_done: 10 });
    expect(seenSetWarnings(task.id)).toEqual([expect.stringMatching(/before the deletion step/)]);
    expect((await stack.db.pool.query('select count(*)::int as n from sync_seen where task_id = $1', [task.id])).rows[0].n).toBe(0);
  });
});
