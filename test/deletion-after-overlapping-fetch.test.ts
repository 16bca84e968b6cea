// A full pass's deletion step after an incremental pass of the same connection confirmed, during
// the full pass, a record the full pass's listing did not serve: the provider deleted the record
// and restored it (from its trash: the same data, the same change time) while the full pass's
// listing went by, so that consistent listing (keyset paging: what it lacks was absent at some time
// during the pass) misses it; the incremental pass beside it fetches the record after the restore,
// unchanged, and stores that page before the full pass's deletion step. The latest news of the
// record is that fetch (alive), so the deletion step must leave it alone: no delete (and no insert
// after it) in the change feed. Also for records changed days ago (a page serving one of them
// unchanged does not move its fetch time: a re-sync of old records costs no write), and for a
// resource without change times, whose incremental passes read the whole listing. And the other
// side: a record confirmed before the pass began and deleted since is still the pass's to delete.
// Runs the sync activity directly against real Postgres and a fake provider
// on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { readChangesPage } from '../db/models/records';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { initialItems, useFakeHttpProviders } from './helpers/fake-http-provider';
import { cursorConnectionStoredAt, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
const startFake = useFakeHttpProviders();

const MINUTE = 60_000;

/** The connection's change feed from its start, by external id (each record at its latest change). */
async function feedOfConnection(connectionId: string) {
  return new Map((await readChangesPage(db.pool, { connectionId, afterSeq: '0', limit: 100 })).changes.map((c) => [c.external_id, c]));
}

describe('a full pass whose listing missed a record an overlapping incremental pass confirmed alive', () => {
  const cases = [
    { label: 'changed two hours ago', changeTimes: true, changedAgo: 2 * 60 * MINUTE },
    { label: 'changed three days ago', changeTimes: true, changedAgo: 3 * 24 * 60 * MINUTE },
    { label: 'without change times', changeTimes: false, changedAgo: 2 * 60 * MINUTE },
  ];
  for (const { label, changeTimes, changedAgo } of cases) {
    it(`leaves the record live, with no delete in the feed (${label})`, async () => {
      // The timeline ends now (N); the provider stamps changes with our time.
      const N = Date.now();
      const clock = { ms: N - changedAgo };
      const initial = initialItems(4, clock.ms); // i00001 … i00004, stamped `changedAgo` ago
      const fake = await startFake({ size: 10, initial, clock: () => clock.ms });
      const provider = fake;
      // Stored by a pass an hour ago.
      const connectionId = await cursorConnectionStoredAt(db.pool, provider, `deletion-after-fetch-${cases.findIndex((c) => c.label === label)}`, new Date(N - 60 * MINUTE), changeTimes);
      const feedOf = () => feedOfConnection(connectionId);
      const before = (await feedOf()).get('i00003')!;
      expect(before.change).toBe('insert');
      const { deps } = testActivityDeps({ pool: db.pool });

      // i00003 is deleted at the provider 12 minutes ago; the full pass starts 10 minutes ago and its
      // listing (one page here) does not serve it. Its answer is held while, at the provider, i00003
      // is restored as it was (6 minutes ago) and an incremental pass of the connection, claimed 5
      // minutes ago, reads the listing (i00003 unchanged) and stores it: all before the full pass's
      // deletion step.
      clock.ms = N - 12 * MINUTE;
      const trashed = provider.items.get('i00003')!;
      provider.remove('i00003');
      let incremental: Promise<{ result: { status: string } }> | null = null;
      provider.holdResponse = () => {
        if (provider.requests !== 1) return null;
        clock.ms = N - 6 * MINUTE;
        provider.items.set('i00003', trashed);
        clock.ms = N - 5 * MINUTE;
        incremental = runPass(deps, connectionId, 'items', 'incremental', undefined, new Date(N - 5 * MINUTE));
        return incremental.then(() => {}, () => {});
      };
      const full = await runPass(deps, connectionId, 'items', 'full', undefined, new Date(N - 10 * MINUTE));
      provider.holdResponse = null;
      expect(incremental).not.toBeNull();
      await expect(incremental!).resolves.toMatchObject({ result: { status: 'completed' } });
      expect(provider.requests).toBe(2);
      expect(full.result.status).toBe('completed');

      // The record is live, and the feed shows no delete for it: its change is the one it had.
      const stored = await storedRecords(db.pool, connectionId, 'items');
      expect(stored.get('i00003')?.deleted_at ?? null).toBeNull();
      const after = (await feedOf()).get('i00003')!;
      expect(after.change).not.toBe('delete');
      expect(after.change_seq).toBe(before.change_seq);
      expect(full.result).toMatchObject({ deletedCount: 0 });

      // The provider is quiet; the next incremental pass changes nothing of it either (no insert).
      clock.ms = N;
      const next = await runPass(deps, connectionId, 'items', 'incremental');
      expect(next.result.status).toBe('completed');
      const last = (await feedOf()).get('i00003')!;
      expect(last).toMatchObject({ change: 'insert', change_seq: before.change_seq, deleted_at: null });
      expect(last.data).toEqual(provider.items.get('i00003'));
    });
  }

  it('a record confirmed before the pass began, deleted since, is still tombstoned; no pass notes its own pages or one alone', async () => {
    const N = Date.now();
    const clock = { ms: N - 2 * 60 * MINUTE };
    const initial = initialItems(4, clock.ms);
    const fake = await startFake({ size: 10, initial, clock: () => clock.ms });
    const provider = fake;
    const connectionId = await cursorConnectionStoredAt(db.pool, provider, 'deletion-after-fetch-before', new Date(N - 60 * MINUTE));
    const { deps } = testActivityDeps({ pool: db.pool });
    const noted = async () =>
      (await db.pool.query<{ external_id: string }>('select external_id from records where connection_id = $1 and confirmed_at is not null', [connectionId])).rows;
    // An incremental pass alone serves every item unchanged (no cursor yet): no full pass runs, nothing is noted.
    clock.ms = N - 5 * MINUTE;
    expect((await runPass(deps, connectionId, 'items', 'incremental')).result.status).toBe('completed');
    expect(await noted()).toEqual([]);
    // i00002 is deleted at the provider after that fetch; the full pass after it tombstones it.
    provider.remove('i00002');
    const full = await runPass(deps, connectionId, 'items', 'full');
    expect(full.result).toMatchObject({ status: 'completed', deletedCount: 1 });
    expect((await storedRecords(db.pool, connectionId, 'items')).get('i00002')?.deleted_at).not.toBeNull();
    expect((await feedOfConnection(connectionId)).get('i00002')?.change).toBe('delete');
    // Its own pages served the others unchanged: not noted either (a re-sync costs no such write).
    expect(await noted()).toEqual([]);
  });
});

