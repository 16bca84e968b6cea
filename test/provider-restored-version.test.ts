// A provider restored from a backup serves an older version of a record, with the older change
// time that version carries, long after the newer version was stored. That is what the provider
// has now: a pass alone (a full one, and an incremental one reading from nothing) stores it, with an
// update in the change feed. A page fetched before the stored version (an overlapping job's, older
// news) still never replaces it: test/upsert-records.test.ts. Runs the sync activity directly
// against real Postgres and the fake provider of test/helpers/fake-http-provider.ts.
import { describe, expect, it } from 'vitest';
import { readChangesPage } from '../db/models/records';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { initialItems, useFakeHttpProviders } from './helpers/fake-http-provider';
import { cursorConnectionStoredAt, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
const startFake = useFakeHttpProviders();

const MINUTE = 60_000;
let seq = 0;

describe('a provider restored to an older version of a record', () => {
  it.each([['full'], ['incremental']] as const)('the %s pass stores the version the provider has now, older change time and all', async (kind) => {
    const N = Date.now();
    // Created three hours ago; i00002 edited two hours ago; all stored by a pass an hour ago.
    const clock = { ms: N - 3 * 60 * MINUTE };
    const fake = await startFake({ size: 10, initial: initialItems(4, clock.ms), clock: () => clock.ms });
    const older = { ...fake.items.get('i00002')! };
    clock.ms = N - 2 * 60 * MINUTE;
    fake.edit('i00002');
    seq += 1;
    const connectionId = await cursorConnectionStoredAt(db.pool, fake, `restored-${seq}`, new Date(N - 60 * MINUTE));
    const feedOf = async () => new Map((await readChangesPage(db.pool, { connectionId, afterSeq: '0', limit: 100 })).changes.map((c) => [c.external_id, c]));
    const before = (await feedOf()).get('i00002')!;

    // The provider is restored from a backup taken before the edit.
    fake.items.set('i00002', older);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', kind);

    const stored = await storedRecords(db.pool, connectionId, 'items');
    expect(stored.get('i00002')!.data).toEqual(older);
    const after = (await feedOf()).get('i00002')!;
    expect(after.change).toBe('update');
    expect(BigInt(after.change_seq)).toBeGreaterThan(BigInt(before.change_seq));
    expect(after.source_updated_at).toBe(new Date(older.updated_at).toISOString());
  });
});
