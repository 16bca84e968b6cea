// A record's `synced_at` is the database's clock, not its writing worker's: a full pass judges the
// records written before it began (`synced_at` before its task's `started_at`, the database's
// clock), so a record written by a worker whose clock runs ahead, dated by that clock, read as
// written after any pass started within that lead, and such a pass kept it alive though the
// provider had deleted it (until a later pass). A tombstone's `synced_at` is the database's clock
// too. Drives the syncTask activity directly (real Postgres, the fake GitHub on 127.0.0.1); only
// one pass's `Date` is moved ahead.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_synced_at_clock_ahead_1';
const REPO = 'o/synced-ahead';
/** How far a pass's worker clock runs ahead of the database's. */
const AHEAD_MS = 10 * 60_000;

describe('a record written by a worker whose clock runs ahead', () => {
  const { driver, db } = useSyncDriver();
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is tombstoned by a full pass started after the write that does not see it', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { [REPO]: { id: 667, issues: 3 } } });
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['issues'] }, { token: TOKEN });

    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    vi.setSystemTime(Date.now() + AHEAD_MS);
    await driver.pass(id, ['issues'], { mode: 'full' });
    vi.useRealTimers();
    expect([...(await driver.live(id, 'issues')).keys()].sort()).toEqual([`${REPO}#1`, `${REPO}#2`, `${REPO}#3`]);

    // GitHub deletes #2; a full pass on a worker whose clock is right starts (by the database's
    // clock) after the write, well within the first worker's lead, and its listing leaves #2 out.
    fake.remove(REPO, 2);
    const result = await driver.pass(id, ['issues'], { mode: 'full' });
    expect(await driver.tombstones(id, 'issues')).toEqual([`${REPO}#2`]);
    expect(result.get('issues')!.deletedCount).toBe(1);
    // Every write time stored is the database's: none is ahead of its clock.
    const { rows } = await db.pool.query<{ ahead: number }>(`select count(*)::int as ahead from records where connection_id = $1 and synced_at > now()`, [id]);
    expect(rows[0]!.ahead).toBe(0);
  });

  it('dates the tombstone a full pass on such a worker writes by the database clock', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { [REPO]: { id: 668, issues: 3 } } });
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['issues'] }, { token: TOKEN });
    await driver.pass(id, ['issues'], { mode: 'full' });
    fake.remove(REPO, 3);
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    vi.setSystemTime(Date.now() + AHEAD_MS);
    await driver.pass(id, ['issues'], { mode: 'full' });
    vi.useRealTimers();
    expect(await driver.tombstones(id, 'issues')).toEqual([`${REPO}#3`]);
    const { rows } = await db.pool.query<{ ahead: number }>(`select count(*)::int as ahead from records where connection_id = $1 and synced_at > now()`, [id]);
    expect(rows[0]!.ahead).toBe(0);
  });
});
