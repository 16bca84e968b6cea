// A keyset listing (after this change time and id) and a change stamped in the very second of a
// position the pass has already passed, on an item whose id is not after it: the pass cannot list
// it (it is behind the position) and moves its cursor on to a newer change seen later. What brings
// it to the next incremental pass is the cursor's clock-skew margin (a cursor never passes the pass
// start less CURSOR_CLOCK_SKEW_MS, and a provider clock within that margin stamps nothing during the
// pass before it). With a provider clock further behind, only a full pass brings it: the exactness
// model (test/helpers/http-exactness-model.ts), whose provider clock runs two hours behind to keep
// the margin out of its way, asks no incremental pass for such a version for that reason.
// Runs the sync activity directly against real Postgres and the fake provider.
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { initialItems, itemsConfig, startFakeHttpProvider } from './helpers/fake-http-provider';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
let seq = 0;

/**
 * Three items edited in one second S, listed two a page: page 1 passes (S, i00002); before page 2
 * i00001 is edited again in S (behind the position) and i00003 a second later (the pass's newest
 * change). Returns i00001's stored data after one more incremental pass, and after a full one.
 */
async function editBehindPosition(style: 'cursor' | 'link', lagMs: number) {
  const clock = { ms: Date.now() - lagMs };
  const fake = await startFakeHttpProvider({ size: 2, initial: initialItems(3, clock.ms - 600_000), clock: () => clock.ms });
  try {
    seq += 1;
    const connectionId = await createHttpConnection(db.pool, itemsConfig(fake.baseUrl, { style }, 2), `same-second-${seq}`);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    for (const id of ['i00001', 'i00002', 'i00003']) fake.edit(id);
    const first = fake.requests;
    fake.beforeRequest = () => {
      if (fake.requests - first !== 2) return;
      fake.edit('i00001');
      clock.ms += 1000;
      fake.edit('i00003');
    };
    await runPass(deps, connectionId, 'items', 'incremental');
    fake.beforeRequest = null;
    expect(fake.items.get('i00001')!.updated_at, 'stamped in the position\'s second').toBe(fake.items.get('i00002')!.updated_at);
    await runPass(deps, connectionId, 'items', 'incremental');
    const afterIncremental = (await storedRecords(db.pool, connectionId, 'items')).get('i00001')!.data;
    await runPass(deps, connectionId, 'items', 'full');
    const afterFull = (await storedRecords(db.pool, connectionId, 'items')).get('i00001')!.data;
    return { latest: fake.items.get('i00001')!, afterIncremental, afterFull };
  } finally {
    await fake.close();
  }
}

describe.each(['cursor', 'link'] as const)('http connector, %s paging: a change stamped behind a position the pass passed', (style) => {
  it('with the provider clock within the skew margin, the next incremental pass stores it', async () => {
    const { latest, afterIncremental } = await editBehindPosition(style, 0);
    expect(afterIncremental).toEqual(latest);
  });

  it('with the provider clock two hours behind (outside the margin), no incremental pass does; the next full pass stores it', async () => {
    const { latest, afterIncremental, afterFull } = await editBehindPosition(style, 2 * 3_600_000);
    expect(afterIncremental).not.toEqual(latest);
    expect(afterFull).toEqual(latest);
  });
});
