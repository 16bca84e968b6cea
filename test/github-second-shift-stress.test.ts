// Oldest first, issues paged by number within one second while the second loses issues between
// requests (one issue per answer of o/a), one walk-back request failing (503) once so the task's next
// attempt resumes from its page token mid-recheck, and a second repository after it: the pass ends,
// within a bounded number of requests, and stores every issue that was there, unchanged, all along.
import { describe, expect, it } from 'vitest';
import { startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_second_stress_1234567890abcdef';

describe('github issues: a second losing issues between every request', () => {
  const { driver } = useSyncDriver();
  const [A, C, D] = ['2025-03-01T00:00:02Z', '2025-03-01T00:00:07Z', '2025-03-01T00:00:08Z'];

  it.each([
    { name: 'edited out of the second', edit: 'touch' as const },
    { name: 'deleted', edit: 'remove' as const },
  ])('ends and stores every issue there all along: $name, one per request', async ({ edit }) => {
    const fake = await startFakeGitHub({ token: TOKEN });
    fake.addRepo('o/a', 811);
    fake.addRepo('o/b', 812);
    for (let i = 0; i < 16; i++) fake.create('o/a', A);
    fake.create('o/a', C);
    for (let i = 0; i < 6; i++) fake.create('o/b', A);
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: ['o/a', 'o/b'], resource_types: ['issues'], per_page: 2 }, { token: TOKEN });
    // After each answer of o/a, the lowest-numbered issue still in the second leaves it; #15 and
    // #16 (the last two) stay, and #17 (C) too.
    let n = 0;
    fake.afterServe = (_n, url) => {
      if (!url.pathname.includes('/o/a/')) return;
      n += 1;
      const next = n; // issues #1..#14 leave, one per answer
      if (next > 14) return;
      if (edit === 'touch') fake.touch('o/a', next, D);
      else fake.remove('o/a', next);
    };
    fake.setFailure({ kind: 'server_error', path: /page=1(&|$)/, times: 1 });
    const results = await driver.pass(id, ['issues'], { mode: 'full', retries: 3 });
    fake.afterServe = null;
    expect(results.get('issues')!.status).toBe('completed');
    const live = new Set((await driver.live(id, 'issues')).keys());
    for (const k of ['o/a#15', 'o/a#16', 'o/a#17', 'o/b#1', 'o/b#2', 'o/b#3', 'o/b#4', 'o/b#5', 'o/b#6']) expect(live.has(k), k).toBe(true);
    expect(fake.requests.length).toBeLessThan(80);
    await fake.close();
  });
});
