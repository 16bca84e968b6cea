// The GitHub data path while GitHub's data changes: cursors per repository, a repository added
// later, paging over issues that move while a pass reads them, and conditional requests. Each
// test drives the syncTask activity directly (real Postgres, the fake GitHub on 127.0.0.1) and
// changes the fake between the page requests of a pass, as GitHub's users would.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from './helpers/database';
import { createTestDatabase } from './helpers/database';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { syncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_data_path_token_1234567890';

describe('github data path under change', () => {
  let db: TestDatabase;
  let driver: ReturnType<typeof syncDriver>;
  let gh: FakeGitHub | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    driver = syncDriver(db.pool);
  });
  afterEach(async () => {
    await gh?.close();
    gh = undefined;
  });
  afterAll(async () => {
    await db?.drop();
  });

  const config = (fake: FakeGitHub, repositories: string[], perPage = 100) => ({
    base_url: fake.baseUrl,
    repositories,
    resource_types: ['issues'],
    per_page: perPage,
  });
  const connection = (fake: FakeGitHub, repositories: string[], perPage = 100) =>
    driver.connection('github', config(fake, repositories, perPage), { token: TOKEN });
  const issues = (id: string) => driver.pass(id, ['issues'], { mode: 'incremental' });
  const full = (id: string) => driver.pass(id, ['issues'], { mode: 'full' });
  /** The fake's issues (no pull requests) of `repos`: external id → title. */
  const truth = (fake: FakeGitHub, repos: string[]) =>
    new Map(
      repos.flatMap((repo) =>
        fake.repos.get(repo)!.items.filter((i) => !('pull_request' in i)).map((i) => [`${repo}#${i.number}`, i.title] as const),
      ),
    );
  const titles = async (id: string) => new Map([...(await driver.live(id, 'issues'))].map(([k, v]) => [k, v.title]));
  /** Runs `change` once, right after the fake answered the first request whose path matches `path`. */
  const onceAfter = (fake: FakeGitHub, path: RegExp, change: () => void) => {
    let done = false;
    fake.afterServe = (_n, url) => {
      if (done || !path.test(url.pathname + url.search)) return;
      done = true;
      change();
    };
  };

  it('keeps a cursor per repository: an issue edited in A while B is read (B changing later) is synced', async () => {
    gh = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 601, issues: 3 }, 'o/b': { id: 602, issues: 3 } } });
    const fake = gh;
    const id = await connection(fake, ['o/a', 'o/b']);
    await full(id);
    // A was read, B not yet: A's issue is edited, then B's, later.
    onceAfter(fake, /^\/repos\/o\/a\/issues/, () => {
      fake.touch('o/a', 1, '2025-02-01T00:00:00Z');
      fake.touch('o/b', 1, '2025-02-01T00:01:00Z');
    });
    await issues(id);
    fake.afterServe = null;
    await issues(id);
    expect(await titles(id)).toEqual(truth(fake, ['o/a', 'o/b']));
  });

  it('reads the whole history of a repository added to the config later (its partition has no cursor)', async () => {
    gh = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 611, issues: 3 }, 'o/new': { id: 612, issues: 5 } } });
    const id = await connection(gh, ['o/a']);
    gh.touch('o/a', 1, '2025-06-01T00:00:00Z'); // A's cursor is newer than any issue of o/new
    await full(id);
    await driver.setConfig(id, config(gh, ['o/a', 'o/new']));
    await issues(id);
    const stored = await titles(id);
    expect([...stored.keys()].filter((k) => k.startsWith('o/new#')).length).toBe(5);
    expect(stored).toEqual(truth(gh, ['o/a', 'o/new']));
  });
});
