// A GitHub repository with more issues than a full pass's deletion step re-checks one by one, and
// a connection syncing its issues: past the re-checks, a full pass tombstones on its listing's
// word, so a listing that misses an issue (GitHub hiding it while the listing goes by)
// tombstones it though GitHub still has it.
import { expect } from 'vitest';
import { MAX_RECHECKS } from '../../activities/sync-task/deletion';
import { startFakeGitHub, type FakeGitHub } from './fake-github';
import type { SyncDriver } from './sync-driver';

/** Issues in the repository: more than the deletion step re-checks. */
export const ISSUES = MAX_RECHECKS + 10;
/** Issues `deleteOldest` deletes: the oldest, more than the deletion step re-checks. */
export const DELETED = MAX_RECHECKS + 1;

export async function repoPastRechecks(
  driver: SyncDriver,
  spec: { token: string; repo: string; repoId: number; baseTime?: string },
) {
  const { token, repo } = spec;
  const fake: FakeGitHub = await startFakeGitHub({ token, baseTime: spec.baseTime, repos: { [repo]: { id: spec.repoId, issues: ISSUES } } });
  const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [repo], resource_types: ['issues'] }, { token });
  const items = fake.repos.get(repo)!.items;
  /** The newest issue, #1, as it is now. */
  const newest = items.find((i) => i.number === 1)!;
  const deleted = items.filter((i) => i.number > ISSUES - DELETED).map((i) => i.number);
  /** The external ids of the deleted issues, sorted as `driver.tombstones` answers. */
  const gone = deleted.map((n) => `${repo}#${n}`).sort();
  /** Deletes the oldest issues at GitHub and hides #1, as a listing going by may miss it. */
  const deleteOldestAndHideNewest = () => {
    for (const n of deleted) fake.remove(repo, n);
    fake.hide(repo, 1);
  };
  /**
   * A full pass run whole while the oldest issues are deleted and #1 hidden: it tombstones #1 past
   * its re-checks. Then GitHub shows #1 again, unchanged.
   */
  const fullPassMissingNewest = async () => {
    deleteOldestAndHideNewest();
    await driver.pass(id, ['issues'], { mode: 'full' });
    expect(await driver.tombstones(id, 'issues')).toContain(`${repo}#1`);
    items.push(newest);
  };
  return { fake, id, items, newest, gone, deleteOldestAndHideNewest, fullPassMissingNewest };
}
