// Newest first (pull requests), each page after the first is followed by the page before asked
// again; when that page no longer reaches back to its oldest item as first read (more than a page's
// worth hidden at once above it), the pages before it are asked again too. A page answered 304 (its
// stored ETag) serves no body: its oldest item must still be known, from what was stored with the
// ETag, or the walk-back never runs after it and an incremental pass skips pull requests that moved
// up past it. Drives the syncTask activity directly (real Postgres, the fake GitHub on 127.0.0.1).
import { describe, expect, it } from 'vitest';
import { startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_hidden_beside_304_1234567890';
const REPO = 'o/p';

describe('github pull requests hidden more than a page at once next to a page answered 304', () => {
  const { driver } = useSyncDriver();

  it('an incremental pass whose first pages answer 304 still stores every pull request GitHub shows', async () => {
    const fake = await startFakeGitHub({ token: TOKEN });
    fake.addRepo(REPO, 722);
    // #1 … #8, each a minute newer than the one before: newest first #8, #7 | #6, #5 | #4, #3 | #2, #1.
    for (let n = 1; n <= 8; n++) fake.create(REPO, `2025-04-01T00:0${n}:00Z`, true);
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['pull_requests'], per_page: 2 }, { token: TOKEN });

    // A first pass stores pages 1 and 2 (#8 … #5, with their ETags) and stops at page 3: GitHub
    // answers 500 there and the job fails. The repository has no cursor yet.
    fake.setFailure({ kind: 'server_error', path: /\/pulls\?.*page=3/, times: 1 });
    await expect(driver.pass(id, ['pull_requests'], { mode: 'incremental' })).rejects.toThrow();
    fake.setFailure(null);
    expect([...(await driver.live(id, 'pull_requests')).keys()].sort()).toEqual(['o/p#5', 'o/p#6', 'o/p#7', 'o/p#8']);

    // The next incremental pass: pages 1 and 2 answer 304 (their stored ETags), page 1 asked again
    // answers 304; just before page 3 is answered, #8, #7 and #6 are hidden at once: #5 and #4 move
    // onto page 1, #3 and #2 onto page 2, and page 3 serves #1.
    let hidden = false;
    fake.beforeServe = (url) => {
      if (hidden || url.searchParams.get('page') !== '3' || !url.pathname.endsWith('/pulls')) return;
      hidden = true;
      for (const n of [8, 7, 6]) fake.hide(REPO, n);
    };
    const before = fake.requests.length;
    await driver.pass(id, ['pull_requests'], { mode: 'incremental' });
    fake.beforeServe = null;
    expect(hidden).toBe(true);
    const conditional = fake.requests.slice(before).filter((r) => r.headers['if-none-match'] !== undefined);
    expect(conditional.length, 'conditional requests of the pass').toBeGreaterThanOrEqual(2);

    const shown = fake.repos.get(REPO)!.items.map((i) => `${REPO}#${i.number}`);
    const live = await driver.live(id, 'pull_requests');
    expect(shown.filter((x) => !live.has(x)), 'pull requests GitHub shows that the pass did not store').toEqual([]);
  });
});
