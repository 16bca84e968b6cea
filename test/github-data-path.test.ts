// The GitHub data path while GitHub's data changes: cursors per repository, a repository added
// later, paging over issues that move while a pass reads them, and conditional requests. Each
// test drives the syncTask activity directly (real Postgres, the fake GitHub on 127.0.0.1) and
// changes the fake between the page requests of a pass, as GitHub's users would, or the
// connection's config between the attempts of a task.
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { syncTask } from '../activities/sync-task';
import { updateConnection } from '../commands/connections';
import { encodeGitHubPageToken } from '../connectors/github';
import { earliestStampDuring } from '../policy/cursor';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { onceBeforeServe, startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { fakeTemporal } from './helpers/fake-temporal';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_data_path_token_1234567890';

describe('github data path under change', () => {
  const { db, driver } = useSyncDriver();

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

  /**
   * A full pass over issues whose first attempt fails (a 5xx) at the first request matching
   * `failAt`, leaving the task processing with its page token; `resume` runs the activity's retry,
   * `token` reads (or `setToken` replaces) the stored page token, `end` ends the job.
   */
  const interruptedFull = async (fake: FakeGitHub, connectionId: string, failAt: RegExp) => {
    const run = syncTask(testActivityDeps({ pool: db.pool }).deps);
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status) values ($1, $2, 'acme', 'full', 'manual', 'running')`,
      [jobId, connectionId],
    );
    const { rows } = await db.pool.query<{ id: string }>(`insert into sync_tasks (job_id, resource_type) values ($1, 'issues') returning id`, [jobId]);
    const input = { jobId, taskId: rows[0]!.id, resourceType: 'issues', mode: 'full' as const };
    fake.setFailure({ kind: 'server_error', path: failAt, times: 1 });
    await expect(new MockActivityEnvironment({ attempt: 1 }).run(run, input)).rejects.toThrow();
    fake.setFailure(null);
    return {
      resume: () => new MockActivityEnvironment({ attempt: 2 }).run(run, input),
      token: async () => {
        const { rows: [task] } = await db.pool.query<{ page_token: string }>('select page_token from sync_tasks where id = $1', [input.taskId]);
        return JSON.parse(Buffer.from(task!.page_token, 'base64url').toString('utf8')) as Record<string, unknown>;
      },
      setToken: (token: string) => db.pool.query('update sync_tasks set page_token = $2 where id = $1', [input.taskId, token]),
      end: () => db.pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [jobId]),
    };
  };
  /** The listing requests (path + query) the fake received from request `from` on. */
  const listings = (fake: FakeGitHub, from: number) => fake.requests.slice(from).map((r) => r.url).filter((u) => /\/issues\?/.test(u));

  it('keeps a cursor per repository: an issue edited in A while B is read (B changing later) is synced', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 601, issues: 3 }, 'o/b': { id: 602, issues: 3 } } });
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

  it('a repository named again in other letter case (GitHub names ignore case) keeps its records: none stored twice, none tombstoned', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'Octo/Hello': { id: 605, issues: 3 } } });
    const id = await connection(fake, ['Octo/Hello']);
    await full(id);
    const before = await titles(id);
    expect(before).toEqual(truth(fake, ['Octo/Hello']));

    const patched = await updateConnection(testCommandDeps(db.pool, fakeTemporal().client), id, { config: config(fake, ['octo/hello']) });
    expect(patched.config?.repositories).toEqual(['Octo/Hello']);
    await issues(id);
    expect(await titles(id)).toEqual(before);
    await full(id);
    expect(await titles(id)).toEqual(before);
    expect(await driver.tombstones(id, 'issues')).toEqual([]);
  });

  it('a full pass that ends after a PATCH named again a repository its config had dropped tombstones nothing; the issues the drop tombstoned come back at the next pass', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 606, issues: 2 }, 'o/b': { id: 607, issues: 2 } } });
    const id = await connection(fake, ['o/a', 'o/b']);
    await full(id);
    const commands = testCommandDeps(db.pool, fakeTemporal().client);
    await updateConnection(commands, id, { config: config(fake, ['o/a']) });
    // Dropped, o/b is no longer synced: its issues are tombstones.
    expect(await driver.tombstones(id, 'issues')).toEqual(['o/b#1', 'o/b#2']);
    // While the next full pass reads o/a alone, o/b is configured again.
    const changed = onceBeforeServe(fake, '', () => updateConnection(commands, id, { config: config(fake, ['o/a', 'o/b']) }));
    const pass = await full(id);
    fake.beforeServe = null;
    expect(changed()).toBe(true);
    expect(pass.get('issues')).toMatchObject({ status: 'completed', deletedCount: 0 });
    expect(await driver.tombstones(id, 'issues')).toEqual(['o/b#1', 'o/b#2']);
    // Named again, o/b has no cursor: the next pass reads it whole.
    await issues(id);
    expect(await driver.tombstones(id, 'issues')).toEqual([]);
    expect(await titles(id)).toEqual(truth(fake, ['o/a', 'o/b']));
  });

  it('reads the whole history of a repository added to the config later (its partition has no cursor)', async () => {
    const gh = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 611, issues: 3 }, 'o/new': { id: 612, issues: 5 } } });
    const id = await connection(gh, ['o/a']);
    gh.touch('o/a', 1, '2025-06-01T00:00:00Z'); // A's cursor is newer than any issue of o/new
    await full(id);
    await driver.setConfig(id, config(gh, ['o/a', 'o/new']));
    await issues(id);
    const stored = await titles(id);
    expect([...stored.keys()].filter((k) => k.startsWith('o/new#')).length).toBe(5);
    expect(stored).toEqual(truth(gh, ['o/a', 'o/new']));
  });

  it('an incremental pass skips no issue when one it already read is edited mid-pass (the rest do not slide into read pages)', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/shift': { id: 621, issues: 6 } } });
    const id = await connection(fake, ['o/shift'], 2);
    await full(id);
    // Four issues change before the pass (the oldest first), so it reads them over three pages…
    for (const [n, s] of [[6, 1], [5, 2], [4, 3], [3, 4]] as const) fake.touch('o/shift', n, `2025-02-01T00:00:0${s}Z`);
    // …and the first of them, already read on page 1, changes again after that page.
    onceAfter(fake, /\/issues/, () => fake.touch('o/shift', 6, '2025-02-01T00:00:05Z'));
    await issues(id);
    fake.afterServe = null;
    await issues(id);
    expect(await titles(id)).toEqual(truth(fake, ['o/shift']));
  });

  it('an incremental pass skips no pull request when GitHub hides one it already read (the rest move up one position, newest first)', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/hide': { id: 622, pulls: 6 } } });
    const id = await driver.connection('github', { ...config(fake, ['o/hide'], 2), resource_types: ['pull_requests'] }, { token: TOKEN });
    const pulls = (mode: 'full' | 'incremental') => driver.pass(id, ['pull_requests'], { mode });
    await pulls('full');
    // Four pull requests change before the pass: newest first it reads #6 and #5 on page 1, #4 and #3 on page 2…
    for (const [n, s] of [[3, 1], [4, 2], [5, 3], [6, 4]] as const) fake.touch('o/hide', n, `2025-02-01T00:00:0${s}Z`);
    // …but GitHub hides #6 after page 1: #4 moves up onto page 1, which was already read.
    onceAfter(fake, /\/pulls/, () => fake.hide('o/hide', 6));
    await pulls('incremental');
    fake.afterServe = null;
    await pulls('incremental');
    const stored = new Map([...(await driver.live(id, 'pull_requests'))].filter(([k]) => k !== 'o/hide#6').map(([k, v]) => [k, v.title]));
    expect(stored).toEqual(new Map(fake.repos.get('o/hide')!.items.map((i) => [`o/hide#${i.number}`, i.title])));
  });

  it('a full pass does not tombstone an issue that slid into a page already read because another was edited mid-pass', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/slide': { id: 631, issues: 6 } } });
    const id = await connection(fake, ['o/slide'], 2);
    await full(id);
    // The oldest issue (page 1) is edited after page 1 was served: it moves to the end.
    onceAfter(fake, /\/issues/, () => fake.touch('o/slide', 6));
    const pass = await full(id);
    expect(pass.get('issues')).toMatchObject({ status: 'completed', deletedCount: 0 });
    expect(await driver.tombstones(id, 'issues')).toEqual([]);
    expect(await titles(id)).toEqual(truth(fake, ['o/slide']));
  });

  it('a 304 on a first page skips that page only: an issue moved to a later page of the same listing is still synced', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/bulk': { id: 641, issues: 6 } } });
    const id = await connection(fake, ['o/bulk'], 2);
    await full(id);
    // A bulk edit of five issues in one second: the listing from the cursor spans three pages.
    const second = '2025-03-01T00:00:00Z';
    for (const n of [1, 2, 3, 4, 5]) fake.touch('o/bulk', n, second);
    await issues(id);
    await issues(id); // stores the validators of the listing from that second
    // One issue of page 2 changes: it moves to the end; page 1 stays the same (and answers 304).
    fake.touch('o/bulk', 3, '2025-03-01T00:00:01Z');
    const before = fake.requests.length;
    await issues(id);
    expect(fake.requests.slice(before).some((r) => r.headers['if-none-match'] !== undefined)).toBe(true);
    await issues(id);
    expect(await titles(id)).toEqual(truth(fake, ['o/bulk']));
  });

  it('an issue changed after a last page served whole is synced though that page answers 304 (GitHub\'s ETag covers the body, not the Link header)', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/whole': { id: 642, issues: 3 } } });
    const id = await connection(fake, ['o/whole'], 2);
    await full(id);
    // Two issues edited in one second: the listing from the cursor (that second) is one page of
    // exactly per_page issues, the last.
    const second = '2025-04-01T00:00:00Z';
    for (const n of [1, 2]) fake.touch('o/whole', n, second);
    await issues(id);
    await issues(id); // stores the validator of that page, the listing's last
    // A third issue changes a second later: the listing grows behind the page, whose items (and
    // so its ETag) stay the same; only its Link header now names a next page.
    fake.touch('o/whole', 3, '2025-04-01T00:00:01Z');
    const before = fake.requests.length;
    await issues(id);
    expect(fake.requests.slice(before).some((r) => r.headers['if-none-match'] !== undefined)).toBe(true);
    expect(await titles(id)).toEqual(truth(fake, ['o/whole']));
    // Quiet: the next pass reads nothing new and keeps what it has.
    await issues(id);
    expect(await titles(id)).toEqual(truth(fake, ['o/whole']));
  });

  it('a stored validator of an oldest-first last page whose note does not say whether it was served whole (written before notes said so) is not sent', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/older': { id: 643, issues: 3 } } });
    const id = await connection(fake, ['o/older'], 2);
    await full(id);
    const second = '2025-04-01T00:00:00Z';
    for (const n of [1, 2]) fake.touch('o/older', n, second);
    await issues(id);
    await issues(id);
    // The notes as an older version wrote them: the listing's end, nothing said of the page's size.
    await db.pool.query(`update provider_etags set next = (next::jsonb - 'full')::text where connection_id = $1`, [id]);
    fake.touch('o/older', 3, '2025-04-01T00:00:01Z');
    await issues(id);
    expect(await titles(id)).toEqual(truth(fake, ['o/older']));
  });

  it('the deletion step re-checks what a full pass did not see: an issue GitHub still has is kept, a deleted one and one of a dropped repository go', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/keep': { id: 651, issues: 4 }, 'o/drop': { id: 652, issues: 2 } } });
    const id = await connection(fake, ['o/keep', 'o/drop']);
    await full(id);
    await driver.setConfig(id, config(fake, ['o/keep']));
    fake.remove('o/keep', 4);
    // Issue 3 is missing from the listing the pass reads, but GitHub has it again right after.
    const items = fake.repos.get('o/keep')!.items;
    const hidden = items.splice(items.findIndex((i) => i.number === 3), 1)[0]!;
    onceAfter(fake, /^\/repos\/o\/keep\/issues\?/, () => items.push(hidden));
    const before = fake.requests.length;
    const pass = await full(id);
    expect(pass.get('issues')).toMatchObject({ status: 'completed', deletedCount: 3 });
    expect(await driver.tombstones(id, 'issues')).toEqual(['o/drop#1', 'o/drop#2', 'o/keep#4']);
    expect(await titles(id)).toEqual(truth(fake, ['o/keep']));
    // One GET per candidate of a configured repository: #3 (alive) and #4 (410 Gone).
    expect(fake.requests.slice(before).map((r) => r.url).filter((u) => /\/issues\/\d+$/.test(u)).sort()).toEqual(['/repos/o/keep/issues/3', '/repos/o/keep/issues/4']);
    // The dropped repository lost its cursor: named again, its whole history comes back.
    await driver.setConfig(id, config(fake, ['o/keep', 'o/drop']));
    await issues(id);
    expect(await titles(id)).toEqual(truth(fake, ['o/keep', 'o/drop']));
  });

  it('caps a repository cursor at the task start less the clock skew, never at the newest change seen beyond it', async () => {
    const gh = await startFakeGitHub({ token: TOKEN, repos: { 'o/future': { id: 661, issues: 2 } } });
    const id = await connection(gh, ['o/future']);
    // GitHub's clock runs an hour ahead of ours.
    gh.touch('o/future', 1, new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z'));
    await full(id);
    const { rows } = await db.pool.query<{ cursor: Date; started_at: Date }>(
      `select s.cursor, (select max(t.started_at) from sync_tasks t join sync_jobs j on j.id = t.job_id where j.connection_id = $1) as started_at
         from sync_state s where s.connection_id = $1 and s.partition = 'o/future'`,
      [id],
    );
    expect(rows[0]!.cursor).toEqual(earliestStampDuring(rows[0]!.started_at));
    expect(rows[0]!.cursor.getTime()).toBe(Math.floor((rows[0]!.started_at.getTime() - 60_000) / 1000) * 1000);
  });

  it('a task resumed after a repository before its own was dropped goes on by name: each repository\'s pages under its own name, none tombstoned', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 671, issues: 4 }, 'o/b': { id: 672, issues: 4 }, 'o/c': { id: 673, issues: 4 } } });
    const id = await connection(fake, ['o/a', 'o/b', 'o/c'], 2);
    await full(id);
    // The retried pass fails on o/b's second page: its token names o/b and that page's URL.
    const task = await interruptedFull(fake, id, /^\/repos\/o\/b\/issues\?.*since=/);
    try {
      const token = await task.token();
      expect(String(token.url)).toMatch(/\/repos\/o\/b\/issues\?.*since=/);
      // The user drops o/a (a PATCH); the activity's retry resumes the task.
      await driver.setConfig(id, config(fake, ['o/b', 'o/c'], 2));
      const before = fake.requests.length;
      expect(await task.resume()).toMatchObject({ status: 'completed' });
      // Resumed at o/b's page, not from the start: o/b is still configured and nothing before it is unread.
      expect(listings(fake, before)[0]).toBe(new URL(String(token.url)).pathname + new URL(String(token.url)).search);
      expect(await titles(id)).toEqual(new Map([...truth(fake, ['o/a']), ...truth(fake, ['o/b', 'o/c'])]));
      expect((await driver.tombstones(id, 'issues')).filter((x) => !x.startsWith('o/a#'))).toEqual([]);
      expect(token).toMatchObject({ repo: 'o/b', done: ['o/a'] });
    } finally {
      await task.end();
    }
  });

  it('a task resumed after its repository list was reordered or its repository dropped reads the pass again from its first page, tombstoning no configured repository', async () => {
    // o/c has more issues than the deletion step re-checks: unread, they would be tombstoned.
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 681, issues: 3 }, 'o/b': { id: 682, issues: 3 }, 'o/c': { id: 683, issues: 150 } } });
    const id = await connection(fake, ['o/a', 'o/b', 'o/c']);
    await full(id);
    // o/a is read, o/b's first page fails: the token is o/b's first page, after o/a.
    const moved = await interruptedFull(fake, id, /^\/repos\/o\/b\/issues\?/);
    try {
      const token = await moved.token();
      // o/c now comes before o/b, and this pass has not read it: going on at o/b would skip it.
      await driver.setConfig(id, config(fake, ['o/c', 'o/b']));
      const before = fake.requests.length;
      expect(await moved.resume()).toMatchObject({ status: 'completed', deletedCount: 0 });
      expect(listings(fake, before)[0]).toMatch(/^\/repos\/o\/c\/issues\?(?!.*since=)/);
      expect((await driver.tombstones(id, 'issues')).filter((x) => !x.startsWith('o/a#'))).toEqual([]);
      const stored = await titles(id);
      for (const [key, title] of truth(fake, ['o/b', 'o/c'])) expect(stored.get(key)).toBe(title);
      expect(token).toEqual({ repo: 'o/b', done: ['o/a'], url: null });
    } finally {
      await moved.end();
    }
    // The token's repository is no longer configured: the pass starts again at the first repository.
    await driver.setConfig(id, config(fake, ['o/a', 'o/b', 'o/c']));
    const dropped = await interruptedFull(fake, id, /^\/repos\/o\/b\/issues\?/);
    try {
      await driver.setConfig(id, config(fake, ['o/a', 'o/c']));
      const before = fake.requests.length;
      expect(await dropped.resume()).toMatchObject({ status: 'completed' });
      expect(listings(fake, before).map((u) => u.split('?')[0])).toEqual(['/repos/o/a/issues', '/repos/o/c/issues', '/repos/o/c/issues']);
      expect((await driver.tombstones(id, 'issues')).filter((x) => !x.startsWith('o/b#'))).toEqual([]);
      expect(await titles(id)).toEqual(truth(fake, ['o/a', 'o/c']));
    } finally {
      await dropped.end();
    }
  });

  it('a page token of the format before names (a position) still resumes, and starts the pass again when its URL names another repository', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 691, issues: 4 }, 'o/b': { id: 692, issues: 4 }, 'o/c': { id: 693, issues: 4 } } });
    const id = await connection(fake, ['o/a', 'o/b', 'o/c'], 2);
    await full(id);
    const same = await interruptedFull(fake, id, /^\/repos\/o\/b\/issues\?.*since=/);
    try {
      // As a task in flight at the upgrade stored it: o/b as position 1.
      const url = String((await same.token()).url);
      await same.setToken(encodeGitHubPageToken({ repo: 1, url }));
      const before = fake.requests.length;
      expect(await same.resume()).toMatchObject({ status: 'completed', deletedCount: 0 });
      expect(listings(fake, before)[0]).toBe(new URL(url).pathname + new URL(url).search);
      expect(await titles(id)).toEqual(truth(fake, ['o/a', 'o/b', 'o/c']));
    } finally {
      await same.end();
    }
    // The same token after o/a was dropped: position 1 is o/c now, but the URL is o/b's.
    const moved = await interruptedFull(fake, id, /^\/repos\/o\/b\/issues\?.*since=/);
    try {
      const url = String((await moved.token()).url);
      await moved.setToken(encodeGitHubPageToken({ repo: 1, url }));
      await driver.setConfig(id, config(fake, ['o/b', 'o/c'], 2));
      const before = fake.requests.length;
      expect(await moved.resume()).toMatchObject({ status: 'completed' });
      expect(listings(fake, before)[0]).toMatch(/^\/repos\/o\/b\/issues\?(?!.*since=)/);
      expect((await driver.tombstones(id, 'issues')).filter((x) => !x.startsWith('o/a#'))).toEqual([]);
      expect(new Map([...(await titles(id))].filter(([k]) => !k.startsWith('o/a#')))).toEqual(truth(fake, ['o/b', 'o/c']));
    } finally {
      await moved.end();
    }
  });
});
