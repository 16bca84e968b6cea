// A full pass over pull requests (listed newest first) ends by reading the head again (a catch-up
// pass), since a pull request edited while the pass pages moves to the head, behind the pass's
// position. That catch-up pages too: a pull request edited again while it pages, before the
// catch-up reached it, moves to the head once more, behind the catch-up's position. With more
// deletion candidates than the deletion step re-checks one by one (pull requests GitHub hid), a
// pull request no listing served is tombstoned on the listing's word, though GitHub had it for the
// whole pass. Drives the syncTask activity directly (real Postgres, the fake GitHub on 127.0.0.1).
import { describe, expect, it } from 'vitest';
import { MAX_RECHECKS } from '../activities/sync-task/deletion';
import { encodeGitHubPageToken, githubConnector } from '../connectors/github';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_catch_up_again_token_1234567';
const REPO = 'o/pulls';
/** Pull requests GitHub hides before the second pass: more than the deletion step re-checks. */
const HIDDEN = MAX_RECHECKS + 1;
/** Pull requests left after that: six pages of three. */
const LEFT = 18;

/** The fake's listing requests (not the re-checks by number) from the `start`th on. */
const listings = (fake: FakeGitHub, start: number) => fake.requests.slice(start).filter((r) => !/\/pulls\/\d+$/.test(new URL(r.url, fake.baseUrl).pathname));

