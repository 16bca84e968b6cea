// Oldest first, a whole page of issues changed in one second is followed by the next page number
// within that second. Issues edited in that very second while the pass pages join it ahead of the
// page being read (GitHub orders ties by its own rule), shifting the rest back: a page asked by
// its number may then start with the previous page's first item, as a server ignoring `page`
// would serve it. That is no reason to fail the pass: it goes on with the next page number (the
// repository's cursor is held at that second, so the next pass reads the second again).
import { describe, expect, it } from 'vitest';
import { startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_within_second_shift_1234567890';

describe('github issues paged within one second while it fills', () => {
  const { driver } = useSyncDriver();

  it('a page numbered within a second that starts with the previous page\'s first item (issues edited into that second ahead of it) does not fail the pass', async () => {
    const fake = await startFakeGitHub({ token: TOKEN });
    fake.addRepo('o/a', 711);
    const S = '2025-03-01T00:00:10Z';
    // #1 and #2 a little earlier; #3, #4 and #5 in one second S (two to a page).
    fake.create('o/a', '2025-03-01T00:00:00Z');
    fake.create('o/a', '2025-03-01T00:00:01Z');
    for (let i = 0; i < 3; i++) fake.create('o/a', S);
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: ['o/a'], resource_types: ['issues'], per_page: 2 }, { token: TOKEN });

    // Just before the second page within S is answered, #1 and #2 are edited in that same second:
    // GitHub (the fake: ties by number) lists them ahead of #3, so page 2 of `since=S` is #3 and #4 again.
    let edited = false;
    fake.beforeServe = (url) => {
      if (edited || url.searchParams.get('since') !== S || url.searchParams.get('page') !== '2') return;
      edited = true;
      fake.touch('o/a', 1, S);
      fake.touch('o/a', 2, S);
    };
    const results = await driver.pass(id, ['issues'], { mode: 'incremental' }).catch((err: Error) => err.message);
    fake.beforeServe = null;
    expect(edited).toBe(true);
    expect(typeof results === 'string' ? results : results.get('issues')!.status).toBe('completed');

    // The next pass reads that second again: every issue as GitHub has it now.
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    const truth = new Map(fake.repos.get('o/a')!.items.map((i) => [`o/a#${i.number}`, i.title]));
    const live = new Map([...(await driver.live(id, 'issues'))].map(([k, v]) => [k, v.title]));
    expect(live).toEqual(truth);
  });
});
