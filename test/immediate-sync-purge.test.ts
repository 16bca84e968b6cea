// An immediate sync that passed its first checks before its connection's deletion began, and then
// waited (for its tenant's lock, held by another of the tenant's commands), is refused when it
// gets there: it never starts a sync of a connection being purged. Real API, worker and Postgres
// on a time-skipping server.
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncImmediately } from '../activities/sync-immediately';
import { demoFetchLog, recordDemoFetches, resetDemoFetchLog } from './helpers/demo';
import { testActivityDeps } from './helpers/deps';
import { lockTenant } from '../db/models/tenant-limits';
import { startTestApi, type TestApi } from './helpers/api';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'immediate-sync-purge';

describe('an immediate sync racing a deletion (time-skipping)', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi(stack, TASK_QUEUE);
  });
  afterAll(async () => {
    await api?.server.close();
  });
  const q = <T = any>(sql: string, params: unknown[] = []) => stack.db.pool.query(sql, params).then((r) => r.rows as T[]);

  it('is refused 409 purge_in_progress, and no immediate-sync workflow starts', async () => {
    const created = await api.call('POST', '/connections', {
      tenant_id: 'acme', app_key: 'race', provider: 'demo',
      config: { resource_types: ['items'], records_per_resource: 5, page_size: 5 }, schedule: { interval_seconds: 86_400 },
    });
    expect(created.status).toBe(201);
    const id: string = created.body.id;
    await eventually(async () => ((await q(`select 1 from sync_jobs where connection_id = $1 and status = 'completed'`, [id])).length === 1 ? true : undefined));

    // Another command of the tenant holds its lock: the request passes its first checks, then waits.
    const holder = await stack.db.pool.connect();
    let answer: ReturnType<TestApi['call']>;
    try {
      await holder.query('begin');
      await lockTenant(holder, 'acme');
      answer = api.call('POST', '/sync', { tenant_id: 'acme', app_key: 'race', mode: 'full', immediate: true });
      await eventually(async () => ((await q(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).length > 0 ? true : undefined));
      const deletion = await api.call('DELETE', `/connections/${id}`);
      expect(deletion.status).toBe(202);
      await holder.query('commit');
    } finally {
      holder.release();
    }
    const refused = await answer;
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    expect(refused.body.error.code).toBe('purge_in_progress');
    const started = await stack.env.client.workflow.getHandle(`immediate-sync:${id}`).describe().then((d) => d.status.name, () => 'never started');
    expect(started).toBe('never started');
  });

  it('a run started after the deletion began (its request checked before) ends before any provider request', async () => {
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', 'late', $1) returning id`,
      [{ resource_types: ['items'], records_per_resource: 5, page_size: 5 }],
    );
    const id = rows[0]!.id;
    await stack.db.pool.query(`insert into connection_purges (connection_id, tenant_id) values ($1, 'acme')`, [id]);
    resetDemoFetchLog();
    recordDemoFetches(true);
    try {
      const { deps } = testActivityDeps({ pool: stack.db.pool });
      const run = new MockActivityEnvironment({ attempt: 1 }).run(syncImmediately(deps), { connectionId: id, mode: 'full' as const });
      await expect(run).rejects.toThrow(`connection ${id} is being deleted: not synced`);
      expect(demoFetchLog).toEqual([]);
      expect(await q(`select 1 from records where connection_id = $1`, [id])).toEqual([]);
    } finally {
      recordDemoFetches(false);
    }
  });
});
