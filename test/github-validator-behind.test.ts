// A page of an incremental pass that serves an issue in a version a full pass's deletion step
// tombstoned after the page was fetched (GitHub hid the issue while the full pass listed and
// re-checked it, and showed it again afterwards: a spam flag lifted) stores none of that issue and
// holds the repository's cursor at its change time, so that the next pass reads it again, fetched
// after the tombstone. That next pass asks the same URL: a validator stored with the page would
// answer 304 for it and skip the issue, which would then stay a tombstone although GitHub has it.
// Drives the syncTask activity directly (real Postgres, the fake GitHub on 127.0.0.1).
import { describe, expect, it } from 'vitest';
import { onceBeforeServe, startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_validator_behind_token_12345';
const REPO = 'o/flagged';

describe('github: a page with an issue behind a later tombstone', () => {
  const { driver } = useSyncDriver();

  /** A repository of `issues` issues on a fake GitHub, its connection, and a first full pass. */
  const setUp = async (repoId: number, issues: number) => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { [REPO]: { id: repoId, issues } } });
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['issues'] }, { token: TOKEN });
    const items = fake.repos.get(REPO)!.items;
    const issue = (n: number) => items.find((i) => i.number === n)!;
    await driver.pass(id, ['issues'], { mode: 'full' });
    return { fake, id, items, issue };
  };

  /**
   * An incremental pass during whose listing request (its fetch began) `first` runs, then GitHub
   * hides #2, a full pass lists the repository without it and its re-check answers 404
   * (tombstoned), then GitHub shows #2 again as `edited`. The page could not undo the tombstone
   * (fetched before it). Then GitHub is quiet: the next incremental pass must bring #2 back.
   */
  const flagDuringIncremental = async ({ fake, id, items }: Awaited<ReturnType<typeof setUp>>, edited: (typeof items)[number], first: () => void) => {
    const ran = onceBeforeServe(fake, `/repos/${REPO}/issues`, async () => {
      first();
      fake.hide(REPO, 2);
      await driver.pass(id, ['issues'], { mode: 'full' });
      expect(await driver.tombstones(id, 'issues')).toEqual([`${REPO}#2`]);
      items.push(edited);
    });
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(ran()).toBe(true);
    fake.beforeServe = null;
    expect(await driver.tombstones(id, 'issues')).toEqual([`${REPO}#2`]);

    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(await driver.tombstones(id, 'issues')).toEqual([]);
    return driver.live(id, 'issues');
  };

  it('stores no validator for it: the next incremental pass reads the page again and brings the issue back', async () => {
    const repo = await setUp(661, 2);
    // The repository's cursor is #1's change time; #2 is edited within that same second, so the
    // incremental listing from the cursor serves #1 and #2's new version.
    const edited = repo.fake.touch(REPO, 2, repo.issue(1).updated_at);
    const live = await flagDuringIncremental(repo, edited, () => undefined);
    expect(live.get(`${REPO}#2`)?.title).toBe(edited.title);
    expect(live.get(`${REPO}#1`)?.title).toBe(repo.issue(1).title);
  });

  it('pulls the repository cursor back to the issue\'s change time when the full pass moved it past that', async () => {
    const repo = await setUp(662, 3);
    // #2 is edited after the cursor (#1's change time); during the listing #3 is edited a minute
    // later, so the full pass moves the cursor to #3's change time, past #2's: the next pass must
    // read from #2's change time.
    const edited = repo.fake.touch(REPO, 2, '2025-02-01T00:00:00Z');
    const live = await flagDuringIncremental(repo, edited, () => repo.fake.touch(REPO, 3, '2025-02-01T00:01:00Z'));
    expect(live.get(`${REPO}#2`)?.title).toBe(edited.title);
    expect(live.get(`${REPO}#3`)?.title).toBe(repo.issue(3).title);
  });
});
