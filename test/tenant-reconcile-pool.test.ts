// The reconcile tick's per-connection and per-job steps take their row's tenant's turns at the
// worker's pool, as the tenant's sync tasks do: the tick is one activity of no tenant, yet it acts
// on many connections and jobs at once, so however many of one tenant's jobs wait on their rows
// (here held by another transaction, as the tenant's long page store or deletion holds them) they
// hold at most the tenant's share of the activities' pool, and another tenant's statement runs
// meanwhile. Real Postgres; Temporal faked (no workflow of those jobs runs).
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileConnections } from '../activities/reconcile-connections';
import { createPool, type Pool } from '../db/pool';
import { tenantTurnsPool, workingFor } from '../workers/tenant-pool';
import { testActivityDeps } from './helpers/deps';
import { useTestDatabase } from './helpers/database';
import { fakeTemporal } from './helpers/fake-temporal';

/** The activities' pool: four connections, so a tenant's share is two. */
const POOL_MAX = 4;
/** The noisy tenant's abandoned jobs: more than the pool holds, fewer than the tick acts on at once. */
const JOBS = 6;

describe("the reconcile tick's steps on the worker's pool beside a tenant's held rows (real Postgres, Temporal faked)", () => {
  const db = useTestDatabase();
  let raw: Pool;

  beforeAll(() => {
    raw = createPool(db.url, POOL_MAX);
  });
  afterAll(async () => {
    await raw?.end();
  });

  it("hold at most a tenant's share of the pool while its jobs' rows are held: another tenant's statement runs meanwhile", async () => {
    // Tenant "noisy" has running jobs (a connection each) older than the tick's grace whose workflows are gone.
    const { rows } = await db.pool.query<{ id: string }>(
      `with made as (
         insert into connections (tenant_id, provider_slug, app_key, status)
         select 'noisy', 'demo', 'noisy-' || k, 'active' from generate_series(1, $1) k
         returning id)
       insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at, started_at, created_at)
       select made.id, 'noisy', 'incremental', 'api', 'running', now() - interval '10 minutes', now() - interval '10 minutes', now() - interval '10 minutes'
         from made
       returning id`,
      [JOBS],
    );
    const ids = rows.map((r) => r.id);
    // The tick asks the server about each job before it fails it: counted, to know every job's step began.
    const fake = fakeTemporal();
    let asked = 0;
    const client = {
      workflow: {
        ...fake.client.workflow,
        list: fake.client.workflow.list.bind(fake.client.workflow),
        start: fake.client.workflow.start.bind(fake.client.workflow),
        getHandle(workflowId: string) {
          const handle = fake.client.workflow.getHandle(workflowId);
          return {
            ...handle,
            async describe() {
              asked += 1;
              return handle.describe();
            },
          };
        },
      },
    } as unknown as Client;
    const pool = tenantTurnsPool(raw);
    const { deps } = testActivityDeps({ pool, temporal: client });
    const lockWaits = async () =>
      (await db.pool.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rowCount ?? 0;

    // The jobs' rows are held (a long transaction of the tenant's, say).
    const holder = await db.pool.connect();
    let tick: Promise<unknown> | undefined;
    try {
      await holder.query('begin');
      await holder.query('select 1 from sync_jobs where id = any($1) for update', [ids]);
      // The tick runs as the worker runs it: one activity of no tenant.
      tick = reconcileConnections(deps)({ at: Date.now() });
      // Every job's step began; those that hold connections wait for their rows (all four without
      // turns; two with them, the others waiting for the tenant's turn).
      for (let i = 0; i < 1500 && !((await lockWaits()) >= POOL_MAX || ((await lockWaits()) >= POOL_MAX / 2 && asked >= JOBS)); i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect({ inUse: raw.totalCount - raw.idleCount }).toEqual({ inUse: POOL_MAX / 2 });
      // Another tenant's statement finds a free connection.
      const other = await workingFor.run('quiet', () => pool.query<{ one: number }>('select 1 as one'));
      expect(other.rows[0]!.one).toBe(1);
      await holder.query('commit');
      expect(await tick).toMatchObject({ abandoned: JOBS });
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
      await tick?.catch(() => undefined);
    }
  }, 120_000);
});
