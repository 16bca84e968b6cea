// A status change (disable, delete) of a connection one of whose tasks stores a page at that
// moment waits for the page's transaction and then ends the connection's jobs; it never deadlocks
// with it (the page holds its task's and job's rows, then reads the connection's config FOR
// SHARE; the status change must not hold the connection's row in a mode that conflicts first),
// nor with a config change holding the feed lock that page waits for; ending a job takes its
// tasks' rows before its own and before any lock of the connection's row.
// Real Postgres (each interleaving is held at the point where it deadlocked, seen in
// pg_stat_activity), the Temporal dev server and a worker.
import { describe, expect, it } from 'vitest';
import { failAbandonedInTx } from '../activities/fail-abandoned-jobs';
import { markJobRetrying } from '../activities/mark-job-retrying';
import { disableConnection, updateConnection } from '../commands/connections';
import { deleteConnection } from '../commands/purges';
import { lockConfigForShare } from '../db/models/connections';
import { lockChangeFeed, upsertRecords } from '../db/models/records';
import { withTransaction } from '../db/transaction';
import { TEST_KEYRING, testActivityDeps } from './helpers/deps';
import { feedCursors } from '../lib/feed-cursors';
import { insertLostRunJob, insertProcessingTask } from './helpers/scheduler-jobs';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'status-change-lock-order';

