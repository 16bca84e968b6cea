// Deleting a connection through the real API, worker, time-skipping server and Postgres: a sync in
// flight (a job, or an immediate sync) is cancelled, the purge workflow removes every row of the connection in batches, its
// workflows are closed, another connection of the same tenant keeps all of its rows, and a resume, PATCH or
// sync racing the DELETE is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from './helpers/api';
import { receiver as startReceiver, type FakeReceiver } from './helpers/fake-server';
import { recordHistory } from './helpers/histories';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'connection-delete';

describe('DELETE /connections/:id and its purge', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let api: TestApi;
  let receiver: FakeReceiver;

  beforeAll(async () => {
    api = await startTestApi(stack, TASK_QUEUE, { webhookAllowPrivate: true });
    // A webhook receiver that accepts everything, so the connection has delivered events too.
    receiver = await startReceiver(() => 200);
  });
  afterAll(async () => {
    await api?.server.close();
    await receiver?.close();
  });

  const q = <T = any>(sql: string, params: unknown[] = []) => stack.db.pool.query(sql, params).then((r) => r.rows as T[]);

  async function created(method: string, path: string, body: unknown, status: number): Promise<any> {
    const res = await api.call(method, path, body);
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    return res.body;
  }

  async function workflowStatus(workflowId: string): Promise<string> {
    return (await stack.env.client.workflow.getHandle(workflowId).describe()).status.name;
  }

  /**
   * Rows of each table (but the purge's own status row and the audit log, which record the
   * deletion) whose text holds any of `ids`: every column of every row is searched, so a row that
   * only mentions the connection in a JSON payload counts too.
   */
  async function rowsMentioning(ids: string[]): Promise<Record<string, number>> {
    const tables = await q<{ name: string }>(
      `select tablename as name from pg_tables where schemaname = 'public' and tablename not in ('connection_purges', 'audit_log', 'pgmigrations') order by 1`,
    );
    const found: Record<string, number> = {};
    for (const { name } of tables) {
      const [row] = await q<{ n: number }>(`select count(*)::int as n from "${name}" t where t::text like any($1)`, [ids.map((id) => `%${id}%`)]);
      if (row!.n > 0) found[name] = row!.n;
    }
    return found;
  }

  it('cancels the sync in flight, deletes every row of the connection in batches, closes its workflow, and keeps the other connections', async () => {
    await created('POST', '/webhooks', { tenant_id: 'acme', url: receiver.url, event_types: ['sync.completed', 'sync.failed'] }, 201);
    const keeper = await created('POST', '/connections', {
      tenant_id: 'acme', app_key: 'keeper', provider: 'demo', config: { records_per_resource: 20, page_size: 10 }, schedule: { interval_seconds: 86_400 },
    }, 201);
    const victim = await created('POST', '/connections', {
      tenant_id: 'acme', app_key: 'victim', provider: 'demo', credentials: { token: 'victim-token' },
      config: { records_per_resource: 1500, page_size: 50 }, schedule: { interval_seconds: 86_400 },
    }, 201);
    // Both bootstrap syncs finish; their sync.completed events are delivered.
    await eventually(async () => {
      const rows = await q(`select 1 from sync_jobs where connection_id = any($1) and status = 'completed'`, [[keeper.id, victim.id]]);
      return rows.length === 2 ? true : undefined;
    });
    await eventually(async () => ((await q(`select 1 from webhook_deliveries where status = 'delivered'`)).length >= 2 ? true : undefined));

    // A slow full sync of the victim, caught while it runs.
    await created('PATCH', `/connections/${victim.id}`, { config: { records_per_resource: 3000, page_size: 20, latency_ms: 25 } }, 200);
    const running = await created('POST', `/connections/${victim.id}/sync`, { mode: 'full' }, 202);
    const jobId: string = running.job_id;
    await eventually(async () => {
      const [row] = await q<{ status: string; n: number }>(
        `select j.status, (select count(*)::int from sync_seen s join sync_tasks t on t.id = s.task_id where t.job_id = j.id) as n from sync_jobs j where j.id = $1`,
        [jobId],
      );
      return row?.status === 'running' && row.n > 0 ? true : undefined;
    });

    // Everything that names the victim, collected before it goes.
    const jobIds = (await q<{ id: string }>('select id from sync_jobs where connection_id = $1', [victim.id])).map((r) => r.id);
    const taskIds = (await q<{ id: string }>('select id from sync_tasks where job_id = any($1)', [jobIds])).map((r) => r.id);
    const eventIds = (await q<{ id: string }>('select id from webhook_events where connection_id = $1', [victim.id])).map((r) => r.id);
    expect(eventIds.length).toBeGreaterThan(0);
    const deliveryIds = (await q<{ id: string }>('select id from webhook_deliveries where event_id = any($1)', [eventIds])).map((r) => r.id);
    const ids = [victim.id, ...jobIds, ...taskIds, ...eventIds, ...deliveryIds];
    const before = await rowsMentioning(ids);
    expect(Object.keys(before).sort()).toEqual(expect.arrayContaining(['connections', 'records', 'sync_jobs', 'sync_seen', 'sync_state', 'sync_tasks', 'sync_job_logs', 'webhook_events', 'webhook_deliveries', 'webhook_delivery_attempts']));
    const keeperBefore = await rowsMentioning([keeper.id]);

    const purge = await created('DELETE', `/connections/${victim.id}`, undefined, 202);
    expect(purge).toMatchObject({ connection_id: victim.id, tenant_id: 'acme', workflow_id: `connection-purge:${purge.id}` });
    expect(['pending', 'running']).toContain(purge.status);
    // A repeated DELETE answers the same purge while it runs (404 once the connection is gone).
    const again = await api.call('DELETE', `/connections/${victim.id}`);
    if (again.status === 202) expect(again.body.id).toBe(purge.id);
    else expect(again.status).toBe(404);

    const done = await eventually(async () => {
      const res = await api.call('GET', `/purges/${purge.id}`);
      return res.body.status === 'completed' ? res.body : undefined;
    });
    expect(done.deleted_rows).toBeGreaterThan(3000);
    expect(done.finished_at).toEqual(expect.any(String));

    // Nothing of the connection remains in any table; the id is 404.
    expect(await rowsMentioning(ids)).toEqual({});
    expect((await api.call('GET', `/connections/${victim.id}`)).status).toBe(404);
    expect((await api.call('GET', `/jobs/${jobId}`)).status).toBe(404);
    expect((await api.call('DELETE', `/connections/${victim.id}`)).status).toBe(404);
    // The sync in flight was cancelled, not left running; the connection's workflow is closed.
    expect(await workflowStatus(`sync-job:${jobId}`)).not.toBe('RUNNING');
    expect(await stack.env.client.workflow.getHandle(`sync-job:${jobId}`).result()).toMatchObject({ jobId, status: 'cancelled' });
    expect(await workflowStatus(`connection:${victim.id}`)).not.toBe('RUNNING');
    expect(await workflowStatus(`connection-purge:${purge.id}`)).toBe('COMPLETED');
    await recordHistory(stack.env.client, 'connection-purge', `connection-purge:${purge.id}`);
    // The other connection of the tenant kept every row.
    expect(await rowsMentioning([keeper.id])).toEqual(keeperBefore);
    expect(keeperBefore.records).toBeGreaterThan(0);
    expect(await workflowStatus(`connection:${keeper.id}`)).toBe('RUNNING');
  });

  it('cancels an immediate sync in flight (no job row names it) before purging', async () => {
    const victim = await created('POST', '/connections', {
      tenant_id: 'acme', app_key: 'immediate-victim', provider: 'demo',
      config: { resource_types: ['items'], records_per_resource: 5, page_size: 5 }, schedule: { interval_seconds: 86_400 },
    }, 201);
    await eventually(async () => ((await q(`select 1 from sync_jobs where connection_id = $1 and status = 'completed'`, [victim.id])).length === 1 ? true : undefined));
    // Slow from here on: an immediate sync of 400 pages, 100 ms each.
    await created('PATCH', `/connections/${victim.id}`, { config: { resource_types: ['items'], records_per_resource: 400, page_size: 1, latency_ms: 100 } }, 200);
    const answer = api.call('POST', '/sync', { tenant_id: 'acme', app_key: 'immediate-victim', mode: 'full', immediate: true });
    const immediate = stack.env.client.workflow.getHandle(`immediate-sync:${victim.id}`);
    await eventually(async () => ((await immediate.describe().catch(() => null))?.status.name === 'RUNNING' ? true : undefined));
    // In flight: it has stored a page past the first sync's five records (a DELETE before its
    // activity began would have it refuse at its first check, failed rather than cancelled).
    await eventually(async () => ((await q(`select 1 from records where connection_id = $1`, [victim.id])).length > 5 ? true : undefined));

    const purge = await created('DELETE', `/connections/${victim.id}`, undefined, 202);
    await eventually(async () => ((await api.call('GET', `/purges/${purge.id}`)).body.status === 'completed' ? true : undefined));
    // Stopped, not left to page 400 times after its connection is gone; the caller was not told it succeeded.
    expect((await immediate.describe()).status.name).toBe('CANCELLED');
    expect((await answer).status).not.toBe(200);
    expect(await rowsMentioning([victim.id])).toEqual({});
  });

  it("keeps an event whose delivery is still pending (the deletion's own connection.disabled) until it is delivered", async () => {
    // A receiver that is down (500) until the purge has finished.
    let up = false;
    const down = await startReceiver(() => (up ? 200 : 500));
    try {
      const hook = await created('POST', '/webhooks', {
        tenant_id: 'pending-at-delete', url: down.url, event_types: ['connection.disabled'],
      }, 201);
      const victim = await created('POST', '/connections', {
        tenant_id: 'pending-at-delete', app_key: 'victim', provider: 'demo', config: { records_per_resource: 5, page_size: 5 }, schedule: { interval_seconds: 86_400 },
      }, 201);
      const purge = await created('DELETE', `/connections/${victim.id}`, undefined, 202);
      await eventually(async () => ((await api.call('GET', `/purges/${purge.id}`)).body.status === 'completed' ? true : undefined));
      expect((await api.call('GET', `/connections/${victim.id}`)).status).toBe(404);
      // The connection is gone; its connection.disabled is still being delivered.
      const deliveries = await api.call('GET', `/webhooks/${hook.id}/deliveries`);
      expect(deliveries.body.items.map((d: any) => [d.event_type, d.status])).toEqual([['connection.disabled', 'pending']]);
      up = true;
      expect(await stack.env.client.workflow.getHandle(`webhook-delivery:${deliveries.body.items[0].id}`).result()).toBe('delivered');
      const last = down.received.at(-1)!;
      expect(last.answered).toBe(200);
      expect(JSON.parse(last.body)).toMatchObject({ type: 'connection.disabled', data: { connection_id: victim.id } });
    } finally {
      await down.close();
    }
  });

  it('a resume, PATCH or sync arriving while a DELETE is under way is refused (409 purge_in_progress), never re-activating the connection', async () => {
    const victim = await created('POST', '/connections', {
      tenant_id: 'acme', app_key: 'racing', provider: 'demo', config: { records_per_resource: 1, page_size: 1 }, schedule: { interval_seconds: 86_400 },
    }, 201);
    // Another transaction holds the connection row, so the DELETE stops in the middle of its work
    // (the step that writes the row); whatever the DELETE has begun is then not yet committed.
    const holder = await stack.db.pool.connect();
    let released = false;
    try {
      await holder.query('begin');
      await holder.query('select 1 from connections where id = $1 for no key update', [victim.id]);
      const [{ pid }] = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows as [{ pid: number }];
      const deleting = api.call('DELETE', `/connections/${victim.id}`);
      // The DELETE waits for the held row: its work has begun.
      await eventually(async () => ((await q('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [pid])).length > 0 ? true : undefined));
      const racing = [
        api.call('POST', `/connections/${victim.id}/resume`),
        api.call('PATCH', `/connections/${victim.id}`, { config: { records_per_resource: 2, page_size: 1 } }),
        api.call('POST', `/connections/${victim.id}/sync`, { mode: 'full' }),
      ];
      // They reached the database and wait there (on the DELETE or on the held row) before it goes on.
      await eventually(async () => ((await q(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).length >= 3 ? true : undefined));
      await holder.query('commit');
      released = true;
      const deleted = await deleting;
      expect(deleted.status, JSON.stringify(deleted.body)).toBe(202);
      for (const res of await Promise.all(racing)) {
        expect([res.status, res.body.error]).toEqual([409, { code: 'purge_in_progress', message: expect.stringContaining('being deleted'), purge_id: deleted.body.id }]);
      }
      await eventually(async () => ((await api.call('GET', `/purges/${deleted.body.id}`)).body.status === 'completed' ? true : undefined));
      expect(await q('select 1 from connections where id = $1', [victim.id])).toEqual([]);
      expect(await q(`select 1 from sync_jobs where trigger = 'api' and connection_id = $1`, [victim.id])).toEqual([]);
    } finally {
      if (!released) await holder.query('rollback');
      holder.release();
    }
  });

  it('the reconcile tick starts a purge whose workflow was never started (the API died in between)', async () => {
    const orphan = await created('POST', '/connections', {
      tenant_id: 'acme', app_key: 'orphan', provider: 'demo', config: { records_per_resource: 5, page_size: 5 }, schedule: { interval_seconds: 86_400 },
    }, 201);
    await created('POST', `/connections/${orphan.id}/disable`, undefined, 200);
    const [purge] = await q<{ id: string }>(
      `insert into connection_purges (connection_id, tenant_id, created_at) values ($1, 'acme', now() - interval '2 minutes') returning id`,
      [orphan.id],
    );
    await stack.tick();
    await eventually(async () => ((await api.call('GET', `/purges/${purge!.id}`)).body.status === 'completed' ? true : undefined));
    expect(await rowsMentioning([orphan.id])).toEqual({});
  });

  it('the reconcile tick restarts a purge left running without its workflow (terminated, or lost with its server)', async () => {
    const orphan = await created('POST', '/connections', {
      tenant_id: 'acme', app_key: 'orphan-running', provider: 'demo', config: { records_per_resource: 5, page_size: 5 }, schedule: { interval_seconds: 86_400 },
    }, 201);
    await created('POST', `/connections/${orphan.id}/disable`, undefined, 200);
    // Its workflow had stopped the connection's work (the purge is running) and then ended before
    // it deleted anything: no connection-purge workflow runs it any more.
    const [purge] = await q<{ id: string }>(
      `insert into connection_purges (connection_id, tenant_id, status, created_at) values ($1, 'acme', 'running', now() - interval '2 minutes') returning id`,
      [orphan.id],
    );
    const handle = stack.env.client.workflow.getHandle(`connection-purge:${purge!.id}`);
    await expect(handle.describe()).rejects.toThrow(/not found/i);
    await stack.tick();
    // The tick started its workflow again (it may have completed already).
    await expect(handle.describe().then((d) => d.workflowId)).resolves.toBe(`connection-purge:${purge!.id}`);
    await eventually(async () => ((await api.call('GET', `/purges/${purge!.id}`)).body.status === 'completed' ? true : undefined));
    expect(await rowsMentioning([orphan.id])).toEqual({});
  });
});
