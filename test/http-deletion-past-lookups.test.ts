// A full pass's deletion step looks up at most MAX_RECHECKS records it did not see (each a request).
// With `item` lookups, those past that many are tombstoned on the listing's word only when every one
// looked up was confirmed gone (a lookup finding one alive leaves them for a later full pass:
// test/github-hidden-past-rechecks.test.ts). Without `item`, nothing can be looked up and a
// consistent listing's word stands for every record it did not serve, however many. Against the
// fake provider of test/helpers/fake-http-provider.ts on 127.0.0.1 and real Postgres.
import { describe, expect, it } from 'vitest';
import { MAX_RECHECKS } from '../activities/sync-task/deletion';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { initialItems, useFakeHttpProviders } from './helpers/fake-http-provider';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
const startFake = useFakeHttpProviders();

/** Items at the provider, and how many of them it deletes: more than the deletion step looks up. */
const ITEMS = MAX_RECHECKS + 30;
const DELETED = MAX_RECHECKS + 20;

/** One unpaged listing (consistent) of ITEMS items, with or without `item` lookups, and a first full pass. */
async function setUp(lookups: boolean, appKey: string) {
  const fake = await startFake({ size: ITEMS, initial: initialItems(ITEMS, Date.now() - 3_600_000) });
  const config = {
    base_url: fake.baseUrl,
    pagination: { type: 'none' },
    resources: {
      items: {
        path: '/none/items', records: '$', id: 'id', updated_at: 'updated_at',
        ...(lookups && { item: { path: '/none/items/{id}', record: 'item' } }),
      },
    },
  };
  const connectionId = await createHttpConnection(db.pool, config, appKey);
  const { deps } = testActivityDeps({ pool: db.pool });
  await runPass(deps, connectionId, 'items', 'full');
  const deleted = [...fake.items.keys()].slice(0, DELETED);
  for (const id of deleted) fake.remove(id);
  const tombstones = async () => [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at !== null).map((r) => r.external_id).sort();
  return { deps, connectionId, deleted: deleted.sort(), tombstones };
}

describe('http connector: more records gone than a full pass looks up', () => {
  it('with item lookups, every one looked up confirmed gone, tombstones them all in one full pass, those past the lookups on the listing\'s word', async () => {
    const { deps, connectionId, deleted, tombstones } = await setUp(true, 'past-lookups-item');
    await runPass(deps, connectionId, 'items', 'full');
    expect(await tombstones()).toEqual(deleted);
  });

  it('without item lookups, a consistent listing tombstones every record it did not serve in one full pass', async () => {
    const { deps, connectionId, deleted, tombstones } = await setUp(false, 'past-lookups-none');
    await runPass(deps, connectionId, 'items', 'full');
    expect(await tombstones()).toEqual(deleted);
  });
});
