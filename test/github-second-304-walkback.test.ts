// Oldest first, a page numbered within one `since` second is followed by the page before it asked
// again; the pages before that are asked again too only while the page asked again holds neither
// its first nor its last item as first read. A page an incremental pass got as 304 (its stored
// ETag) was read as the earlier pass stored it: the ETag vouches for the same first and last item,
// so an issue leaving the second while the pass pages walks back no further than for a page read
// with a body.
import { describe, expect, it } from 'vitest';
import { startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_second_304_walkback_1234567890ab';

describe('github issues paged within one second: a page answered 304 and then asked again', () => {
  const { driver } = useSyncDriver();
  const [A, C] = ['2025-03-01T00:00:02Z', '2025-03-01T00:00:07Z'];

  it('walks back no further than for a page read with a body when one issue leaves the second', async () => {
    const fake = await startFakeGitHub({ token: TOKEN });
    fake.addRepo('o/a', 714);
    // Second A holds #1…#8 (four pages of two), #9 is later (C). The full pass holds the cursor at A.
    for (const at of [A, A, A, A, A, A, A, A, C]) fake.create('o/a', at);
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: ['o/a'], resource_types: ['issues'], per_page: 2 }, { token: TOKEN });
    await driver.pass(id, ['issues'], { mode: 'full' });
    const before = fake.requests.length;

    // The incremental pass asks A's first page and page 2 (both 304), the first page again (304),
    // then page 3; once that is answered, #1 leaves the second (deleted): page 2 asked again is
    // [#4, #5], still holding #4, its last item as stored, so the pass asks no page before it.
    let served = 0;
    fake.afterServe = () => {
      served += 1;
      if (served === 4) fake.remove('o/a', 1);
    };
    const results = await driver.pass(id, ['issues'], { mode: 'incremental' });
    fake.afterServe = null;
    expect(results.get('issues')!.status).toBe('completed');
    const asked = fake.requests.slice(before).map((r) => new URL(r.url, fake.baseUrl).searchParams.get('page') ?? '1');
    expect(asked).toEqual(['1', '2', '1', '3', '2', '4', '3']);
    // Every issue there is live (#1's deletion is a full pass's to find).
    const live = [...(await driver.live(id, 'issues')).keys()].sort();
    expect(live).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => `o/a#${n}`).sort());
    await fake.close();
  });
});
