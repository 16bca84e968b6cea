// An incremental pass beside a full pass whose page answers 304 (its stored ETag) serves no records,
// so it confirms none for that full pass. The full pass's listing may have missed one of them (here
// GitHub hid it while the listing went by and showed it again, unchanged). A tombstone of it must not
// stand behind a validator: the next incremental pass asks the same URL, and a 304 there would skip
// the record again and again, a tombstone while GitHub has it, until the next full pass. A full
// pass that tombstoned on its listing's word (past the candidates it re-checks one by one, every
// one of them confirmed gone) forgets the resource's validators, and a validator a full pass forgot
// after tombstoning a record of its page stays forgotten, also when a 304 in flight meanwhile
// confirms it.
// Drives the syncTask activity directly (real Postgres, the fake GitHub on 127.0.0.1).
import { describe, expect, it } from 'vitest';
import { onceBeforeServe } from './helpers/fake-github';
import { ISSUES, PAST_RECHECKS, repoHidingNewest } from './helpers/github-hidden-newest';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_validator_beside_full_12345';
const REPO = 'o/paged';
// Changed a day ago: a page serving an issue unchanged still notes its fetch, so the newest
// issue, served again by the incremental pass below, is the candidate fetched last.
const baseTime = new Date(Date.now() - 24 * 3600_000).toISOString();

describe('github: a 304 page of an incremental pass beside a full pass', () => {
  const { driver } = useSyncDriver();

  it('vouches for nothing the full pass tombstoned: the next incremental pass reads the page again and brings the record back', async () => {
    const { fake, id, items, newest, gone, deleteOldestAndHideNewest } = await repoHidingNewest(driver, { token: TOKEN, repo: REPO, repoId: 662, baseTime, deleted: PAST_RECHECKS });
    await driver.pass(id, ['issues'], { mode: 'full' });
    // The repository's cursor is #1's change time (the newest): this pass stores the ETag of the
    // page `since` that second, which serves #1.
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    const listing = (url: string) => url.startsWith(`/repos/${REPO}/issues?`);
    const validated = fake.requests.filter((r) => listing(r.url)).at(-1)!.url;

    // The oldest issues are deleted at GitHub (more than the deletion step re-checks), and GitHub
    // hides #1 while the next full pass lists the repository.
    deleteOldestAndHideNewest();
    // Before the full pass's first re-check: GitHub shows #1 again, unchanged, and an incremental
    // pass runs whole beside the full pass; its page is answered 304 (the ETag it stored).
    const ran = onceBeforeServe(fake, `/repos/${REPO}/issues/`, async () => {
      items.push(newest);
      const before = fake.requests.length;
      await driver.pass(id, ['issues'], { mode: 'incremental' });
      const asked = fake.requests.slice(before).filter((r) => listing(r.url));
      expect(asked.map((r) => [r.url, r.headers['if-none-match'] !== undefined])).toEqual([[validated, true]]);
    });
    await driver.pass(id, ['issues'], { mode: 'full' });
    expect(ran()).toBe(true);
    fake.beforeServe = null;
    // The full pass's listing did not serve #1, and it was past the candidates re-checked, every one
    // of which was confirmed gone (a mass deletion): the listing's word stood for it.
    expect(await driver.tombstones(id, 'issues')).toEqual([...gone, `${REPO}#1`].sort());

    // GitHub is quiet now: the next incremental pass brings #1 back as GitHub has it.
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(await driver.tombstones(id, 'issues')).toEqual(gone);
    const live = await driver.live(id, 'issues');
    expect(live.get(`${REPO}#1`)).toEqual(newest);
    expect(live.size).toBe(ISSUES - PAST_RECHECKS);
  });

  it('confirms no validator a full pass ending while the 304 was in flight forgot', async () => {
    const { fake, id, newest, gone, fullPassMissingNewest } = await repoHidingNewest(driver, { token: TOKEN, repo: REPO, repoId: 663, baseTime });
    await driver.pass(id, ['issues'], { mode: 'full' });
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    const validated = fake.requests.at(-1)!.url;

    // While the next incremental pass's request for its page (with the ETag it read at its start)
    // is in flight: the oldest issues are deleted at GitHub, GitHub hides #1, a full pass runs
    // whole and tombstones #1 (its re-check answers 404) and forgets the validators it neither
    // stored nor confirmed, then GitHub shows #1 again, unchanged; the incremental request is
    // answered 304.
    const ran = onceBeforeServe(fake, `/repos/${REPO}/issues`, fullPassMissingNewest);
    const before = fake.requests.length;
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(ran()).toBe(true);
    fake.beforeServe = null;
    // Its one request was the page of the ETag, asked with it (answered 304: nothing changed since).
    expect(fake.requests.slice(before).filter((r) => r.url === validated).map((r) => r.headers['if-none-match'] !== undefined)).toEqual([true]);

    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(await driver.tombstones(id, 'issues')).toEqual(gone);
    expect((await driver.live(id, 'issues')).get(`${REPO}#1`)).toEqual(newest);
  });
});
