// A page's fetch time is the database's clock, not its worker's: a worker whose clock runs ahead
// fetched a page before a full pass's deletion step tombstoned one of its records, and stored it
// after. Read by the worker's clock, the page looked fetched after the tombstone and undid it (a
// record the provider deleted after that fetch would have stayed alive until the next full pass);
// read by the database's, it is older news than the tombstone, which stays until a page fetched
// after it serves the record. Drives the syncTask activity directly (real Postgres, the fake
// GitHub on 127.0.0.1); only the incremental pass's `Date` is moved ahead.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { onceBeforeServe } from './helpers/fake-github';
import { repoHidingNewest } from './helpers/github-hidden-newest';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_fetch_clock_ahead_1';
const REPO = 'o/ahead';
/** How far the incremental pass's worker clock runs ahead of the database's. */
const AHEAD_MS = 10 * 60_000;

describe('a page fetched before a tombstone by a worker whose clock runs ahead', () => {
  const { driver, db } = useSyncDriver();
  afterEach(() => {
    vi.useRealTimers();
  });

  it('does not undo the tombstone, and the next pass brings the record back', async () => {
    const { fake, id, newest, gone, fullPassMissingNewest } = await repoHidingNewest(driver, { token: TOKEN, repo: REPO, repoId: 665 });
    await driver.pass(id, ['issues'], { mode: 'full' });
    fake.touch(REPO, 2);

    // While the incremental pass's request is in flight, a full pass (its own worker, on time)
    // tombstones #1 (hidden, its re-check answers 404); then GitHub shows #1 again and the request is
    // answered with #1 as it was.
    const ran = onceBeforeServe(fake, `/repos/${REPO}/issues`, async () => {
      vi.useRealTimers();
      await fullPassMissingNewest();
      vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
      vi.setSystemTime(Date.now() + AHEAD_MS);
    });
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    vi.setSystemTime(Date.now() + AHEAD_MS);
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    vi.useRealTimers();
    expect(ran()).toBe(true);
    fake.beforeServe = null;
    expect(await driver.tombstones(id, 'issues')).toContain(`${REPO}#1`);
    // Every fetch time written is the database's: none is ahead of its clock.
    const { rows } = await db.pool.query<{ ahead: number }>(`select count(*)::int as ahead from records where connection_id = $1 and fetched_at > now()`, [id]);
    expect(rows[0]!.ahead).toBe(0);

    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(await driver.tombstones(id, 'issues')).toEqual(gone);
    expect((await driver.live(id, 'issues')).get(`${REPO}#1`)).toEqual(newest);
  });
});
