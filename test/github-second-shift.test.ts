// Oldest first, whole pages of issues in one second are paged by page number within that second
// (`since` at it, then page 2, 3, …). An issue of a page already read that leaves the second
// before the next page is asked (edited later, deleted, hidden) shifts the rest of the second's
// listing back by one: the next page number skips the issue that moved onto the page already read,
// though it was there, unchanged, all along. A first full pass never stored it.
import { describe, expect, it } from 'vitest';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_second_shift_1234567890abcdef';

describe('github issues paged by number within one second while issues leave it', () => {
  const { driver } = useSyncDriver();

  // Second A holds #1…#6 (three pages of two), #7 is later (C). The pass asks: the first page
  // (#1, #2: wholly in A, not asked for A), A's own first page (#1, #2), A's page 2 (#3, #4);
  // once that is answered, `leave` takes issues of the pages already read out of A.
  const [A, C, D] = ['2025-03-01T00:00:02Z', '2025-03-01T00:00:07Z', '2025-03-01T00:00:08Z'];
  // Every issue was served by the pass or existed unchanged for the whole of it: all are live after
  // it (one deleted or hidden after it was served is the next pass's to find gone).
  const cases: { name: string; leave: (fake: FakeGitHub) => void }[] = [
    { name: 'an issue edited out of the second', leave: (fake) => fake.touch('o/a', 1, D) },
    { name: 'an issue deleted', leave: (fake) => fake.remove('o/a', 1) },
    { name: 'two issues hidden at once (a whole page)', leave: (fake) => [1, 3].forEach((n) => fake.hide('o/a', n)) },
    { name: 'three issues edited out of the second (more than a page)', leave: (fake) => [1, 2, 3].forEach((n) => fake.touch('o/a', n, D)) },
  ];

  it.each(cases)('a first full pass stores every issue that existed unchanged for the whole pass: $name', async ({ leave }) => {
    const fake = await startFakeGitHub({ token: TOKEN });
    fake.addRepo('o/a', 713);
    for (const at of [A, A, A, A, A, A, C]) fake.create('o/a', at);
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: ['o/a'], resource_types: ['issues'], per_page: 2 }, { token: TOKEN });

    let served = 0;
    fake.afterServe = () => {
      served += 1;
      if (served === 3) leave(fake);
    };
    const results = await driver.pass(id, ['issues'], { mode: 'full' });
    fake.afterServe = null;
    expect(decodeURIComponent(fake.requests[2]!.url)).toContain(`since=${A}`);
    expect(decodeURIComponent(fake.requests[2]!.url)).toContain('page=2');
    expect(results.get('issues')!.status).toBe('completed');

    // #5, #6 and #7 existed, unchanged, for the whole pass: the pass stored them.
    const live = [...(await driver.live(id, 'issues')).keys()].sort();
    expect(live).toEqual([1, 2, 3, 4, 5, 6, 7].map((n) => `o/a#${n}`));
    await fake.close();
  });
});
