// A full pass's deletion step re-checks at most MAX_RECHECKS candidates one by one (each a request).
// A listing may leave out pull requests GitHub still has (hidden while the pass lists them, shown
// again by the time of the re-checks: a spam flag lifted); with more candidates than are re-checked,
// those past the re-checks must not be tombstoned on the listing's word once a re-check found one
// alive: they wait for a later full pass's re-checks. Every re-checked one gone (a mass deletion),
// the listing's word stands for the rest. Drives the syncTask activity directly (real Postgres, the fake GitHub on 127.0.0.1).
import { describe, expect, it } from 'vitest';
import { MAX_RECHECKS } from '../activities/sync-task/deletion';
import { startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_hidden_past_rechecks_1234567';
const REPO = 'o/p';
/** Pull requests GitHub hides from one full pass's listing: more than the deletion step re-checks. */
const HIDDEN = MAX_RECHECKS + 1;
/** Pull requests in the repository (#1 the newest): pages of 100, #1 … #100 and #101 … #110. */
const PULLS = HIDDEN + 9;

/** A re-check by number (not a listing). */
const isRecheck = (url: URL) => /\/pulls\/\d+$/.test(url.pathname);

describe('github: more pull requests missing from a full pass than its deletion step re-checks', () => {
  const { driver } = useSyncDriver();

  /** A repository of PULLS pull requests, its connection, a first full pass, and the HIDDEN newest hidden. */
  const setUp = async (repoId: number) => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { [REPO]: { id: repoId, pulls: PULLS } } });
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['pull_requests'] }, { token: TOKEN });
    await driver.pass(id, ['pull_requests'], { mode: 'full' });
    expect((await driver.live(id, 'pull_requests')).size).toBe(PULLS);
    const items = fake.repos.get(REPO)!.items;
    const hidden = items.filter((i) => i.number <= HIDDEN);
    for (const item of hidden) fake.hide(REPO, item.number);
    return { fake, id, items, hidden };
  };

  it('tombstones none of them that GitHub shows again by the re-checks, also past the re-checks', async () => {
    const { fake, id, items, hidden } = await setUp(731);
    // The listing of the next full pass leaves them out; GitHub shows them again, unchanged, before
    // its first re-check.
    let shown = false;
    fake.beforeServe = (url) => {
      if (shown || !isRecheck(url)) return;
      shown = true;
      items.push(...hidden);
    };
    const before = fake.requests.length;
    await driver.pass(id, ['pull_requests'], { mode: 'full' });
    fake.beforeServe = null;
    expect(shown).toBe(true);
    expect(fake.requests.slice(before).filter((r) => isRecheck(new URL(r.url, fake.baseUrl))), 're-checks').toHaveLength(MAX_RECHECKS);
    expect(await driver.tombstones(id, 'pull_requests'), 'pull requests GitHub has that the full pass tombstoned').toEqual([]);
    expect((await driver.live(id, 'pull_requests')).size).toBe(PULLS);
  });

  it('tombstones them all in one pass when every re-checked one is confirmed gone (a mass deletion): the listing\'s word stands past the re-checks', async () => {
    const { fake, id, hidden } = await setUp(732);
    const gone = hidden.map((i) => `${REPO}#${i.number}`).sort();
    const before = fake.requests.length;
    await driver.pass(id, ['pull_requests'], { mode: 'full' });
    expect(fake.requests.slice(before).filter((r) => isRecheck(new URL(r.url, fake.baseUrl))), 're-checks').toHaveLength(MAX_RECHECKS);
    expect(await driver.tombstones(id, 'pull_requests')).toEqual(gone);
    expect((await driver.live(id, 'pull_requests')).size).toBe(PULLS - HIDDEN);
  });

});
