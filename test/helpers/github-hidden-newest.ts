// A GitHub repository of issues and a connection syncing them, in which GitHub deletes the oldest
// issues and hides the newest one (#1) while a full pass lists the repository: the pass's deletion
// step re-checks #1 (404 while hidden) and tombstones it with the deleted ones, though GitHub shows
// it again right after, unchanged (a spam flag lifted). With more candidates than the deletion step
// re-checks (`deleted: PAST_RECHECKS`), #1, fetched last, is past the re-checks: every one re-checked
// confirmed gone, that pass tombstones it on its listing's word.
import { expect } from 'vitest';
import { MAX_RECHECKS } from '../../activities/sync-task/deletion';
import { startFakeGitHub, type FakeGitHub } from './fake-github';
import type { SyncDriver } from './sync-driver';

/** Issues in the repository: two pages of GitHub's 100, the newest (#1) on the second. */
export const ISSUES = MAX_RECHECKS + 10;
/** Issues `deleteOldestAndHideNewest` deletes unless told otherwise: the oldest, few. */
export const DELETED = 3;
/** Deleted issues that, with #1, are more than the deletion step re-checks. */
export const PAST_RECHECKS = MAX_RECHECKS + 1;

export async function repoHidingNewest(
  driver: SyncDriver,
  spec: { token: string; repo: string; repoId: number; baseTime?: string; deleted?: number },
) {
  const { token, repo } = spec;
  const deletedCount = spec.deleted ?? DELETED;
  const fake: FakeGitHub = await startFakeGitHub({ token, baseTime: spec.baseTime, repos: { [repo]: { id: spec.repoId, issues: ISSUES } } });
  const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [repo], resource_types: ['issues'] }, { token });
  const items = fake.repos.get(repo)!.items;
  /** The newest issue, #1, as it is now. */
  const newest = items.find((i) => i.number === 1)!;
  const deleted = items.filter((i) => i.number > ISSUES - deletedCount).map((i) => i.number);
  /** The external ids of the deleted issues, sorted as `driver.tombstones` answers. */
  const gone = deleted.map((n) => `${repo}#${n}`).sort();
  /** Deletes the oldest issues at GitHub and hides #1, as a listing going by may miss it. */
  const deleteOldestAndHideNewest = () => {
    for (const n of deleted) fake.remove(repo, n);
    fake.hide(repo, 1);
  };
  /**
   * A full pass run whole while the oldest issues are deleted and #1 hidden: its re-check of #1
   * answers 404, and it tombstones #1. Then GitHub shows #1 again, unchanged.
   */
  const fullPassMissingNewest = async () => {
    deleteOldestAndHideNewest();
    await driver.pass(id, ['issues'], { mode: 'full' });
    expect(await driver.tombstones(id, 'issues')).toContain(`${repo}#1`);
    items.push(newest);
  };
  return { fake, id, items, newest, gone, deleteOldestAndHideNewest, fullPassMissingNewest };
}
