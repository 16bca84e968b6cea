// Oldest first, a whole page of issues in one second is followed by the next page number within
// that second. That page number counts from the first item of that second: when the page came from
// a request that did not ask for that second (a first page, or a page numbered within an earlier
// second), an issue of it edited away before the next request shifts the rest of the second's
// listing back, and the next page number skips an issue that was there, unchanged, all along.
import { describe, expect, it } from 'vitest';
import { startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_second_left_1234567890abcdef';

describe('github issues paged within one second while an issue leaves it', () => {
  const { driver } = useSyncDriver();

  it('a first full pass stores every issue that existed unchanged for the whole pass, though an issue of a page wholly in one second left that second before the next page', async () => {
    const fake = await startFakeGitHub({ token: TOKEN });
    fake.addRepo('o/a', 712);
    // #1 and #2 in second A (page 1, wholly in A); #3 and #4 in second B (page 2 within A, wholly in
    // B); #5 later, in C. Two to a page.
    const [A, B, C, D] = ['2025-03-01T00:00:02Z', '2025-03-01T00:00:03Z', '2025-03-01T00:00:07Z', '2025-03-01T00:00:08Z'];
    for (const at of [A, A, B, B, C]) fake.create('o/a', at);
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: ['o/a'], resource_types: ['issues'], per_page: 2 }, { token: TOKEN });

    // Once the page of #3 and #4 (numbered within A) is answered, #3 is edited (to D): from then
    // on the listing of second B starts with #4, then #5, then #3.
    let served = 0;
    fake.afterServe = () => {
      served += 1;
      if (served === 2) fake.touch('o/a', 3, D);
    };
    const results = await driver.pass(id, ['issues'], { mode: 'full' });
    fake.afterServe = null;
    expect(served).toBeGreaterThanOrEqual(3);
    expect(results.get('issues')!.status).toBe('completed');

    // #5 existed, unchanged, for the whole pass: the pass stored it.
    const live = [...(await driver.live(id, 'issues')).keys()].sort();
    expect(live).toEqual(['o/a#1', 'o/a#2', 'o/a#3', 'o/a#4', 'o/a#5']);
  });
});
