// The http connector's page-number and offset paging while the provider's data changes between page
// requests: an item edited on a page already read moves to the end of a list sorted by change time,
// and the next one slides back into the page already read. Runs the sync activity directly against
// real Postgres and the fake provider of test/helpers/fake-http-provider.ts.
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { initialItems, paginationOf, RECORDS_PATH, startFakeHttpProvider, type FakeHttpProvider, type FakeHttpStyle } from './helpers/fake-http-provider';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();

const HOUR = 3_600_000;
let seq = 0;

/** A fake with 9 items changed two hours ago (one a second), 3 a page; its clock is `clock.ms`. */
async function setUp(style: FakeHttpStyle, resourceExtra: Record<string, unknown> = {}, paginationExtra: Record<string, unknown> = {}) {
  const clock = { ms: Date.now() - 2 * HOUR };
  const fake = await startFakeHttpProvider({ size: 3, initial: initialItems(9, clock.ms), clock: () => clock.ms });
  const config = {
    base_url: fake.baseUrl,
    pagination: { ...paginationOf(style, 3), ...paginationExtra },
    resources: {
      items: { path: `/${style}/items`, records: RECORDS_PATH[style], id: 'id', updated_at: 'updated_at', since: { param: 'updated_since' }, ...resourceExtra },
    },
  };
  seq += 1;
  const connectionId = await createHttpConnection(db.pool, config, `under-change-${seq}`);
  return { fake, clock, connectionId };
}

/** Runs `edit` (a change at the fake's clock) before the `n`th page request of the next pass (1-based). */
function editBeforeRequest(fake: FakeHttpProvider, n: number, edit: () => void) {
  const first = fake.requests;
  fake.beforeRequest = () => {
    if (fake.requests - first === n) edit();
  };
}

// Each style by position (read again until two reads agree) and by keyset (`order: 'change_ascending'`).
const CASES = [
  ['page', 'positions'],
  ['offset', 'positions'],
  ['page', 'keyset'],
  ['offset', 'keyset'],
] as const;
const KEYSET = { order: 'change_ascending' };

describe.each(CASES)('http connector, %s paging by %s under change', (style, by) => {
  const resourceExtra = by === 'keyset' ? KEYSET : {};

  it('a full pass does not tombstone an item that slid into a page already read', async () => {
    const { fake, clock, connectionId } = await setUp(style, resourceExtra);
    try {
      const { deps } = testActivityDeps({ pool: db.pool });
      await runPass(deps, connectionId, 'items', 'full');
      expect((await storedRecords(db.pool, connectionId, 'items')).size).toBe(9);
      // Page 1 ([1, 2, 3]) is read; then item 1 changes now and moves to the end: page 2 is [5, 6, 7].
      clock.ms = Date.now();
      editBeforeRequest(fake, 2, () => fake.edit('i00001'));
      await runPass(deps, connectionId, 'items', 'full');
      fake.beforeRequest = null;
      const stored = await storedRecords(db.pool, connectionId, 'items');
      const tombstoned = [...stored.values()].filter((r) => r.deleted_at !== null).map((r) => r.external_id);
      expect(tombstoned, 'items the provider still has were tombstoned').toEqual([]);
      expect(stored.get('i00001')!.data).toMatchObject({ version: 2 });
    } finally {
      await fake.close();
    }
  });

  it('an incremental pass does not skip an older change that slid into a page already read', async () => {
    const { fake, clock, connectionId } = await setUp(style, resourceExtra);
    try {
      const { deps } = testActivityDeps({ pool: db.pool });
      await runPass(deps, connectionId, 'items', 'full');
      // Half an hour ago (before this pass, older than any clock-skew margin) items 2–5 changed.
      clock.ms = Date.now() - HOUR / 2;
      for (const id of ['i00002', 'i00003', 'i00004', 'i00005']) fake.edit(id);
      // The pass reads [9, 2, 3]; then item 2 changes again now and moves to the end: page 2 is [5, 2].
      clock.ms = Date.now();
      editBeforeRequest(fake, 2, () => fake.edit('i00002'));
      await runPass(deps, connectionId, 'items', 'incremental');
      fake.beforeRequest = null;
      // Quiet now: one more incremental pass must bring every change.
      await runPass(deps, connectionId, 'items', 'incremental');
      const stored = await storedRecords(db.pool, connectionId, 'items');
      const stale = fake.list().filter((item) => JSON.stringify(stored.get(item.id)?.data) !== JSON.stringify(item)).map((i) => i.id);
      expect(stale, 'changes the incremental passes never stored').toEqual([]);
    } finally {
      await fake.close();
    }
  });
});

