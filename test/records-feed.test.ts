// The records API as a consumer uses it: a loop that follows a connection's change feed with the
// cursor while syncs write, against a real API, worker, time-skipping server and Postgres.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finishJob } from '../activities/finish-job';
import { createDemoWorld } from './helpers/demo';
import { purgeTombstonesBatch } from '../db/models/records';
import { feedCursors, withSealedCursor } from '../lib/feed-cursors';
import { TEST_KEYRING, testActivityDeps } from './helpers/deps';
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
    // Named anew each attempt: a retry (this file's group retries a failed test once) starts with
    // a world and a connection of its own, not the first attempt's (its app_key would conflict).
    const attempt = randomUUID().slice(0, 8);
    const world = createDemoWorld(`records-feed-${attempt}`);
    const start = Date.now() - 86_400_000;
    for (let i = 0; i < RECORDS; i++) world.upsert('items', `item-${i}`, { n: i, version: 0 }, new Date(start + i));
    const created = await call('POST', '/connections', {
      tenant_id: 'acme', app_key: `feed-${attempt}`, provider: 'demo',
      config: { world: `records-feed-${attempt}`, page_size: 250, latency_ms: 20 }, schedule: { interval_seconds: 86_400 },
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
    // 5 s alone on a 2-core host; three times the default on a host three times slower, loaded.
  }, 180_000);

  it('answers 404 for an unknown connection and 400 for a cursor it did not issue', async () => {
    expect((await call('GET', '/connections/00000000-0000-4000-8000-000000000000/records')).status).toBe(404);
    const id = await feedConnection();
    const bad = await call('GET', `/connections/${id}/records?cursor=not-a-cursor`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
  });

  /** A connection row of its own tenant (no workflow: the test writes its records). */
  async function feedConnection(): Promise<string> {
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('feed-' || gen_random_uuid(), 'demo', 'feed', 'paused') returning id`,
    );
    return rows[0]!.id;
  }

  /** Writes a live record, or a tombstone deleted long ago (purgeable), at the next feed position; answers it. */
  async function write(connectionId: string, resourceType: string, externalId: string, tombstone = false): Promise<string> {
    const { rows } = await stack.db.pool.query<{ change_seq: string }>(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, deleted_at, change)
       values ($1, $2, $3, '{}', now(), $4, $5)
       on conflict (connection_id, resource_type, external_id) do update
          set deleted_at = excluded.deleted_at, change = excluded.change, change_seq = nextval('records_change_seq')
       returning change_seq::text`,
      [connectionId, resourceType, externalId, tombstone ? new Date(Date.now() - 90 * 86_400_000) : null, tombstone ? 'delete' : 'insert'],
    );
    return rows[0]!.change_seq;
  }

  const purge = () => purgeTombstonesBatch(stack.db.pool, new Date(Date.now() - 86_400_000), 1000);

  /** Reads the whole feed from `cursor` in pages of `limit`; answers the items and the last answer. */
  async function readAll(connectionId: string, opts: { limit: number; resourceType?: string; cursor?: string }) {
    const items: any[] = [];
    let cursor = opts.cursor;
    for (let page = 0; page < 100; page++) {
      const query = `limit=${opts.limit}${opts.resourceType ? `&resource_type=${opts.resourceType}` : ''}${cursor ? `&cursor=${cursor}` : ''}`;
      const answer = await call('GET', `/connections/${connectionId}/records?${query}`);
      if (answer.status !== 200) return { items, answer, cursor };
      items.push(...answer.body.items);
      cursor = answer.body.next_cursor;
      if (!answer.body.has_more) return { items, answer, cursor };
    }
    throw new Error('the feed never ended');
  }

  it('a fresh reader after a tombstone purge pages to the end (no 410 on page 2)', async () => {
    const id = await feedConnection();
    for (const key of ['a', 'b', 'c', 'd', 'e']) await write(id, 'items', key);
    // The newest positions were deletions, purged before anyone read them.
    await write(id, 'items', 'd', true);
    await write(id, 'items', 'e', true);
    expect(await purge()).toBe(2);
    const { items, answer } = await readAll(id, { limit: 2 });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(items.map((i) => i.external_id)).toEqual(['a', 'b', 'c']);
  });

  it('expires a cursor once a purge passed it after it was issued, and only then; a reader of another resource type is not expired', async () => {
    const id = await feedConnection();
    for (const key of ['a', 'b', 'c']) await write(id, 'items', key);
    await write(id, 'others', 'x');
    // Both readers stop after one page: the unfiltered one at 'b', the items-only one at 'b' too.
    const all = await call('GET', `/connections/${id}/records?limit=2`);
    const itemsOnly = await call('GET', `/connections/${id}/records?limit=2&resource_type=items`);
    expect([all.status, itemsOnly.status]).toEqual([200, 200]);
    // 'x' (of `others`) is deleted and purged: the unfiltered reader had not read its deletion yet.
    await write(id, 'others', 'x', true);
    expect(await purge()).toBe(1);
    const itemsNext = await readAll(id, { limit: 2, resourceType: 'items', cursor: itemsOnly.body.next_cursor });
    expect(itemsNext.answer.status, JSON.stringify(itemsNext.answer.body)).toBe(200);
    expect(itemsNext.items.map((i) => i.external_id)).toEqual(['c']);
    const allNext = await call('GET', `/connections/${id}/records?limit=2&cursor=${all.body.next_cursor}`);
    expect(allNext.status).toBe(410);
    expect(allNext.body.error.code).toBe('cursor_expired');
    // Nothing but the code and words: no position of the sequence every tenant's changes share.
    expect(Object.keys(allNext.body.error)).toEqual(['code', 'message']);
    expect(allNext.body.error.message).not.toMatch(/\d/);
    // An items-reader is expired by an items purge past its cursor.
    const before = itemsNext.cursor!;
    await write(id, 'items', 'a', true);
    await write(id, 'items', 'z');
    const fresh = await readAll(id, { limit: 10, resourceType: 'items' });
    expect(fresh.items.map((i) => [i.external_id, i.change])).toEqual([['b', 'insert'], ['c', 'insert'], ['a', 'delete'], ['z', 'insert']]);
    expect(await purge()).toBe(1);
    const expired = await call('GET', `/connections/${id}/records?resource_type=items&cursor=${before}`);
    expect(expired.status).toBe(410);
    // A plain cursor (as issued before cursors were sealed, without a purge epoch) is never read,
    // wherever it stands: 410, read from the start.
    const legacy = (seq: string) => Buffer.from(JSON.stringify({ seq })).toString('base64url');
    const head = await write(id, 'items', 'head');
    expect((await call('GET', `/connections/${id}/records?cursor=${legacy(head)}`)).status).toBe(410);
    expect((await call('GET', `/connections/${id}/records?cursor=${legacy('1')}`)).status).toBe(410);
    // A cursor issued after that purge is not expired by it; without a cursor the feed is read again from the start.
    expect((await call('GET', `/connections/${id}/records?resource_type=items&cursor=${fresh.cursor}`)).status).toBe(200);
    expect((await call('GET', `/connections/${id}/records`)).status).toBe(200);
  });

  it("a cursor of one connection's feed is refused (400) on another connection's feed, which it would silently read past", async () => {
    const mine = await feedConnection();
    const theirs = await feedConnection();
    // The other feed's first change comes before this one's last position: the global sequence
    // orders the changes of every connection.
    await write(theirs, 'items', 'early');
    for (const key of ['a', 'b', 'c']) await write(mine, 'items', key);
    await write(theirs, 'items', 'late');
    const read = await readAll(mine, { limit: 10 });
    expect(read.items.map((i) => i.external_id)).toEqual(['a', 'b', 'c']);
    const misused = await call('GET', `/connections/${theirs}/records?cursor=${read.cursor}`);
    expect(misused.status, JSON.stringify(misused.body)).toBe(400);
    expect(misused.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/another connection/) });
    // Its own feed takes it, in any spelling of the connection's id.
    expect((await call('GET', `/connections/${mine}/records?cursor=${read.cursor}`)).status).toBe(200);
    expect((await call('GET', `/connections/${mine.toUpperCase()}/records?cursor=${read.cursor}`)).status).toBe(200);
  });

  it("a cursor of one resource type's feed is refused (400) on the whole feed or another type's, which it would silently read past", async () => {
    const id = await feedConnection();
    await write(id, 'items', 'a');
    await write(id, 'others', 'x');
    await write(id, 'items', 'b');
    const items = await readAll(id, { limit: 10, resourceType: 'items' });
    expect(items.items.map((i) => i.external_id)).toEqual(['a', 'b']);
    // 'x' came before the items cursor's position: read on with it, every type's reader would pass over it.
    for (const scope of ['', '&resource_type=others']) {
      const misused = await call('GET', `/connections/${id}/records?cursor=${items.cursor}${scope}`);
      expect(misused.status, `${scope}: ${JSON.stringify(misused.body)}`).toBe(400);
      expect(misused.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/resource type/) });
    }
    // Its own type's reader takes it; a cursor of the whole feed serves a reader of one type too.
    expect((await call('GET', `/connections/${id}/records?resource_type=items&cursor=${items.cursor}`)).status).toBe(200);
    const all = await readAll(id, { limit: 10 });
    expect(all.items.map((i) => i.external_id)).toEqual(['a', 'x', 'b']);
    expect((await call('GET', `/connections/${id}/records?resource_type=others&cursor=${all.cursor}`)).status).toBe(200);
  });

  it('a reader of a resource type with the longest name the filter takes (200 characters) can read on with the cursors it is given', async () => {
    const id = await feedConnection();
    const type = 'r'.repeat(200);
    await write(id, type, 'a');
    await write(id, type, 'b');
    const read = await readAll(id, { limit: 1, resourceType: type });
    expect(read.answer.status, JSON.stringify(read.answer.body)).toBe(200);
    expect(read.items.map((i) => i.external_id)).toEqual(['a', 'b']);
  });

  it("the cursor of a sync.completed event is not expired when the connection's newest positions were purged", async () => {
    const id = await feedConnection();
    const { rows: conn } = await stack.db.pool.query<{ tenant_id: string }>('select tenant_id from connections where id = $1', [id]);
    await stack.db.pool.query(
      `insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'http://127.0.0.1:9/', '{sync.completed}', 'whsec_x')`,
      [conn[0]!.tenant_id],
    );
    await write(id, 'items', 'a');
    await write(id, 'items', 'b', true);
    expect(await purge()).toBe(1);
    const { rows: job } = await stack.db.pool.query<{ id: string }>(
      `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at) values ($1, $2, 'incremental', 'api', 'running', now()) returning id`,
      [id, conn[0]!.tenant_id],
    );
    // No worker polls this queue: the delivery is written, not sent.
    const { deps } = testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue: 'records-feed-nobody' });
    expect(await finishJob(deps)({ jobId: job[0]!.id, outcome: 'completed', at: Date.now(), startedAt: Date.now() })).toBe('completed');
    const { rows: event } = await stack.db.pool.query<{ payload: { cursor: string } }>(
      `select payload from webhook_events where connection_id = $1 and event_type = 'sync.completed'`,
      [id],
    );
    // The cursor as it is delivered: sealed.
    const cursor = withSealedCursor(event[0]!.payload, feedCursors(TEST_KEYRING), id).cursor as string;
    const answer = await call('GET', `/connections/${id}/records?cursor=${cursor}`);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.items).toEqual([]);
    // It is a position in this connection's feed only.
    expect((await call('GET', `/connections/${await feedConnection()}/records?cursor=${cursor}`)).status).toBe(400);
  });
});
