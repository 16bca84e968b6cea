// The http connector's page-number and offset paging while the provider's data changes between page
// requests: an item edited on a page already read moves to the end of a list sorted by change time,
// and the next one slides back into the page already read. Runs the sync activity directly against
// real Postgres and the fake provider of test/helpers/fake-http-provider.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { initialItems, paginationOf, RECORDS_PATH, startFakeHttpProvider, type FakeHttpProvider, type FakeHttpStyle } from './helpers/fake-http-provider';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

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

/** Edits `id` at the fake's now, before the `n`th page request of the next pass (1-based). */
function editBeforeRequest(fake: FakeHttpProvider, n: number, edit: () => void) {
  const first = fake.requests;
  fake.beforeRequest = () => {
    if (fake.requests - first === n) edit();
  };
}

describe.each(['page', 'offset'] as const)('http connector, %s paging under change', (style) => {
  it('a full pass does not tombstone an item that slid into a page already read', async () => {
    const { fake, clock, connectionId } = await setUp(style);
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
    const { fake, clock, connectionId } = await setUp(style);
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
