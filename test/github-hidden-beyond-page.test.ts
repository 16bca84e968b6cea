// Newest first (pull requests), GitHub's pages are positions: items hidden above a page boundary
// while the next page is asked move the items after them up. The page before is asked again, which
// catches a shift of up to a page; GitHub hiding more than a page's worth at once (a spam account's
// pull requests, all hidden together) moves some of them further up, onto pages before it.
import { describe, expect, it } from 'vitest';
import { startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_hidden_beyond_page_1234567890';

describe('github pull requests hidden more than a page at once while a pass pages', () => {
  const { driver } = useSyncDriver();

  it('a full pass still stores every pull request GitHub shows when more than a page of them above its position is hidden at once', async () => {
    const fake = await startFakeGitHub({ token: TOKEN });
    fake.addRepo('o/p', 721);
    // #1 … #8, each a minute newer than the one before: newest first #8, #7 | #6, #5 | #4, #3 | #2, #1.
    for (let n = 1; n <= 8; n++) fake.create('o/p', `2025-04-01T00:0${n}:00Z`, true);
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: ['o/p'], resource_types: ['pull_requests'], per_page: 2 }, { token: TOKEN });

    // Pages 1 and 2 read (#8 … #5); just before page 3 is answered #8, #7 and #6 are hidden at once:
    // #5 and #4 move onto page 1, #3 and #2 onto page 2, and page 3 serves #1.
    let hidden = false;
    fake.beforeServe = (url) => {
      if (hidden || url.searchParams.get('page') !== '3' || !url.pathname.endsWith('/pulls')) return;
      hidden = true;
      for (const n of [8, 7, 6]) fake.hide('o/p', n);
    };
    await driver.pass(id, ['pull_requests'], { mode: 'full' });
    fake.beforeServe = null;
    expect(hidden).toBe(true);

    // (Those hidden were served before they were hidden: a first sync has no reason to drop them.)
    const shown = fake.repos.get('o/p')!.items.map((i) => `o/p#${i.number}`);
    const live = await driver.live(id, 'pull_requests');
    expect(shown.filter((x) => !live.has(x)), 'pull requests GitHub shows that the pass did not store').toEqual([]);
    // And the next incremental pass (nothing changed since) leaves none out either.
    await driver.pass(id, ['pull_requests'], { mode: 'incremental' });
    const after = await driver.live(id, 'pull_requests');
    expect(shown.filter((x) => !after.has(x)), 'pull requests GitHub shows, missing after an incremental pass').toEqual([]);
  });
});
