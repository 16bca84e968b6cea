// The reconcile tick's per-tick work goes to tenants in turns, and no tenant's locks hold the tick:
// one tenant's backlog (purges whose workflows never started, as after a Temporal outage) does not
// hold another tenant's back for tick after tick, and one tenant's connection whose change feed a
// long page store holds does not keep the tick from another tenant's deselections meanwhile. Real
// Postgres and commands; Temporal faked where no workflow is involved.
import { describe, expect, it } from 'vitest';
import { finishDeselections } from '../activities/finish-deselections';
import { jobsWithoutListedWorkflow, reconcileConnections } from '../activities/reconcile-connections';
import { findActiveJobsCreatedBefore } from '../db/models/jobs';
import { createConnection, updateConnection } from '../commands/connections';
import { findOpenPurgesCreatedBefore } from '../db/models/purges';
import { DESELECTION_BATCH, lockChangeFeed } from '../db/models/records';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { useTestDatabase } from './helpers/database';
import { fakeTemporal } from './helpers/fake-temporal';
import type { Client } from '@temporalio/client';
import { connectionWorkflowId, webhookDeliveryWorkflowId } from '../temporal/ids';
import { connectionPurgeWorkflowId } from '../temporal/purge';

describe('open purges the reconcile tick starts (real Postgres)', () => {
  const db = useTestDatabase();

  it("takes each tenant's oldest in turn, so one tenant's backlog of unstarted purges does not hold another's back for ticks", async () => {
    /** `n` open purges of `tenant` whose workflows never started, created `minutesAgo` minutes ago (a minute apart, oldest first). */
    const backlog = async (tenant: string, n: number, minutesAgo: number) => {
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connection_purges (connection_id, tenant_id, created_at)
         select gen_random_uuid(), $1, now() - make_interval(mins => $3 - k) from generate_series(0, $2 - 1) k
         returning id`,
        [tenant, n, minutesAgo],
      );
      return rows.map((r) => r.id);
    };
    // A tenant's thousand purges whose workflows never started, older than the other tenant's two.
    const noisy = await backlog('noisy', 1000, 2000);
    const quiet = await backlog('quiet', 2, 10);
    const picked = (await findOpenPurgesCreatedBefore(db.pool, new Date(), [], 4)).map((p) => p.id);
    expect(picked.filter((id) => quiet.includes(id))).toHaveLength(2);
    expect(picked.filter((id) => noisy.includes(id))).toHaveLength(2);
    // Purges the tick found running are left out before the turns are counted.
    const next = (await findOpenPurgesCreatedBefore(db.pool, new Date(), [...quiet, ...noisy.slice(0, 2)], 4)).map((p) => p.id);
    expect(next).toHaveLength(4);
    expect(next.every((id) => noisy.includes(id) && !noisy.slice(0, 2).includes(id))).toBe(true);
  });
});

describe('jobs without a live workflow the reconcile tick acts on (real Postgres)', () => {
  const db = useTestDatabase();

  it("takes each tenant's oldest in turn, so one tenant's backlog of jobs without workflows does not hold another's back for ticks", async () => {
    /** `n` queued requested jobs of `tenant` (a connection each) whose workflows never started, created `minutesAgo` minutes ago (a minute apart, oldest first). */
    const backlog = async (tenant: string, n: number, minutesAgo: number) => {
      const { rows } = await db.pool.query<{ id: string }>(
        `with made as (
           insert into connections (tenant_id, provider_slug, app_key, status)
           select $1, 'demo', $1 || '-' || k, 'active' from generate_series(0, $2 - 1) k
           returning id, app_key)
         insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at, created_at)
         select made.id, $1, 'incremental', 'api', 'queued', now(), now() - make_interval(mins => $3 - split_part(made.app_key, '-', 2)::int)
           from made
         returning id`,
        [tenant, n, minutesAgo],
      );
      return rows.map((r) => r.id);
    };
    const noisy = await backlog('noisy', 1000, 2000);
    const quiet = await backlog('quiet', 2, 10);
    const jobs = (await findActiveJobsCreatedBefore(db.pool, new Date(), 5000, '00000000-0000-0000-0000-000000000000')).sort(
      (a, b) => a.created_at.getTime() - b.created_at.getTime(),
    );
    expect(jobs).toHaveLength(1002);
    // None listed running (the tick's listing found no workflow of any), four acted on this tick.
    const picked = (await jobsWithoutListedWorkflow(db.pool, jobs, new Set(), 4)).map((j) => j.id);
    expect({ quiet: picked.filter((id) => quiet.includes(id)).length, noisy: picked.filter((id) => noisy.includes(id)).length }).toEqual({ quiet: 2, noisy: 2 });
    // Without a listing (every job a suspect) the same turns apply.
    const unlisted = (await jobsWithoutListedWorkflow(db.pool, jobs, null, 4)).map((j) => j.id);
    expect(unlisted.filter((id) => quiet.includes(id))).toHaveLength(2);
  });
});

describe("the reconcile tick's deselections beside a tenant's held change feed (real Postgres)", () => {
  const db = useTestDatabase();
  const commands = () => testCommandDeps(db.pool, fakeTemporal().client);
  const quietDeps = () => testActivityDeps({ pool: db.pool }).deps;

  /** A demo connection of `tenant` syncing `items` and `extras`, with `extras` records stored. */
  async function withExtras(tenant: string, appKey: string, extras: number): Promise<string> {
    const row = await createConnection(commands(), {
      tenantId: tenant, appKey, provider: 'demo', config: { resource_types: ['items', 'extras'] }, credentials: null, schedule: null, status: 'paused',
    });
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, fetched_at)
       select $1, 'extras', 'x-' || lpad(n::text, 8, '0'), jsonb_build_object('n', n), now(), now() from generate_series(1, $2::int) n`,
      [row.id, extras],
    );
    return row.id;
  }
  /** Stops selecting `extras`: the request tombstones one batch, the rest is left to the tick. */
  const dropExtras = (id: string) => updateConnection(commands(), id, { config: { resource_types: ['items'] } });
  const liveExtras = async (id: string) =>
    (await db.pool.query<{ n: number }>(`select count(*)::int as n from records where connection_id = $1 and resource_type = 'extras' and deleted_at is null`, [id])).rows[0]!.n;
  const pending = async (id: string) => (await db.pool.query('select 1 from pending_deselections where connection_id = $1', [id])).rowCount;

  it("finishes another tenant's deselection while a tenant's connection's change feed is held (a long page store), and that one's once it is free", async () => {
    // Tenant "busy" (first in the tick's turns) and tenant "quiet" each stop selecting a type with
    // records left to tombstone.
    const busy = await withExtras('busy', 'busy-1', DESELECTION_BATCH + 10);
    const quiet = await withExtras('quiet', 'quiet-1', DESELECTION_BATCH + 10);
    await dropExtras(busy);
    await dropExtras(quiet);
    expect({ busy: await liveExtras(busy), quiet: await liveExtras(quiet) }).toEqual({ busy: 10, quiet: 10 });

    // A transaction storing a page of the busy tenant's connection holds its change feed.
    const holder = await db.pool.connect();
    let tick: ReturnType<typeof finishDeselections> | undefined;
    try {
      await holder.query('begin');
      await lockChangeFeed(holder, busy);
      const holderPid = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      tick = finishDeselections(quietDeps(), 4, 0);
      // Once the tick waits for that lock, it has done all it could without it: the quiet tenant's
      // deselection is finished.
      const waitsForHolder = async () =>
        ((await db.pool.query('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [holderPid])).rowCount ?? 0) > 0;
      let settled = false;
      void tick.finally(() => (settled = true));
      while (!settled && !(await waitsForHolder())) await new Promise((resolve) => setTimeout(resolve, 20));
      expect({ quietLive: await liveExtras(quiet), quietPending: await pending(quiet) }).toEqual({ quietLive: 0, quietPending: 0 });
    } finally {
      await holder.query('rollback');
      holder.release();
      // The tick goes on once the lock is free: it ends before this test does.
      await tick?.catch(() => undefined);
    }
    // Free again, the busy tenant's is finished by the same tick.
    const done = await tick!;
    expect({ busyLive: await liveExtras(busy), busyPending: await pending(busy) }).toEqual({ busyLive: 0, busyPending: 0 });
    expect(done).toMatchObject({ tombstoned: 20, finished: 2 });
  }, 300_000);
});

describe("the reconcile tick beside a tenant whose workflow Temporal refuses to start (real Postgres, Temporal faked)", () => {
  const db = useTestDatabase();

  it("a failure acting on one tenant's connection is left to the next tick: every other tenant's work of the tick is done", async () => {
    const insertConnection = async (tenant: string, appKey: string) =>
      (await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', $2, 'active') returning id`, [tenant, appKey])).rows[0]!.id;
    // Tenant "refused" has a connection whose workflow is missing, and Temporal refuses its start.
    const refused = await insertConnection('refused', 'r-1');
    // Tenant "other" has a connection whose workflow is missing too, a pending delivery whose
    // workflow never started and a purge whose workflow never started.
    const other = await insertConnection('other', 'o-1');
    const { rows: deliveries } = await db.pool.query<{ id: string }>(
      `with hook as (insert into webhooks (tenant_id, url, event_types, secret) values ('other', 'https://example.com/hook', '{sync.failed}', 'x') returning id),
            event as (insert into webhook_events (tenant_id, event_type, payload, created_at) values ('other', 'sync.failed', '{}', now() - interval '10 minutes') returning id, created_at)
       insert into webhook_deliveries (webhook_id, event_id, created_at) select hook.id, event.id, event.created_at from hook, event returning id`,
    );
    const { rows: purges } = await db.pool.query<{ id: string }>(
      `insert into connection_purges (connection_id, tenant_id, created_at) values (gen_random_uuid(), 'other', now() - interval '10 minutes') returning id`,
    );
    const fake = fakeTemporal();
    const start = fake.client.workflow.start.bind(fake.client.workflow);
    const client = {
      workflow: {
        ...fake.client.workflow,
        list: fake.client.workflow.list.bind(fake.client.workflow),
        getHandle: fake.client.workflow.getHandle.bind(fake.client.workflow),
        async start(type: unknown, opts: { workflowId: string }) {
          if (opts.workflowId === connectionWorkflowId(refused)) throw new Error('namespace rate limit exceeded');
          return start(type as never, opts as never);
        },
      },
    } as unknown as Client;
    const { deps } = testActivityDeps({ pool: db.pool, temporal: client });

    const tick = await reconcileConnections(deps)({ at: Date.now() }).then(
      (result) => ({ ended: 'ok' as const, result }),
      (err: unknown) => ({ ended: 'failed' as const, error: (err as Error).message }),
    );
    expect(tick.ended, JSON.stringify(tick)).toBe('ok');
    expect(fake.started).toEqual(
      expect.arrayContaining([connectionWorkflowId(other), webhookDeliveryWorkflowId(deliveries[0]!.id), connectionPurgeWorkflowId(purges[0]!.id)]),
    );
  }, 120_000);
});
