// An immediate sync runs longer than the API's deadline for a request's calls to Temporal
// (API_TEMPORAL_TIMEOUT_SECONDS): its wait for its workflow is bounded by
// IMMEDIATE_SYNC_TIMEOUT_SECONDS instead, and the progress read and cancel after that wait have a
// deadline of their own, so it is answered from its workflow (200, or 504 with its sync cancelled),
// not 503 when the request's deadline passes. Real API, worker, Postgres and Temporal dev server,
// the demo provider slowed down so the sync outlasts the request's deadline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from './helpers/api';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'immediate-sync-temporal-deadline';
/** The API's deadline for a request's calls to Temporal: far shorter than the syncs below take. */
const TEMPORAL_TIMEOUT_MS = 1000;

describe('an immediate sync that outlasts the request deadline for Temporal calls', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let finishing: TestApi;
  let cutShort: TestApi;
  beforeAll(async () => {
    finishing = await startTestApi(stack, TASK_QUEUE, { temporalTimeoutMs: TEMPORAL_TIMEOUT_MS, immediateSyncTimeoutMs: 60_000 });
    cutShort = await startTestApi(stack, TASK_QUEUE, { temporalTimeoutMs: TEMPORAL_TIMEOUT_MS, immediateSyncTimeoutMs: 2500 });
  });
  afterAll(async () => {
    await finishing?.server.close();
    await cutShort?.server.close();
  });

  /** A connection written straight to the database: no workflow of its own runs, so only the immediate sync fetches. */
  async function slowConnection(appKey: string, config: Record<string, unknown>): Promise<string> {
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, $2) returning id`,
      [appKey, { resource_types: ['items'], ...config }],
    );
    return rows[0]!.id;
  }

  it('is answered 200 with its counts', async () => {
    // 10 pages of 300 ms each.
    await slowConnection('outlasts-deadline', { records_per_resource: 500, page_size: 50, latency_ms: 300 });
    const res = await finishing.call('POST', '/sync', { tenant_id: 'acme', app_key: 'outlasts-deadline', mode: 'full', immediate: true });
    expect([res.status, res.body.error ?? null]).toEqual([200, null]);
    expect(res.body).toMatchObject({ immediate: true, mode: 'full', total_entities: 500 });
  });

  it('past IMMEDIATE_SYNC_TIMEOUT_SECONDS is answered 504 and its workflow is cancelled', async () => {
    // 100 pages of 100 ms each.
    const id = await slowConnection('cut-short', { records_per_resource: 5000, page_size: 50, latency_ms: 100 });
    const res = await cutShort.call('POST', '/sync', { tenant_id: 'acme', app_key: 'cut-short', mode: 'full', immediate: true });
    expect([res.status, res.body.error?.code]).toEqual([504, 'timeout']);
    const handle = stack.env.client.workflow.getHandle(`immediate-sync:${id}`);
    const closed = await eventually(async () => {
      const status = (await handle.describe()).status.name;
      return status === 'RUNNING' ? undefined : status;
    });
    expect(closed).toBe('CANCELLED');
  });
});
