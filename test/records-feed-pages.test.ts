// The records feed's pages and cursors at their edges, against the real API app (in-process, no
// Temporal behind it: a feed read never reaches Temporal) and a real Postgres: a page is bounded in
// bytes as well as in records, and a cursor naming a position the feed never issued is refused
// rather than silently read past the changes written up to it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { feedCursors } from '../lib/feed-cursors';
import { purgeTombstonesBatch } from '../db/models/records';
import { apiAppWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING } from './helpers/deps';

/** The feed's cursors as the test API seals them: these tests forge positions with its key. */
const feedCursor = feedCursors(TEST_KEYRING);

const KIB = 1024;

describe('records feed: pages and cursors at their edges', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** GET on an API app with `overrides`; answers the status and the parsed body. */
  async function get(path: string, overrides: Record<string, unknown> = {}): Promise<{ status: number; body: any; bytes: number }> {
    const app = apiAppWithoutTemporal(db.pool, 'records-feed-pages', overrides);
    const res = await app.request(path, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    const text = await res.text();
    return { status: res.status, body: JSON.parse(text), bytes: Buffer.byteLength(text) };
  }

  /** A connection row of its own tenant (no workflow: the test writes its records). */
  async function feedConnection(): Promise<string> {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('pages-' || gen_random_uuid(), 'demo', 'feed', 'paused') returning id`,
    );
    return rows[0]!.id;
  }

  /** Writes a record (a tombstone deleted long ago, purgeable, when `tombstone`) at the next feed position; answers that position. */
  async function write(connectionId: string, externalId: string, data: unknown = {}, tombstone = false): Promise<string> {
    const { rows } = await db.pool.query<{ change_seq: string }>(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, deleted_at, change)
       values ($1, 'items', $2, $3, now(), $4, $5)
       on conflict (connection_id, resource_type, external_id) do update
          set data = excluded.data, deleted_at = excluded.deleted_at, change = excluded.change, change_seq = nextval('records_change_seq')
       returning change_seq::text`,
      [connectionId, externalId, JSON.stringify(data), tombstone ? new Date(Date.now() - 90 * 86_400_000) : null, tombstone ? 'delete' : 'insert'],
    );
    return rows[0]!.change_seq;
  }

  /** Reads the feed to its end from `cursor`; answers each page's external ids, and the last cursor. */
  async function pages(connectionId: string, query: string, overrides: Record<string, unknown> = {}, cursor?: string) {
    const read: string[][] = [];
    for (let n = 0; n < 50; n++) {
      const answer = await get(`/connections/${connectionId}/records?${query}${cursor ? `&cursor=${cursor}` : ''}`, overrides);
      expect(answer.status, JSON.stringify(answer.body).slice(0, 500)).toBe(200);
      read.push(answer.body.items.map((i: { external_id: string }) => i.external_id));
      cursor = answer.body.next_cursor;
      if (!answer.body.has_more) return { read, cursor: cursor! };
    }
    throw new Error('the feed never ended');
  }

  it('a page stops adding records once their data would pass the byte budget (always one at least); next_cursor continues after the last one returned', async () => {
    const id = await feedConnection();
    const big = { blob: 'x'.repeat(300 * KIB) };
    for (const key of ['r1', 'r2', 'r3', 'r4', 'r5']) await write(id, key, big);
    await write(id, 'small', { n: 1 });

    // 700 KiB: two 300 KiB records fit, a third would not; the last page ends the feed.
    const budget = { feedPageMaxBytes: 700 * KIB };
    const first = await get(`/connections/${id}/records?limit=100`, budget);
    expect(first.status).toBe(200);
    expect(first.body.items.map((i: { external_id: string }) => i.external_id)).toEqual(['r1', 'r2']);
    expect(first.body.has_more).toBe(true);
    expect(first.bytes).toBeLessThan(700 * KIB);
    expect((await pages(id, 'limit=100', budget)).read).toEqual([['r1', 'r2'], ['r3', 'r4'], ['r5', 'small']]);

    // A record larger than the whole budget still comes, alone: the feed never stalls on it.
    expect((await pages(id, 'limit=100', { feedPageMaxBytes: 100 * KIB })).read).toEqual([['r1'], ['r2'], ['r3'], ['r4'], ['r5'], ['small']]);
    // The record limit still holds within the budget (a full last page has more to ask for: an empty one).
    expect((await pages(id, 'limit=1', budget)).read).toEqual([['r1'], ['r2'], ['r3'], ['r4'], ['r5'], ['small'], []]);
  });

  it('the default budget keeps a page of a thousand 1 MiB records to a few of them', async () => {
    const id = await feedConnection();
    // 20 records just under PROVIDER_MAX_RECORD_BYTES (1 MiB): before, one page held them all.
    const big = { blob: 'y'.repeat(1000 * KIB) };
    for (let i = 0; i < 20; i++) await write(id, `big-${String(i).padStart(2, '0')}`, big);
    const first = await get(`/connections/${id}/records?limit=1000`);
    expect(first.status).toBe(200);
    expect(first.body.has_more).toBe(true);
    expect(first.body.items.length).toBeLessThan(20);
    expect(first.bytes).toBeLessThanOrEqual(8 * 1024 * KIB);
    const all = await pages(id, 'limit=1000');
    expect(all.read.flat()).toEqual(Array.from({ length: 20 }, (_, i) => `big-${String(i).padStart(2, '0')}`));
  });

  it('a page of small records whose stored size passes their printed size holds as many as their printed size fits in the budget', async () => {
    const id = await feedConnection();
    // 150 small integers: stored uncompressed (jsonb), about three times the bytes they print as.
    const small = Array.from({ length: 150 }, (_, i) => i);
    const keys = Array.from({ length: 20 }, (_, i) => `small-${String(i).padStart(2, '0')}`);
    for (const key of keys) await write(id, key, small);
    const { rows } = await db.pool.query<{ stored: number; printed: number }>(
      `select pg_column_size(data) + octet_length(external_id) as stored, octet_length(data::text) + octet_length(external_id) as printed
         from records where connection_id = $1 and external_id = 'small-00'`,
      [id],
    );
    expect(rows[0]!.stored).toBeGreaterThan(2 * rows[0]!.printed);
    // A budget of what ten of them print as: the page holds ten, has more, and is within it.
    const budget = { feedPageMaxBytes: 10 * rows[0]!.printed };
    const first = await get(`/connections/${id}/records?limit=100`, budget);
    expect(first.body.items.map((i: { external_id: string }) => i.external_id)).toEqual(keys.slice(0, 10));
    expect(first.body.has_more).toBe(true);
    expect((await pages(id, 'limit=100', budget)).read).toEqual([keys.slice(0, 10), keys.slice(10)]);
  });

  it('a cursor past the feed\'s last issued position is refused (400), not read past the changes written up to it later', async () => {
    const id = await feedConnection();
    await write(id, 'a');
    const read = await pages(id, 'limit=10');
    const issued = feedCursor.decode(read.cursor)!;
    const { rows } = await db.pool.query<{ last: string }>(`select last_value::text as last from records_change_seq`);
    const ahead = feedCursor.encode({ ...issued, seq: (BigInt(rows[0]!.last) + 1000n).toString() });

    // A change written after the cursor was made, at a position below it: read on with it, the
    // reader would pass over 'b' (and every change up to that position) without a word.
    await write(id, 'b');
    const refused = await get(`/connections/${id}/records?cursor=${ahead}`);
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/cursor/) });
    // The cursor the feed issued sees it.
    expect((await pages(id, 'limit=10', {}, read.cursor)).read.flat()).toEqual(['b']);
    // A plain cursor (as issued before cursors were sealed) is not read: 410, read from the start.
    const legacy = Buffer.from(JSON.stringify({ seq: issued.seq })).toString('base64url');
    const plain = await get(`/connections/${id}/records?cursor=${legacy}`);
    expect([plain.status, plain.body.error?.code]).toEqual([410, 'cursor_expired']);
  });

  it('a cursor of a purge epoch no purge has reached yet is refused (400), not left unexpired by the purges up to it', async () => {
    const id = await feedConnection();
    await write(id, 'a');
    await write(id, 'b');
    const read = await get(`/connections/${id}/records?limit=1`);
    const issued = feedCursor.decode(read.body.next_cursor)!;
    const ahead = feedCursor.encode({ ...issued, epoch: (BigInt(issued.epoch) + 1000n).toString() });
    // The deletion of 'b', purged before the reader reached it: the issued cursor expires (410);
    // one of an epoch no purge had reached must not read on as if nothing was removed.
    await write(id, 'b', {}, true);
    expect(await purgeTombstonesBatch(db.pool, new Date(Date.now() - 86_400_000), 1000)).toBeGreaterThan(0);
    expect((await get(`/connections/${id}/records?cursor=${read.body.next_cursor}`)).status).toBe(410);
    const refused = await get(`/connections/${id}/records?cursor=${ahead}`);
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/cursor/) });
  });
});