describe('status changes while a page is being stored', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);

  let seq = 0;
  /** An active connection of a tenant of its own, planned once a day. */
  async function newConnection(): Promise<string> {
    seq += 1;
    const tenant = `lock-order-${seq}`;
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status, config, metadata)
       values ($1, 'demo', 'app', 'active', $2, '{"sync": {"interval_seconds": 86400}}') returning id`,
      [tenant, { seed: tenant, resource_types: ['items'], records_per_resource: 4, page_size: 2 }],
    );
    return rows[0]!.id;
  }
  const jobOf = async (id: string) =>
    (await stack.db.pool.query<{ status: string }>('select status from sync_jobs where id = $1', [id])).rows[0]!;

  /** A scheduled job of connection `connectionId` a lost run had begun, with one task processing under a claim. */
  async function lostRunTask(connectionId: string): Promise<{ job: { id: string }; task: { id: string; claim: string } }> {
    const jobId = await insertLostRunJob(stack.db.pool, connectionId, { aged: true });
    return { job: { id: jobId }, task: await insertProcessingTask(stack.db.pool, jobId) };
  }
  /** Resolves once another session waits for a lock (`wait`: pg_stat_activity's wait_event) in a statement like `like`. */
  const waitingFor = async (wait: string, like: string) => eventually(async () => {
    const { rows } = await stack.db.pool.query(
      `select 1 from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and wait_event = $1 and query ilike $2 and pid <> pg_backend_pid()`,
      [wait, like],
    );
    return rows.length > 0 ? true : undefined;
  });
  /** A page of the lost run's task, stored as the page store's statement stores it: 'stored', or why it failed. */
  const pageOf = (connectionId: string, { job, task }: Awaited<ReturnType<typeof lostRunTask>>) =>
    upsertRecords(stack.db.pool, { connectionId, resourceType: 'items', jobId: job.id, fetchedAt: new Date() },
      [{ externalId: 'r1', data: { n: 1 }, updatedAt: new Date().toISOString() }],
      { taskId: task.id, claim: task.claim, nextPageToken: null, records: 1, partitions: { high: {}, hold: {} } },
    ).then(() => 'stored', (err: Error) => `page failed: ${err.message}`);

  /**
   * Disables connection `connectionId` and answers once the disable, having written the connection
   * disabled, looks for its workflow: that look (`describe`) waits for `open()`. `disabling`
   * settles 'disabled' or 'disable failed: <message>'.
   */
  async function disableHeldAtWorkflowLook(connectionId: string): Promise<{ disabling: Promise<string>; open: () => void }> {
    let asked!: () => void;
    const askedForWorkflow = new Promise<void>((resolve) => (asked = resolve));
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    const bound = <T extends object>(target: T, prop: string | symbol) => {
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    };
    const temporal = new Proxy(stack.env.client, {
      get: (client, prop) => prop !== 'workflow' ? bound(client, prop) : new Proxy(client.workflow, {
        get: (workflows, name) => name !== 'getHandle' ? bound(workflows, name) : (id: string) => {
          const handle = workflows.getHandle(id);
          return id !== `connection:${connectionId}` ? handle : new Proxy(handle, {
            get: (h, key) => key !== 'describe' ? bound(h, key) : async () => {
              asked();
              await opened;
              return h.describe();
            },
          });
        },
      }),
    });
    const disabling = disableConnection({ ...stack.commands, temporal }, connectionId).then(() => 'disabled', (err: Error) => `disable failed: ${err.message}`);
    await askedForWorkflow;
    return { disabling, open };
  }

  it("a disable while the lost run's task still stores a page waits for that page's transaction, never deadlocking with it", async () => {
    const connectionId = await newConnection();
    // A scheduled job the lost run had begun, one of whose tasks its activity (not yet told that
    // its workflow is gone) stores a page of.
    const jobId = await insertLostRunJob(stack.db.pool, connectionId, { aged: true });
    const task = await insertProcessingTask(stack.db.pool, jobId);
    // The disable's look for the connection's workflow waits for `open`: the page begins after the
    // disable wrote the connection disabled, and before the disable ends the lost run's job.
    const { disabling, open } = await disableHeldAtWorkflowLook(connectionId);
    // The page's transaction as the sync task's page store runs it: the page's statement (which
    // locks the task's row and the job's), then the connection's config read FOR SHARE.
    const page = withTransaction(stack.db.pool, async (tx) => {
      const record = { externalId: 'r1', data: { n: 1 }, updatedAt: new Date().toISOString() };
      await upsertRecords(tx, { connectionId, resourceType: 'items', jobId, fetchedAt: new Date() }, [record], {
        taskId: task.id, claim: task.claim, nextPageToken: null, records: 1, partitions: { high: {}, hold: {} },
      });
      open();
      // The disable now ends the job: it waits for the page's locks (its tasks' rows, then its job's).
      await eventually(async () => {
        const { rows } = await stack.db.pool.query(
          `select 1 from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock' and (query ilike '%sync_jobs%' or query ilike '%sync_tasks%')
              and pid <> pg_backend_pid()`,
        );
        return rows.length > 0 ? true : undefined;
      });
      await lockConfigForShare(tx, connectionId);
      return 'stored';
    }).catch((err: Error) => `page failed: ${err.message}`);
    expect([await page, await disabling]).toEqual(['stored', 'disabled']);
    expect((await jobOf(jobId)).status).toBe('cancelled');
  });

  it("a disable ending the lost run's job while that job's page waits for the feed lock (its task row held) never deadlocks with it", async () => {
    const connectionId = await newConnection();
    const lost = await lostRunTask(connectionId);
    let page: Promise<string> | undefined;
    let disabling: Promise<string> | undefined;
    // Another writer of the connection's feed (another task's page, a config change) holds the
    // feed lock: the page's statement locks its task's row and then waits for the feed lock.
    await withTransaction(stack.db.pool, async (other) => {
      await lockChangeFeed(other, connectionId);
      page = pageOf(connectionId, lost);
      await waitingFor('advisory', '%pg_advisory_xact_lock%');
      // The disable finds no workflow and ends the lost run's job: it waits for the task's row.
      disabling = disableConnection(stack.commands, connectionId).then(() => 'disabled', (err: Error) => `disable failed: ${err.message}`);
      await waitingFor('transactionid', '%sync_tasks%');
    });
    expect([await page, await disabling]).toEqual(['stored', 'disabled']);
    expect((await jobOf(lost.job.id)).status).toBe('cancelled');
  });

  it("a new run's start-up cleanup failing the lost run's job while that job's page waits for the feed lock never deadlocks with it", async () => {
    const connectionId = await newConnection();
    const lost = await lostRunTask(connectionId);
    let page: Promise<string> | undefined;
    let cleanup: Promise<string> | undefined;
    await withTransaction(stack.db.pool, async (other) => {
      await lockChangeFeed(other, connectionId);
      page = pageOf(connectionId, lost);
      await waitingFor('advisory', '%pg_advisory_xact_lock%');
      // The connection's new run ends what the lost run left: it waits for the task's row.
      cleanup = withTransaction(stack.db.pool, (tx) => failAbandonedInTx(tx, connectionId, new Date(), 'a-new-run', feedCursors(TEST_KEYRING)))
        .then(() => 'cleaned up', (err: Error) => `cleanup failed: ${err.message}`);
      await waitingFor('transactionid', '%sync_tasks%');
    });
    expect([await page, await cleanup]).toEqual(['stored', 'cleaned up']);
    expect((await jobOf(lost.job.id)).status).toBe('failed');
  });

  it("a job's retry marked while a page of its earlier attempt waits for the feed lock (its task row held) never deadlocks with it", async () => {
    const connectionId = await newConnection();
    const lost = await lostRunTask(connectionId);
    const { deps } = testActivityDeps({ pool: stack.db.pool });
    let page: Promise<string> | undefined;
    let retrying: Promise<string> | undefined;
    await withTransaction(stack.db.pool, async (other) => {
      await lockChangeFeed(other, connectionId);
      page = pageOf(connectionId, lost);
      await waitingFor('advisory', '%pg_advisory_xact_lock%');
      // The job's workflow records the failed attempt: it waits for the task's row.
      const at = Date.now();
      retrying = markJobRetrying(deps)({ jobId: lost.job.id, at, startedAt: at - 1000, retryAfter: at + 60_000, kind: 'interrupted', error: 'interrupted', failedCount: 0 })
        .then(() => 'retrying', (err: Error) => `retry failed: ${err.message}`);
      await waitingFor('transactionid', '%sync_tasks%');
    });
    expect([await page, await retrying]).toEqual(['stored', 'retrying']);
    expect((await jobOf(lost.job.id)).status).toBe('retrying');
  });

  it("a disable of a connection whose run is gone, a config change and the lost run's page waiting for the change's feed lock never deadlock", async () => {
    const connectionId = await newConnection();
    const lost = await lostRunTask(connectionId);
    // The disable writes the connection disabled, then its look for the workflow waits for `open`.
    const { disabling, open } = await disableHeldAtWorkflowLook(connectionId);
    let page: Promise<string> | undefined;
    let updating: Promise<string> | undefined;
    // A reader of the connection's row (FOR SHARE, as a page's config check) holds it while the
    // config change takes the feed lock and waits for the row, and the page takes its task's row
    // and waits for the feed lock; then the disable goes on to end the lost run's job.
    await withTransaction(stack.db.pool, async (reader) => {
      await lockConfigForShare(reader, connectionId);
      const config = { seed: 'changed', resource_types: ['items'], records_per_resource: 4, page_size: 2 };
      updating = updateConnection(stack.commands, connectionId, { config }).then(() => 'updated', (err: Error) => `update failed: ${err.message}`);
      await waitingFor('transactionid', '%for no key update%');
      page = pageOf(connectionId, lost);
      await waitingFor('advisory', '%pg_advisory_xact_lock%');
      open();
      await waitingFor('transactionid', '%sync_tasks%');
    });
    expect([await page, await disabling, await updating]).toEqual(['stored', 'disabled', 'updated']);
    expect((await jobOf(lost.job.id)).status).toBe('cancelled');
  });

  it("a delete while a task of the connection stores a page waits for that page's transaction, never deadlocking with it", async () => {
    const connectionId = await newConnection();
    const jobId = await insertLostRunJob(stack.db.pool, connectionId, { runId: 'a-run' });
    const task = await insertProcessingTask(stack.db.pool, jobId);
    let deleting: Promise<string> | undefined;
    // The page's transaction as the sync task's page store runs it: the page's statement (its
    // records reference the connection), then the connection's config read FOR SHARE.
    const page = withTransaction(stack.db.pool, async (tx) => {
      const record = { externalId: 'r1', data: { n: 1 }, updatedAt: new Date().toISOString() };
      await upsertRecords(tx, { connectionId, resourceType: 'items', jobId, fetchedAt: new Date() }, [record], {
        taskId: task.id, claim: task.claim, nextPageToken: null, records: 1, partitions: { high: {}, hold: {} },
      });
      deleting = deleteConnection(stack.commands, connectionId).then(() => 'deleted', (err: Error) => `delete failed: ${err.message}`);
      // The delete's transaction waits for the page's locks, or has recorded the purge.
      await eventually(async () => {
        const { rows } = await stack.db.pool.query(
          `select 1 from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock' and query ilike '%update connections%' and pid <> pg_backend_pid()
           union all select 1 from connection_purges where connection_id = $1`,
          [connectionId],
        );
        return rows.length > 0 ? true : undefined;
      });
      await lockConfigForShare(tx, connectionId);
      return 'stored';
    }).catch((err: Error) => `page failed: ${err.message}`);
    expect([await page, await deleting]).toEqual(['stored', 'deleted']);
  });
});
