// The records API as a consumer uses it: a loop that follows a connection's change feed with the
// cursor while syncs write, against a real API, worker, time-skipping server and Postgres.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDemoWorld } from '../connectors/demo';
import { startTestApi, type TestApi } from './helpers/api';
import { useWorkerStack } from './helpers/stack';

const TASK_QUEUE = 'records-feed';
const RECORDS = 10_000;
const DELETIONS = 100;

describe('records API: a consumer following the change feed', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let api: TestApi;
  const call = (method: string, path: string, body?: unknown) => api.call(method, path, body);

  beforeAll(async () => {
    api = await startTestApi(stack, TASK_QUEUE);
  });
  afterAll(async () => {
    await api?.server.close();
  });

  /** Requests a sync and answers its job id (an active job of that mode answers instead). */
  async function sync(connectionId: string, mode: 'incremental' | 'full'): Promise<string> {
    const answer = await call('POST', `/connections/${connectionId}/sync`, { mode });
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    return answer.body.job_id;
  }

  async function jobStatus(jobId: string): Promise<string> {
    const answer = await call('GET', `/jobs/${jobId}`);
    expect(answer.status).toBe(200);
    return answer.body.status;
  }

  async function waitForJob(jobId: string, whileWaiting: () => Promise<void> = async () => undefined): Promise<string> {
    for (;;) {
      const status = await jobStatus(jobId);
      if (status === 'completed' || status === 'failed' || status === 'cancelled') return status;
      await whileWaiting();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('a consumer polling through a 10,000-record full sync with 100 deletions and concurrent incremental changes ends with a copy of the live rows and saw each deletion once', async () => {
    const world = createDemoWorld('records-feed');
    const start = Date.now() - 86_400_000;
    for (let i = 0; i < RECORDS; i++) world.upsert('items', `item-${i}`, { n: i, version: 0 }, new Date(start + i));
    const created = await call('POST', '/connections', {
      tenant_id: 'acme', app_key: 'feed', provider: 'demo',
      config: { world: 'records-feed', page_size: 250, latency_ms: 20 }, schedule: { interval_seconds: 86_400 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id: string = created.body.id;

    // The consumer: a local copy keyed by resource type and external id, kept by the feed alone.
    const copy = new Map<string, unknown>();
    const deletionsSeen = new Map<string, number>();
    let cursor: string | undefined;
    let changesRead = 0;
    const poll = async (): Promise<boolean> => {
      const page = await call('GET', `/connections/${id}/records?limit=500${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      for (const item of page.body.items) {
        const key = `${item.resource_type}/${item.external_id}`;
        if (item.change === 'delete') {
          expect(item.deleted_at).not.toBeNull();
          copy.delete(key);
          deletionsSeen.set(key, (deletionsSeen.get(key) ?? 0) + 1);
        } else {
          copy.set(key, item.data);
        }
      }
      changesRead += page.body.items.length;
      cursor = page.body.next_cursor;
      return page.body.has_more;
    };
    const drain = async () => {
      while (await poll());
    };

    expect(await waitForJob(await sync(id, 'incremental'), async () => void (await poll()))).toBe('completed');
    await drain();
    expect(copy.size).toBe(RECORDS);

    // 100 records vanish at the provider; a full sync runs while records keep changing and
    // incremental syncs are requested beside it, and the consumer polls all along.
    const removed = Array.from({ length: DELETIONS }, (_, k) => `items/item-${k * 97 + 3}`);
    for (const key of removed) world.remove('items', key.slice('items/'.length));
    const readBefore = changesRead;
    const fullJob = await sync(id, 'full');
    let changed = 0;
    let touched = 0;
    let pollsDuringFull = 0;
    const fullStatus = await waitForJob(fullJob, async () => {
      for (let k = 0; k < 5; k++) {
        const i = 5_000 + ((touched++ * 37) % 5_000);
        if (!removed.includes(`items/item-${i}`)) world.upsert('items', `item-${i}`, { n: i, version: ++changed }, new Date());
      }
      await sync(id, 'incremental');
      await poll();
      pollsDuringFull += 1;
    });
    expect(fullStatus).toBe('completed');
    // The last changes reach the table, then the consumer catches up.
    expect(await waitForJob(await sync(id, 'incremental'))).toBe('completed');
    await drain();

    const { rows } = await stack.db.pool.query<{ key: string; data: unknown }>(
      `select resource_type || '/' || external_id as key, data from records where connection_id = $1 and deleted_at is null`,
      [id],
    );
    const live = new Map(rows.map((r) => [r.key, r.data]));
    expect(live.size).toBe(RECORDS - DELETIONS);
    expect(copy.size).toBe(live.size);
    for (const [key, data] of live) expect(copy.get(key), key).toEqual(data);
    expect([...deletionsSeen.keys()].sort()).toEqual([...removed].sort());
    expect([...deletionsSeen.values()].every((n) => n === 1)).toBe(true);
    // The consumer read while the syncs wrote: the changes arrived over several polls.
    expect(pollsDuringFull).toBeGreaterThan(2);
    expect(changed).toBeGreaterThan(0);
    expect(changesRead - readBefore).toBeGreaterThanOrEqual(DELETIONS + 1);
    console.log(`[records-feed] ${changesRead} changes read, ${pollsDuringFull} polls during the full sync, ${changed} records changed beside it`);
  });

  it('answers 404 for an unknown connection, 400 for a cursor it did not issue, and 410 once tombstones after the cursor were purged', async () => {
    expect((await call('GET', '/connections/00000000-0000-4000-8000-000000000000/records')).status).toBe(404);
    const created = await call('POST', '/connections', {
      tenant_id: 'acme', app_key: 'feed-edges', provider: 'demo', config: { records_per_resource: 3 }, schedule: { interval_seconds: 86_400 },
    });
    const id: string = created.body.id;
    const bad = await call('GET', `/connections/${id}/records?cursor=not-a-cursor`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
    // A consumer that read up to position 1; a purge then removed tombstones up to position 2.
    const cursor = Buffer.from(JSON.stringify({ seq: '1' })).toString('base64url');
    expect((await call('GET', `/connections/${id}/records?cursor=${cursor}`)).status).toBe(200);
    await stack.db.pool.query('update connections set feed_purged_seq = 2 where id = $1', [id]);
    const expired = await call('GET', `/connections/${id}/records?cursor=${cursor}`);
    expect(expired.status).toBe(410);
    expect(expired.body.error.code).toBe('cursor_expired');
    // Without a cursor the feed is read again from the start.
    expect((await call('GET', `/connections/${id}/records`)).status).toBe(200);
  });
});
