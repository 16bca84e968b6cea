// A full pass's deletion step beside an incremental pass of the same connection, with the
// provider's clock in step with ours (no skew at all, well within CURSOR_CLOCK_SKEW_MS): an item
// the full pass's listing did not serve (deleted then) is created again under its old id; the
// incremental pass fetches a page with it before the deletion step, and stores that page after
// the step tombstoned it. The incremental pass must not move its cursor past what it could not
// store: the next incremental pass reads the item again and brings it back. Runs the sync activity
// directly against real Postgres and a fake provider on 127.0.0.1 (keyset paging, a consistent
// listing, so unseen records are tombstoned without lookups).
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { initialItems, useFakeHttpProviders } from './helpers/fake-http-provider';
import { cursorConnectionStoredAt, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
const startFake = useFakeHttpProviders();

const MINUTE = 60_000;

describe('a full pass tombstoning an item an overlapping incremental page saw created again', () => {
  it('the incremental cursor does not pass the item: the next incremental pass brings it back', async () => {
    // The scenario's timeline ends now (N); the provider stamps changes with our time (no skew).
    // The item is created again 3 minutes before the incremental pass starts, more than the
    // clock-skew margin (CURSOR_CLOCK_SKEW_MS, 1 minute): the cursor's cap does not keep it.
    const N = Date.now();
    const clock = { ms: N - 2 * 60 * MINUTE };
    const initial = initialItems(4, clock.ms); // i00001 … i00004, stamped two hours ago
    const fake = await startFake({ size: 10, initial, clock: () => clock.ms });
    const provider = fake;
    // Stored by a pass an hour ago.
    const connectionId = await cursorConnectionStoredAt(db.pool, provider, 'deletion-overlap', new Date(N - 60 * MINUTE));
    const { deps } = testActivityDeps({ pool: db.pool });

    // i00003 is deleted at the provider 12 minutes ago; the full pass starts 10 minutes ago and
    // its listing (one page here; the last of a long listing, or before slow re-checks) does not
    // serve it. Its answer is held until the incremental pass has asked for its page, so its
    // deletion step comes after that fetch.
    clock.ms = N - 12 * MINUTE;
    provider.remove('i00003');
    let incrementalAsked = () => {};
    const asked = new Promise<void>((resolve) => (incrementalAsked = resolve));
    let fullDone = () => {};
    const done = new Promise<void>((resolve) => (fullDone = resolve));
    let incremental: Promise<unknown> | null = null;
    provider.holdResponse = () => {
      if (provider.requests === 1) {
        // The full pass's listing answer is made (without i00003). Then, at the provider: i00003
        // created again 5 minutes ago, i00004 edited 4 minutes ago; and the incremental job,
        // claimed 2 minutes ago, asks for its page (held until the full pass has ended).
        clock.ms = N - 5 * MINUTE;
        provider.create('i00003 again', 'i00003');
        clock.ms = N - 4 * MINUTE;
        provider.edit('i00004');
        clock.ms = N - 2 * MINUTE;
        incremental = runPass(deps, connectionId, 'items', 'incremental', undefined, new Date(N - 2 * MINUTE));
        return asked;
      }
      if (provider.requests === 2) {
        incrementalAsked();
        return done;
      }
      return null;
    };
    const full = await runPass(deps, connectionId, 'items', 'full', undefined, new Date(N - 10 * MINUTE)).finally(fullDone);
    expect(incremental).not.toBeNull();
    await expect(incremental!).resolves.toMatchObject({ result: { status: 'completed' } });
    expect(full.result).toMatchObject({ status: 'completed', deletedCount: 1 });
    provider.holdResponse = null;

    // The provider is quiet. The next incremental pass (now) must store i00003 as it is.
    clock.ms = N;
    const next = await runPass(deps, connectionId, 'items', 'incremental');
    expect(next.result.status).toBe('completed');
    const stored = await storedRecords(db.pool, connectionId, 'items');
    expect(stored.get('i00003')?.deleted_at ?? null).toBeNull();
    expect(stored.get('i00003')?.data).toEqual(provider.items.get('i00003'));
    expect(stored.get('i00004')?.data).toEqual(provider.items.get('i00004'));
  });
});
