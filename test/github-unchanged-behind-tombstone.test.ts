// A page of an incremental pass fetched before a full pass's deletion step tombstoned one of its
// records, and stored after it, serving that record unchanged: the page cannot undo the tombstone
// (fetched before it), nor tell whether the record was deleted after its fetch or missed by the
// full pass (here GitHub hid it while the full pass listed and re-checked it, and showed it again
// afterwards). Either way the next pass must read it again, fetched after the tombstone: no
// validator of that page may answer 304 for it, and no cursor may pass it. Drives the syncTask
// activity directly (real Postgres, the fake GitHub on 127.0.0.1).
import { describe, expect, it } from 'vitest';
import { onceBeforeServe } from './helpers/fake-github';
import { repoHidingNewest } from './helpers/github-hidden-newest';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_unchanged_behind_tombstone_1';
const REPO = 'o/listed';

describe('github: an incremental page serving unchanged a record tombstoned after its fetch', () => {
  const { driver } = useSyncDriver();

  it('stores no validator and holds the cursor: the next incremental pass brings the record back', async () => {
    const { fake, id, newest, gone, fullPassMissingNewest } = await repoHidingNewest(driver, { token: TOKEN, repo: REPO, repoId: 664 });
    // Two pages: the oldest issues on the first, the newest (#1 among them) on the second.
    await driver.pass(id, ['issues'], { mode: 'full' });
    // #2 is edited after #1's change time: the incremental page serves #1 and #2's new version,
    // and its newest change time is past #1's.
    const edited = fake.touch(REPO, 2);

    // While the incremental pass's request for its page (`since` #1's change time, no validator
    // stored for it yet) is in flight: the oldest issues are deleted at GitHub, GitHub hides #1, a
    // full pass runs whole and tombstones #1 (its re-check answers 404), then GitHub shows #1 again,
    // unchanged; the incremental request is answered with #1 as it was.
    const ran = onceBeforeServe(fake, `/repos/${REPO}/issues`, fullPassMissingNewest);
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(ran()).toBe(true);
    fake.beforeServe = null;
    // The page could not undo the tombstone (fetched before it).
    expect(await driver.tombstones(id, 'issues')).toContain(`${REPO}#1`);

    // GitHub is quiet now: the next incremental pass brings #1 back as GitHub has it.
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(await driver.tombstones(id, 'issues')).toEqual(gone);
    const live = await driver.live(id, 'issues');
    expect(live.get(`${REPO}#1`)).toEqual(newest);
    expect(live.get(`${REPO}#2`)).toEqual(edited);
  });
});
