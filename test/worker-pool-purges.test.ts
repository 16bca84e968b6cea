// One tenant's connection purges cannot take the worker's database pool from the others: a purge's
// statements are its tenant's work, held to the tenant's share of the scheduled worker's pool as its
// sync tasks are, so another tenant's job runs while the purges' deletes wait, instead of failing to
// get a connection (which counts toward its circuit breaker). Real worker and activities on a pool of
// four connections, real Temporal dev server and Postgres; the purges' deletes are kept waiting by
// row locks on their records, which the test holds (as a large table's deletes take long).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { activityTenant } from '../activities/activity-tenant';
import { connectionPurgeWorkflowId } from '../temporal/purge';
import { useSmallPoolStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const QUEUE = 'pool-purges';
/** The scheduled worker's pool: four connections, given up on after a second of waiting (30 s in production). */
const POOL_MAX = 4;
/** The heavy tenant's connections, each deleted: as many purges as the pool has connections. */
const HEAVY = 4;

describe("a tenant's purges on the worker's pool (real worker, real Postgres)", () => {
  const servers = useSmallPoolStack(QUEUE, POOL_MAX);

  const q = <T = any>(sql: string, params: unknown[] = []) => servers.db.pool.query(sql, params).then((r) => r.rows as T[]);
  const create = async (tenant: string, appKey: string, status: 'active' | 'paused') => {
    const res = await servers.api.call('POST', '/connections', {
      tenant_id: tenant, app_key: appKey, provider: 'demo', status, config: { resource_types: ['items'], records_per_resource: 3, page_size: 1 }, schedule: { interval_seconds: 86_400 },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.id as string;
  };

  it("tells a purge's tenant by its workflow id", async () => {
    const id = await create('purged-tenant', `told-${randomUUID().slice(0, 8)}`, 'paused');
    const [purge] = await q<{ id: string }>(`insert into connection_purges (connection_id, tenant_id, status) values ($1, 'purged-tenant', 'completed') returning id`, [id]);
    const tenantOf = activityTenant({ pool: servers.db.pool });
    const args = [{ purgeId: purge!.id, connectionId: id }];
    for (const activityType of ['quiesceConnection', 'purgeConnectionBatch']) {
      expect(await tenantOf({ activityType, workflowId: connectionPurgeWorkflowId(purge!.id), args }), activityType).toBe('purged-tenant');
    }
    expect(await tenantOf({ activityType: 'purgeConnectionBatch', workflowId: connectionPurgeWorkflowId(randomUUID()), args })).toBe('');
  });

  it("runs another tenant's job while one tenant's purges hold connections waiting on a lock, and every purge completes", async () => {
    const attempt = randomUUID().slice(0, 8);
    const heavy: string[] = [];
    for (let i = 0; i < HEAVY; i++) heavy.push(await create(`heavy-${attempt}`, `heavy-${i}`, 'paused'));
    await q(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, fetched_at)
       select c, 'items', 'r-' || n, '{}'::jsonb, now(), now() from unnest($1::uuid[]) c, generate_series(1, 5) n`,
      [heavy],
    );
    const locker = await servers.db.pool.connect();
    const purges: string[] = [];
    let light = '';
    const lightJob = async () =>
      (await q<{ status: string; last_error: string | null; failures: number }>(
        `select j.status, j.last_error,
                (select coalesce(max(f.consecutive_failures), 0)::int from connector_failure_stats f where f.connection_id = j.connection_id) as failures
           from sync_jobs j where j.connection_id = $1`,
        [light],
      ))[0];
    try {
      await locker.query('begin');
      await locker.query('select 1 from records where connection_id = any($1::uuid[]) for update', [heavy]);
      for (const id of heavy) {
        const res = await servers.api.call('DELETE', `/connections/${id}`);
        expect(res.status, JSON.stringify(res.body)).toBe(202);
        purges.push(res.body.id);
      }
      // The heavy tenant's purges hold what they can of the worker's pool, each connection a delete
      // waiting for the row locks (pg_stat_activity, this database's sessions): half of it, their
      // tenant's share. Without it they took every connection.
      const lockWaiters = async () =>
        (await q<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`))[0]!.n;
      await eventually(async () => ((await lockWaiters()) >= POOL_MAX / 2 ? true : undefined), { describe: async () => ({ lockWaiters: await lockWaiters() }) });
      light = await create(`light-${attempt}`, 'light-1', 'active');
      // The light tenant's first job ends one way or the other while the purges still wait.
      await eventually(
        async () => {
          const job = await lightJob();
          return job && (!['queued', 'running'].includes(job.status) || job.failures > 0) ? job : undefined;
        },
        { timeoutMs: 50_000, describe: () => lightJob() },
      );
      expect(await lightJob()).toEqual({ status: 'completed', last_error: null, failures: 0 });
      await locker.query('commit');
    } finally {
      await locker.query('rollback').catch(() => undefined);
      locker.release();
    }
    // The purges were delayed, never lost: each completes once the locks are gone.
    await eventually(async () => ((await q(`select 1 from connection_purges where id = any($1) and status <> 'completed'`, [purges])).length === 0 ? true : undefined));
    expect(await q('select 1 from connections where id = any($1)', [heavy])).toEqual([]);
  }, 120_000);
});