describe.each(['page', 'offset'] as const)('http connector, %s paging by keyset', (style) => {
  it('steps by change time without reading twice, and reads a block of one change time over several pages until two reads agree', async () => {
    const { fake, clock, connectionId } = await setUp(style, KEYSET);
    try {
      const { deps } = testActivityDeps({ pool: db.pool });
      // 9 items one a second, 3 a page: no request, 1-3; since=3: 3-5; since=5: 5-7; since=7: 7-9;
      // since=9: 9 (short: maybe the provider's cap, so the next position too), since=9 page 2: none,
      // the end. Those two pages, one change time by position, are read twice.
      const before = fake.requests;
      await runPass(deps, connectionId, 'items', 'full');
      expect(fake.requests - before).toBe(8);
      // Seven items now share one second (a bulk edit): more than two pages of one change time.
      clock.ms = Date.now() - HOUR;
      for (const id of ['i00002', 'i00003', 'i00004', 'i00005', 'i00006', 'i00007', 'i00008']) fake.edit(id);
      // While the block is read, item 3 (read on its first page) is deleted and item 5 slides back.
      editBeforeRequest(fake, 3, () => fake.remove('i00003'));
      await runPass(deps, connectionId, 'items', 'full');
      fake.beforeRequest = null;
      let stored = await storedRecords(db.pool, connectionId, 'items');
      // Nothing the provider has was tombstoned, and every change is stored (item 3, deleted after
      // it was read, waits for the next full pass).
      for (const item of fake.list()) expect(stored.get(item.id)).toMatchObject({ data: item, deleted_at: null });
      await runPass(deps, connectionId, 'items', 'full');
      stored = await storedRecords(db.pool, connectionId, 'items');
      const live = [...stored.values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
      expect(live).toEqual(fake.list().map((i) => i.id).sort());
    } finally {
      await fake.close();
    }
  });

  it('a backfill window ends its pass at the first page that reaches the window end', async () => {
    const { fake, connectionId } = await setUp(style, KEYSET);
    try {
      const { deps } = testActivityDeps({ pool: db.pool });
      const first = Date.parse(fake.list()[0]!.updated_at);
      const before = fake.requests;
      // [item 1, item 3): one page ([1, 2, 3]) reaches the end; the 6 items after it are not asked for.
      await runPass(deps, connectionId, 'items', 'backfill', { start: new Date(first), end: new Date(first + 2000) });
      expect(fake.requests - before).toBe(1);
      expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort()).toEqual(['i00001', 'i00002']);
    } finally {
      await fake.close();
    }
  });

  it('with max_reads 1, a block of one change time over several pages, read once, holds the cursor at that time', async () => {
    const { fake, clock, connectionId } = await setUp(style, KEYSET, { max_reads: 1 });
    try {
      const { deps } = testActivityDeps({ pool: db.pool });
      clock.ms = Date.now() - HOUR;
      for (const id of ['i00002', 'i00003', 'i00004', 'i00005', 'i00006', 'i00007', 'i00008']) fake.edit(id);
      const block = fake.items.get('i00002')!.updated_at;
      clock.ms = Date.now() - HOUR / 2;
      fake.create();
      await runPass(deps, connectionId, 'items', 'full');
      const { rows } = await db.pool.query<{ cursor: Date }>(`select cursor from sync_state where connection_id = $1 and resource_type = 'items' and partition = ''`, [connectionId]);
      // Not the newest change seen (half an hour ago): the block was paged by position, unverified.
      expect(rows[0]!.cursor.toISOString()).toBe(new Date(block).toISOString());
    } finally {
      await fake.close();
    }
  });

  it("refuses a provider that does not honour since or the declared order, naming the key", async () => {
    const { fake, connectionId } = await setUp(style, { ...KEYSET, since: { param: 'ignored_since' } });
    try {
      const { deps } = testActivityDeps({ pool: db.pool });
      // The fake ignores `ignored_since`: the first keyset step's answer starts before it.
      const err = await runPass(deps, connectionId, 'items', 'full').catch((e: Error) => e);
      expect(String((err as Error).message)).toMatch(/resources\.items\.order is 'change_ascending', but the provider listed a record changed before ignored_since=/);
    } finally {
      await fake.close();
    }
  });
});

describe('http connector: a listing that never holds still', () => {
  it('fails the task as transient after max_reads reads that all differ, deleting nothing', async () => {
    const { fake, clock, connectionId } = await setUp('page', {}, { max_reads: 3 });
    try {
      const { deps } = testActivityDeps({ pool: db.pool });
      await runPass(deps, connectionId, 'items', 'full');
      fake.remove('i00009');
      clock.ms = Date.now();
      // An edit before every request: no two reads serve the same records.
      let n = 0;
      fake.beforeRequest = () => {
        n += 1;
        fake.edit(`i0000${1 + (n % 8)}`);
      };
      const before = fake.requests;
      const err = (await runPass(deps, connectionId, 'items', 'full').catch((e: Error) => e)) as Error;
      fake.beforeRequest = null;
      expect(err.message).toMatch(/^http connector: 'items' \(\/page\/items\): the listing changed during each of 3 reads from '.*\/page\/items\?page=1&per_page=3'/);
      expect(err.message).toContain('max_reads 3');
      // Three reads of 4 pages (8 items: the third page short, the fourth empty, the end).
      expect(fake.requests - before).toBe(12);
      const stored = await storedRecords(db.pool, connectionId, 'items');
      expect([...stored.values()].filter((r) => r.deleted_at !== null)).toEqual([]);
    } finally {
      await fake.close();
    }
  });
});

describe('http connector: deletion when the listing is not consistent', () => {
  it('deletes nothing on the listing\'s word; with item lookups it tombstones exactly the items the provider answers 404 for', async () => {
    const { fake, connectionId } = await setUp('cursor', {}, { stable: false });
    try {
      const { deps } = testActivityDeps({ pool: db.pool });
      await runPass(deps, connectionId, 'items', 'full');
      fake.remove('i00003');
      fake.remove('i00007');
      await runPass(deps, connectionId, 'items', 'full');
      const tombstones = async () => [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at !== null).map((r) => r.external_id).sort();
      expect(await tombstones()).toEqual([]);

      const { rows } = await db.pool.query<{ config: { resources: { items: Record<string, unknown> } } }>('select config from connections where id = $1', [connectionId]);
      const config = rows[0]!.config;
      config.resources.items.item = { path: '/cursor/items/{id}', record: 'item' };
      await db.pool.query('update connections set config = $2 where id = $1', [connectionId, config]);
      const before = fake.requests;
      await runPass(deps, connectionId, 'items', 'full');
      expect(await tombstones()).toEqual(['i00003', 'i00007']);
      // The listing (7 items, 3 a page) and one lookup per candidate.
      expect(fake.requests - before).toBe(3 + 2);
    } finally {
      await fake.close();
    }
  });
});
