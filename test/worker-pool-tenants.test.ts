// One tenant's sync tasks cannot take the worker's database pool from the others: a tenant's
// statements in flight on the scheduled worker's pool are held to half of it, the rest wait their
// turn in the process (holding no connection), and another tenant's job runs meanwhile instead of
// failing to get a connection (which would count toward its circuit breaker). Real worker and
// activities on a pool of four connections, real Temporal dev server and Postgres; a tenant's page
// writes are kept in flight by its connections' change-feed locks, which the test holds.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { lockChangeFeed } from '../db/models/records';
import { demoFetchLog } from './helpers/demo';
import { useSmallPoolStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const QUEUE = 'pool-tenants';
/** The scheduled worker's pool: four connections, given up on after a second of waiting (30 s in production). */
const POOL_MAX = 4;
/** The heavy tenant's connections, each a task whose page writes wait on the lock: as many as the pool has. */
const HEAVY = ['h1', 'h2', 'h3', 'h4'];

describe("a tenant's statements on the worker's pool (real worker, real Postgres)", () => {
  const servers = useSmallPoolStack(QUEUE, POOL_MAX);

  const create = async (tenant: string, appKey: string, resource: string) => {
    const res = await servers.api.call('POST', '/connections', {
      tenant_id: tenant, app_key: appKey, provider: 'demo', config: { resource_types: [resource], records_per_resource: 3, page_size: 1 }, schedule: { interval_seconds: 86_400 },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.id as string;
  };
  const jobsOf = async (ids: string[]) =>
    (await servers.db.pool.query<{ status: string; last_error: string | null; failures: number }>(
      `select j.status, j.last_error,
              (select coalesce(max(f.consecutive_failures), 0)::int from connector_failure_stats f where f.connection_id = j.connection_id) as failures
         from sync_jobs j where j.connection_id = any($1::uuid[]) order by j.connection_id`,
      [ids],
    )).rows;

  it("runs another tenant's job while one tenant's page writes hold connections waiting on a lock, and every job completes", async () => {
    // Tenants of this attempt's own (the file is in the timing-sensitive group, where a failed test is tried once more).
    const attempt = randomUUID().slice(0, 8);
    const ids = HEAVY.map(() => '');
    const locker = await servers.db.pool.connect();
    let light = '';
    try {
      await locker.query('begin');
      // Every page write of the heavy tenant's connections waits for the feed locks this transaction holds.
      for (let i = 0; i < HEAVY.length; i++) {
        ids[i] = await create(`heavy-${attempt}`, `heavy-${HEAVY[i]}`, HEAVY[i]!);
        await lockChangeFeed(locker, ids[i]!);
      }
      // The heavy tenant holds what it can of the worker's pool: half of it (its share), each of
      // those connections a page write waiting for the locks (pg_stat_activity, this database's
      // sessions). Without turns its other tasks went on to take the rest.
      const lockWaiters = async () =>
        (await servers.db.pool.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rows[0]!.n;
      await eventually(async () => ((await lockWaiters()) >= POOL_MAX / 2 ? true : undefined), {
        describe: async () => ({ lockWaiters: await lockWaiters(), fetched: demoFetchLog.filter((f) => HEAVY.includes(f.resource)) }),
      });
      light = await create(`light-${attempt}`, 'light-1', 'items');
      // The light tenant's job ends one way or the other while the heavy tenant's writes still wait.
      await eventually(
        async () => {
          const [job] = await jobsOf([light]);
          return job && (!['queued', 'running'].includes(job.status) || job.failures > 0) ? job : undefined;
        },
        { timeoutMs: 50_000, describe: () => jobsOf([light]) },
      );
      expect(await jobsOf([light])).toEqual([{ status: 'completed', last_error: null, failures: 0 }]);
      await locker.query('commit');
    } finally {
      await locker.query('rollback').catch(() => undefined);
      locker.release();
    }
    // The heavy tenant's jobs were delayed, never failed: each completes once the locks are gone.
    await eventually(async () => ((await jobsOf(ids)).every((j) => j.status === 'completed') ? true : undefined), { describe: () => jobsOf(ids) });
    expect(await jobsOf(ids)).toEqual(HEAVY.map(() => ({ status: 'completed', last_error: null, failures: 0 })));
  }, 120_000);
});
