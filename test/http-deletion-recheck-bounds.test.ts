// The deletion step's bound (MAX_RECHECKS lookups a full pass) at its edges, with `item` lookups:
// exactly as many records gone as it looks up, and one more; and a lookup the provider fails
// (503) for one of them: the pass tombstones nothing that time, and the next full pass all.
// Against the fake provider of test/helpers/fake-http-provider.ts on 127.0.0.1 and real Postgres.
import { describe, expect, it } from 'vitest';
import { MAX_RECHECKS } from '../activities/sync-task/deletion';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { initialItems, useFakeHttpProviders } from './helpers/fake-http-provider';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
const startFake = useFakeHttpProviders();
const ITEMS = MAX_RECHECKS + 10;

async function setUp(deleted: number, appKey: string) {
  const fake = await startFake({ size: ITEMS, initial: initialItems(ITEMS, Date.now() - 3_600_000) });
  const config = {
    base_url: fake.baseUrl,
    pagination: { type: 'none' },
    resources: { items: { path: '/none/items', records: '$', id: 'id', updated_at: 'updated_at', item: { path: '/none/items/{id}', record: 'item' } } },
  };
  const connectionId = await createHttpConnection(db.pool, config, appKey);
  const { deps } = testActivityDeps({ pool: db.pool });
  await runPass(deps, connectionId, 'items', 'full');
  const gone = [...fake.items.keys()].slice(0, deleted);
  for (const id of gone) fake.remove(id);
  const tombstones = async () => [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at !== null).map((r) => r.external_id).sort();
  return { fake, deps, connectionId, gone: gone.sort(), tombstones };
}

describe('http connector: the deletion step at its bound', () => {
  it.each([MAX_RECHECKS - 1, MAX_RECHECKS, MAX_RECHECKS + 1])('%i records gone, each looked up is gone: one full pass tombstones them all', async (n) => {
    const { deps, connectionId, gone, tombstones } = await setUp(n, `bounds-${n}`);
    await runPass(deps, connectionId, 'items', 'full');
    expect(await tombstones()).toEqual(gone);
  });

  it.each([MAX_RECHECKS, MAX_RECHECKS + 1])('%i records gone, one lookup answered 503: nothing tombstoned, the next full pass tombstones them all', async (n) => {
    const { fake, deps, connectionId, gone, tombstones } = await setUp(n, `bounds-503-${n}`);
    let failed = false;
    fake.failRequest = (url) => {
      if (failed || !url.pathname.startsWith('/none/items/')) return false;
      failed = true;
      return true;
    };
    await expect(runPass(deps, connectionId, 'items', 'full')).rejects.toThrow();
    expect(failed).toBe(true);
    expect(await tombstones()).toEqual([]);
    fake.failRequest = null;
    await runPass(deps, connectionId, 'items', 'full');
    expect(await tombstones()).toEqual(gone);
  });
});