describe('github: a pull request edited during a full pass and again during its catch-up pass', () => {
  const { driver } = useSyncDriver();

  it('is not tombstoned: a catch-up of more than one page is followed by another', async () => {
    // #1 is the newest pull request, #119 the oldest.
    const fake = await startFakeGitHub({ token: TOKEN, repos: { [REPO]: { id: 671, pulls: HIDDEN + LEFT } } });
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['pull_requests'], per_page: 3 }, { token: TOKEN });
    await driver.pass(id, ['pull_requests'], { mode: 'full' });
    // The newest pull requests were fetched first: GitHub hides them, and every one of them was
    // fetched longer ago than those left, so the re-checks go to them.
    for (let n = 1; n <= HIDDEN; n += 1) fake.hide(REPO, n);
    const gone = Array.from({ length: HIDDEN }, (_, k) => `${REPO}#${k + 1}`).sort();
    // Left, newest first: #102 … #119, pages [102, 103, 104], [105, 106, 107], … [117, 118, 119].
    const R = 118;

    // The requests of the pass, each page after the first followed by the one before asked again:
    // 1 page 1, 2 page 2, 3 page 1 again, 4 page 3, 5 page 2 again, 6 page 4, 7 page 3 again,
    // 8 page 5, 9 page 4 again, 10 page 6, 11 page 5 again; then the catch-up down to #102's
    // change time (the newest the first page showed): 12 page 1, 13 page 2, 14 page 1 again,
    // 15 page 3, 16 page 2 again.
    const start = fake.requests.length;
    fake.afterServe = (n) => {
      // Before page 6: R is edited, then #103 … #108: [108, 107, 106], [105, 104, 103], [R, 102,
      // 109], …, [116, 117, 119]. Page 6 and page 5 again leave R out: it is behind the position.
      if (n - start === 9) for (const number of [R, 103, 104, 105, 106, 107, 108]) fake.touch(REPO, number);
      // The catch-up read [108, 107, 106], [105, 104, 103] (all after #102's change time) and
      // page 1 again (unchanged); before its page 3, R is edited again: [R, 108, 107], [106, 105,
      // 104], [103, 102, 109]. Page 3 ends the catch-up (#109 is older than #102), and page 2
      // asked again ([106, 105, 104]) leaves R out: no page of the pass served R.
      if (n - start === 14) fake.touch(REPO, R);
    };
    await driver.pass(id, ['pull_requests'], { mode: 'full' });
    fake.afterServe = null;
    expect(await driver.tombstones(id, 'pull_requests'), 'pull requests GitHub had for the whole pass were tombstoned').toEqual(gone);
    expect((await driver.live(id, 'pull_requests')).get(`${REPO}#${R}`)?.title).toBe(`PR ${R} of ${REPO} (edited) (edited)`);
    // The listing's requests: the pass and its catch-up as above, then a second catch-up down to
    // #108's change time (the newest the first one's first page showed), one page: [R, 108, 107].
    expect(listings(fake, start)).toHaveLength(16 + 1);
  });

  it('ends a catch-up of more than one page that serves the pull requests the pass served at or after its head (a head of one second over pages)', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { [REPO]: { id: 672, pulls: 7 } } });
    // #1 … #5 changed in one second, the newest: [1, 2], [3, 4], [5, 6], [7].
    const second = '2025-01-01T01:00:00Z';
    for (let n = 1; n <= 5; n += 1) fake.touch(REPO, n, second);
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['pull_requests'], per_page: 2 }, { token: TOKEN });
    const start = fake.requests.length;
    // After page 1 was asked again (request 3), #2 is edited within that second: page 1's ETag
    // changes, its pull requests and their change times do not.
    fake.afterServe = (n) => {
      if (n - start === 3) fake.touch(REPO, 2, second);
    };
    await driver.pass(id, ['pull_requests'], { mode: 'full' });
    fake.afterServe = null;
    // The pass: pages 1, 2, 1 again, 3, 2 again, 4, 3 again. The catch-up down to that second:
    // page 1 (changed), 2, 1 again, 3 (#6 is older), 2 again: #1 … #5 as the pass served them, so
    // nothing moved to the head since it began: no second catch-up.
    expect(listings(fake, start)).toHaveLength(7 + 5);
    expect((await driver.live(id, 'pull_requests')).get(`${REPO}#2`)?.title).toBe(`PR 2 of ${REPO} (edited) (edited)`);
  });

  it('fails as transient after catch-up passes that never settle, deleting nothing; quiet, the next full pass does', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { [REPO]: { id: 673, pulls: 9 } } });
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['pull_requests'], per_page: 2 }, { token: TOKEN });
    await driver.pass(id, ['pull_requests'], { mode: 'full' });
    fake.hide(REPO, 9);
    // From the second request on, two pull requests (a page) change before each request.
    const others = [1, 2, 3, 4, 5, 6, 7, 8];
    let turn = 0;
    const start = fake.requests.length;
    fake.afterServe = (n) => {
      if (n - start < 1) return;
      turn += 1;
      for (let k = 0; k < 2; k += 1) fake.touch(REPO, others[(2 * turn + k) % others.length]!);
    };
    const err = (await driver.pass(id, ['pull_requests'], { mode: 'full' }).catch((e: Error) => e)) as Error;
    fake.afterServe = null;
    expect(err.message).toMatch(/^github connector: 'o\/pulls' pull_requests: the listing changed during each of 5 reads of its head \(catch-up passes/);
    // Page 1 of the pass and asked again after page 2; then five catch-ups, each of more than one
    // page: its page 1, and that asked again after its page 2.
    expect(listings(fake, start).filter((r) => new URL(r.url, fake.baseUrl).pathname === `/repos/${REPO}/pulls`)).toHaveLength(2 + 5 * 2);
    expect(await driver.tombstones(id, 'pull_requests'), 'nothing is deleted before the pass ends').toEqual([]);
    // Quiet, the next full pass deletes it.
    await driver.pass(id, ['pull_requests'], { mode: 'full' });
    expect(await driver.tombstones(id, 'pull_requests')).toEqual([`${REPO}#9`]);
  });

  it('goes on from a catch-up page token written before catch-ups were numbered, as the first; each catch-up pass is other pages', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { [REPO]: { id: 674, pulls: 5 } } });
    const config = { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['pull_requests'], per_page: 2 };
    const fetch = (pageToken: string | null) =>
      githubConnector.fetchPage({ resource: 'pull_requests', since: null, until: null, pageToken, config, credentials: { token: TOKEN }, policy: TEST_PROVIDER_POLICY });
    const items = fake.repos.get(REPO)!.items;
    // A catch-up down to #3's change time, as the version before this one wrote it: [1, 2], [3, 4].
    const stored = encodeGitHubPageToken({ repo: REPO, done: [], url: null, catchup: true, head: items.find((i) => i.number === 3)!.updated_at });
    expect(githubConnector.pageKey!(stored)).toBe(`first page of ${REPO} (catch-up pass)`);
    const first = await fetch(stored);
    expect(first.records.map((r) => r.externalId)).toEqual([`${REPO}#1`, `${REPO}#2`]);
    const second = await fetch(first.nextPageToken);
    expect(second.records.map((r) => r.externalId)).toEqual([`${REPO}#3`]);
    // Page 1 asked again (unchanged: a 304), and then, the catch-up having taken two pages,
    // another down to #1's change time: other pages than the first catch-up's.
    const again = await fetch(second.nextPageToken);
    expect(again).toMatchObject({ records: [], notModified: true });
    expect(githubConnector.pageKey!(again.nextPageToken!)).toBe(`first page of ${REPO} (catch-up pass 2)`);
    // It answers a 304 to the first catch-up's ETag of page 1: nothing moved to the head since.
    const last = await fetch(again.nextPageToken);
    expect(last).toMatchObject({ records: [], notModified: true, nextPageToken: null, completedPartitions: [REPO] });
    expect(fake.requests.map((r) => r.headers['if-none-match'] !== undefined)).toEqual([false, false, true, true]);
  });
});
