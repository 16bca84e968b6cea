// A job's claim that its connection refuses (disabled) cancels the job with its open tasks; it
// takes the tasks' rows before the job's, as every other path that writes both does (a page's
// statement, the reconcile tick failing a job whose workflow it finds gone, a retry, a cancel), so
// it never deadlocks with one of them. Real Postgres; each interleaving is held at the point where
// it deadlocked (seen in pg_stat_activity); Temporal is an in-memory stand-in that says which
// workflows run (the tick must find the job's workflow gone).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { claimJob } from '../activities/claim-job';
import { reconcileConnections } from '../activities/reconcile-connections';
import { lockChangeFeed, upsertRecords } from '../db/models/records';
import { lockTaskToSync } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import { syncJobWorkflowId } from '../temporal/ids';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';
import { insertLostRunJob, insertProcessingTask } from './helpers/scheduler-jobs';
import { eventually } from './helpers/worker';

const db = useTestDatabase();

/** A disabled connection of a tenant of its own. */
async function disabledConnection(): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, status, config)
     values ($1, 'demo', 'app', 'disabled', '{"resource_types": ["issues", "users"]}') returning id`,
    [`claim-lock-order-${randomUUID().slice(0, 8)}`],
  );
  return rows[0]!.id;
}

const jobStatus = async (id: string) => (await db.pool.query<{ status: string }>('select status from sync_jobs where id = $1', [id])).rows[0]!.status;
const taskStatuses = async (jobId: string) =>
  (await db.pool.query<{ status: string }>('select status from sync_tasks where job_id = $1 order by id', [jobId])).rows.map((r) => r.status);

/** Resolves once `n` other sessions of this database wait for a row's lock (not an advisory one) in a statement on sync_tasks. */
const waitingOnTasks = (n: number) => eventually(async () => {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock' and wait_event <> 'advisory' and query ilike '%sync_tasks%'
        and pid <> pg_backend_pid()`,
  );
  return rows[0]!.n >= n ? true : undefined;
});

describe("a job's claim cancelling it (its connection disabled)", () => {
  it('never deadlocks with the reconcile tick failing that job, whose workflow the tick found gone', async () => {
    const connectionId = await disabledConnection();
    // A requested job waiting to retry, its two tasks pending: the tick finds its workflow gone
    // while the workflow's claim (in flight, or the lookup stale) finds the connection disabled.
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id, created_at, started_at)
       select $1, id, tenant_id, 'incremental', 'api', 'retrying', $2, now() - interval '10 minutes', now() - interval '10 minutes'
         from connections where id = $3`,
      [jobId, syncJobWorkflowId(jobId), connectionId],
    );
    await db.pool.query(`insert into sync_tasks (job_id, resource_type) values ($1, 'issues'), ($1, 'users')`, [jobId]);
    const [, second] = (await db.pool.query<{ id: string }>('select id from sync_tasks where job_id = $1 order by id', [jobId])).rows.map((r) => r.id);
    const { deps } = testActivityDeps({ pool: db.pool, temporal: fakeTemporal().client });
    let tick: Promise<string> | undefined;
    let claim: Promise<string> | undefined;
    // A lost attempt's claim of the second task holds that task's row: the tick locks the first
    // task's row and waits for the second's; then the job's claim begins.
    await withTransaction(db.pool, async (holder) => {
      await lockTaskToSync(holder, second!);
      tick = reconcileConnections(deps)({ at: Date.now() }).then((r) => `ticked, ${r.abandoned} abandoned`, (err: Error) => `tick failed: ${err.message}`);
      await waitingOnTasks(1);
      claim = claimJob(deps)({ jobId, workflowId: syncJobWorkflowId(jobId), at: Date.now() })
        .then((claimed) => (claimed ? 'claimed' : 'not claimed'), (err: Error) => `claim failed: ${err.message}`);
      await waitingOnTasks(2);
    });
    expect([await tick, await claim]).toEqual(['ticked, 1 abandoned', 'not claimed']);
    expect(await jobStatus(jobId)).toBe('failed');
    expect(await taskStatuses(jobId)).toEqual(['failed', 'failed']);
  });

  it("never deadlocks with a page of the job's earlier attempt waiting for the feed lock (its task row held)", async () => {
    const connectionId = await disabledConnection();
    // The job runs under its connection's workflow, which claims it again (a retried claim) while
    // an earlier attempt's activity, not yet told, still stores a page of its task.
    const jobId = await insertLostRunJob(db.pool, connectionId, { runId: 'a-run' });
    const task = await insertProcessingTask(db.pool, jobId);
    const { deps } = testActivityDeps({ pool: db.pool, temporal: fakeTemporal().client });
    let page: Promise<string> | undefined;
    let claim: Promise<string> | undefined;
    // Another writer of the connection's feed holds the feed lock: the page's statement locks its
    // task's row and waits for it; the claim then waits for the task's row.
    await withTransaction(db.pool, async (other) => {
      await lockChangeFeed(other, connectionId);
      page = upsertRecords(db.pool, { connectionId, resourceType: 'items', jobId, fetchedAt: new Date() },
        [{ externalId: 'r1', data: { n: 1 }, updatedAt: new Date().toISOString() }],
        { taskId: task.id, claim: task.claim, nextPageToken: null, records: 1, partitions: { high: {}, hold: {} } },
      ).then(() => 'stored', (err: Error) => `page failed: ${err.message}`);
      await eventually(async () => {
        const { rows } = await db.pool.query(
          `select 1 from pg_stat_activity
            where datname = current_database() and wait_event = 'advisory' and query ilike '%pg_advisory_xact_lock%' and pid <> pg_backend_pid()`,
        );
        return rows.length > 0 ? true : undefined;
      });
      claim = claimJob(deps)({ jobId, workflowId: `connection:${connectionId}`, at: Date.now() })
        .then((claimed) => (claimed ? 'claimed' : 'not claimed'), (err: Error) => `claim failed: ${err.message}`);
      await waitingOnTasks(1);
    });
    expect([await page, await claim]).toEqual(['stored', 'not claimed']);
    expect(await jobStatus(jobId)).toBe('cancelled');
    expect(await taskStatuses(jobId)).toEqual(['cancelled']);
  });
});
