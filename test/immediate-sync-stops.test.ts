// An immediate sync that is running when its connection stops being syncable: a disable stops it
// as it stops the connection's jobs, and its caller is told why. Real API, worker, Postgres and
// Temporal dev server, the demo provider slowed down so the sync is still running.
import { Client } from '@temporalio/client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { getConnection } from '../commands/connections';
import { CommandRefused } from '../commands/errors';
import { runImmediately } from '../commands/immediate-sync';
import { demoFetchLog, resetDemoFetchLog } from './helpers/demo';
import { startTestApi, type TestApi } from './helpers/api';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'immediate-sync-stops';

describe('an immediate sync whose connection stops while it runs', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi(stack, TASK_QUEUE);
  });
  afterAll(async () => {
    await api?.server.close();
  });
  beforeEach(() => resetDemoFetchLog());

  /** A connection written straight to the database: no workflow of its own runs, so only the immediate sync fetches. */
  async function slowConnection(appKey: string): Promise<string> {
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, $2) returning id`,
      [appKey, { resource_types: ['items'], records_per_resource: 5000, page_size: 50, latency_ms: 100 }],
    );
    return rows[0]!.id;
  }

  it('a disable stops it: no page is fetched after the disable answered, and the caller gets 409 connection_disabled', async () => {
    const id = await slowConnection('disable-mid-sync');
    const answer = api.call('POST', '/sync', { tenant_id: 'acme', app_key: 'disable-mid-sync', mode: 'full', immediate: true });
    await eventually(async () => (demoFetchLog.length >= 3 ? true : undefined));
    const disabled = await api.call('POST', `/connections/${id}/disable`);
    expect(disabled.status).toBe(200);
    const refused = await answer;
    const fetchedAtAnswer = demoFetchLog.length;
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    expect(refused.body.error.code).toBe('connection_disabled');
    // 100 pages of 100 ms: it stopped after a few, not at the end.
    expect(fetchedAtAnswer).toBeLessThan(50);
    const described = await stack.env.client.workflow.getHandle(`immediate-sync:${id}`).describe();
    expect(described.status.name).toBe('CANCELLED');
    await new Promise((r) => setTimeout(r, 500));
    expect(demoFetchLog.length).toBe(fetchedAtAnswer);
    // Its tenant's immediate slot is free again.
    expect((await stack.db.pool.query(`select 1 from immediate_sync_leases where connection_id = $1`, [id])).rows).toEqual([]);
  });

  it('one whose progress read fails at its deadline (Temporal refused the describe) is still cancelled, and keeps its place until its workflow has closed', async () => {
    const id = await slowConnection('describe-refused');
    // The same server, through a client whose describe is refused (as by an overloaded frontend).
    const refusing = new Client({
      connection: stack.env.client.connection,
      interceptors: { workflow: [{ describe: () => Promise.reject(new Error('describe refused: resource exhausted')) }] },
    });
    const deps = { ...stack.commands, temporal: refusing, immediateSyncTimeoutMs: 1000 };
    const answer = await runImmediately(deps, await getConnection(deps, id), 'full').then(
      () => 'finished',
      (err: unknown) => err,
    );
    // Read in this order: a workflow still running after the lease was gone ran uncounted.
    const leases = (await stack.db.pool.query(`select 1 from immediate_sync_leases where connection_id = $1`, [id])).rows.length;
    const handle = stack.env.client.workflow.getHandle(`immediate-sync:${id}`);
    const atAnswer = (await handle.describe()).status.name;
    expect({ leases, atAnswer }).not.toEqual({ leases: 0, atAnswer: 'RUNNING' });
    expect(answer).toBeInstanceOf(CommandRefused);
    expect(answer).toMatchObject({ reason: 'timeout', code: 'timeout', details: { fetched: { total_entities: 0, resources: [] } } });
    // Cancelled at the deadline (not left to run for its execution timeout), then its place freed.
    const closed = await eventually(async () => {
      const status = (await handle.describe()).status.name;
      return status === 'RUNNING' ? undefined : status;
    });
    expect(closed).toBe('CANCELLED');
    await eventually(async () => ((await stack.db.pool.query(`select 1 from immediate_sync_leases where connection_id = $1`, [id])).rows.length === 0 ? true : undefined));
  });
});
