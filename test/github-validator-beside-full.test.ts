// An incremental pass beside a full pass whose page answers 304 (its stored ETag) serves no records,
// so it confirms none for that full pass. The full pass's listing may have missed one of them (here
// GitHub hid it while the listing went by and showed it again, unchanged); with more candidates than
// the deletion step re-checks one by one, the listing's word tombstones it. The validator the 304
// confirmed must not outlive that: the next incremental pass asks the same URL, and a 304 there would
// skip the record again and again, a tombstone while GitHub has it, until the next full pass.
// Drives the syncTask activity directly (real Postgres, the fake GitHub on 127.0.0.1).
import { describe, expect, it } from 'vitest';
import { MAX_RECHECKS } from '../activities/sync-task/deletion';
import { onceBeforeServe, startFakeGitHub } from './helpers/fake-github';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_validator_beside_full_12345';
const REPO = 'o/paged';
// More issues than the deletion step re-checks: all but the newest few are deleted at GitHub.
const ISSUES = MAX_RECHECKS + 10;
const DELETED = MAX_RECHECKS + 1;

describe('github: a 304 page of an incremental pass beside a full pass', () => {
  const { driver } = useSyncDriver();

  it('vouches for nothing the full pass tombstoned: the next incremental pass reads the page again and brings the record back', async () => {
    // Changed a day ago: a page serving an issue unchanged still notes its fetch, so the newest
    // issue, served again by the incremental pass below, is the candidate fetched last.
    const fake = await startFakeGitHub({ token: TOKEN, baseTime: new Date(Date.now() - 24 * 3600_000).toISOString(), repos: { [REPO]: { id: 662, issues: ISSUES } } });
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['issues'] }, { token: TOKEN });
    const items = fake.repos.get(REPO)!.items;
    await driver.pass(id, ['issues'], { mode: 'full' });
    // The repository's cursor is #1's change time (the newest): this pass stores the ETag of the
    // page `since` that second, which serves #1.
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    const newest = items.find((i) => i.number === 1)!;
    const listing = (url: string) => url.startsWith(`/repos/${REPO}/issues?`);
    const validated = fake.requests.filter((r) => listing(r.url)).at(-1)!.url;

    // The oldest issues are deleted at GitHub (more than the deletion step re-checks), and GitHub
    // hides #1 while the next full pass lists the repository.
    const deleted = items.filter((i) => i.number > ISSUES - DELETED).map((i) => i.number);
    for (const n of deleted) fake.remove(REPO, n);
    fake.hide(REPO, 1);
    // Before the full pass's first re-check: GitHub shows #1 again, unchanged, and an incremental
    // pass runs whole beside the full pass; its page is answered 304 (the ETag it stored).
    const ran = onceBeforeServe(fake, `/repos/${REPO}/issues/`, async () => {
      items.push(newest);
      const before = fake.requests.length;
      await driver.pass(id, ['issues'], { mode: 'incremental' });
      const asked = fake.requests.slice(before).filter((r) => listing(r.url));
      expect(asked.map((r) => [r.url, r.headers['if-none-match'] !== undefined])).toEqual([[validated, true]]);
    });
    await driver.pass(id, ['issues'], { mode: 'full' });
    expect(ran()).toBe(true);
    fake.beforeServe = null;
    const gone = deleted.map((n) => `${REPO}#${n}`);
    // The full pass's listing did not serve #1, and it was past the candidates re-checked.
    expect(await driver.tombstones(id, 'issues')).toEqual([...gone, `${REPO}#1`].sort());

    // GitHub is quiet now: the next incremental pass brings #1 back as GitHub has it.
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(await driver.tombstones(id, 'issues')).toEqual([...gone].sort());
    const live = await driver.live(id, 'issues');
    expect(live.get(`${REPO}#1`)).toEqual(newest);
    expect(live.size).toBe(ISSUES - DELETED);
  });

  it('confirms no validator a full pass ending while the 304 was in flight forgot', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, baseTime: new Date(Date.now() - 24 * 3600_000).toISOString(), repos: { [REPO]: { id: 663, issues: ISSUES } } });
    const id = await driver.connection('github', { base_url: fake.baseUrl, repositories: [REPO], resource_types: ['issues'] }, { token: TOKEN });
    const items = fake.repos.get(REPO)!.items;
    await driver.pass(id, ['issues'], { mode: 'full' });
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    const newest = items.find((i) => i.number === 1)!;
    const validated = fake.requests.at(-1)!.url;
    const deleted = items.filter((i) => i.number > ISSUES - DELETED).map((i) => i.number);

    // While the next incremental pass's request for its page (with the ETag it read at its start)
    // is in flight: the oldest issues are deleted at GitHub, GitHub hides #1, a full pass runs
    // whole and tombstones #1 past its re-checks, then GitHub shows #1 again, unchanged; the
    // incremental request is answered 304.
    const ran = onceBeforeServe(fake, `/repos/${REPO}/issues`, async () => {
      for (const n of deleted) fake.remove(REPO, n);
      fake.hide(REPO, 1);
      await driver.pass(id, ['issues'], { mode: 'full' });
      expect(await driver.tombstones(id, 'issues')).toContain(`${REPO}#1`);
      items.push(newest);
    });
    const before = fake.requests.length;
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(ran()).toBe(true);
    fake.beforeServe = null;
    // Its one request was the page of the ETag, asked with it (answered 304: nothing changed since).
    expect(fake.requests.slice(before).filter((r) => r.url === validated).map((r) => r.headers['if-none-match'] !== undefined)).toEqual([true]);

    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(await driver.tombstones(id, 'issues')).toEqual(deleted.map((n) => `${REPO}#${n}`).sort());
    expect((await driver.live(id, 'issues')).get(`${REPO}#1`)).toEqual(newest);
  });
});
