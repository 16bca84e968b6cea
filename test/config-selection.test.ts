// What a config change that stops selecting a partition (a GitHub repository, a resource type, an
// http resource) does to the stored records: they leave the live set as tombstones, each with one
// deletion change in the feed, at the PATCH itself (so no later than any next pass); a pass (or
// an immediate sync) that began before the change writes none of them after it; selected again,
// they come back at the next pass as new versions. Runs the sync activities directly (real
// Postgres, fake providers on 127.0.0.1) and the PATCH command as the API runs it.
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { syncImmediately } from '../activities/sync-immediately';
import { updateConnection } from '../commands/connections';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { onceBeforeServe, startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { serve } from './helpers/fake-server';
import { fakeTemporal } from './helpers/fake-temporal';
import { createHttpConnection, runPass } from './helpers/http-sync';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_config_selection_token_12345';

describe('records of what a config change stops selecting', () => {
  const { db, driver } = useSyncDriver();

  const config = (fake: FakeGitHub, repositories: string[], types: string[] = ['issues']) => ({
    base_url: fake.baseUrl,
    repositories,
    resource_types: types,
    per_page: 100,
  });
  const patch = (id: string, config: Record<string, unknown>) => updateConnection(testCommandDeps(db.pool, fakeTemporal().client), id, { config });
  const incremental = (id: string, types = ['issues']) => driver.pass(id, types, { mode: 'incremental' });
  const full = (id: string, types = ['issues']) => driver.pass(id, types, { mode: 'full' });
  const live = async (id: string, type = 'issues') => [...(await driver.live(id, type)).keys()].sort();
  /** The feed's position now (the connection's newest change). */
  const head = async (id: string) =>
    (await db.pool.query<{ seq: string }>('select coalesce(max(change_seq), 0)::text as seq from records where connection_id = $1', [id])).rows[0]!.seq;
  /** The feed after position `after`: each record once, as `change external_id`, in feed order. */
  const feed = async (id: string, after: string) =>
    (
      await db.pool.query<{ line: string }>(
        `select change::text || ' ' || external_id as line from records where connection_id = $1 and change_seq > $2::bigint order by change_seq`,
        [id, after],
      )
    ).rows.map((r) => r.line);

  it('a repository renamed in the config (octo/hello to octo/world, served under the new name) leaves one live record per issue, the old ids tombstoned once', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'octo/hello': { id: 701, issues: 3 } } });
    const id = await driver.connection('github', config(fake, ['octo/hello']), { token: TOKEN });
    await full(id);
    expect(await live(id)).toEqual(['octo/hello#1', 'octo/hello#2', 'octo/hello#3']);
    const before = await head(id);

    // GitHub renamed the repository: it serves its issues under the new name.
    fake.repos.set('octo/world', fake.repos.get('octo/hello')!);
    fake.repos.delete('octo/hello');
    await patch(id, config(fake, ['octo/world']));
    expect(await live(id)).toEqual([]);
    await incremental(id);
    expect(await live(id)).toEqual(['octo/world#1', 'octo/world#2', 'octo/world#3']);
    const changes = await feed(id, before);
    expect(changes.filter((c) => c.startsWith('delete ')).sort()).toEqual(['delete octo/hello#1', 'delete octo/hello#2', 'delete octo/hello#3']);

    // Later passes of any mode change nothing more.
    const settled = await head(id);
    await incremental(id);
    await full(id);
    expect(await feed(id, settled)).toEqual([]);
  });

  it('a repository removed from the config has its issues tombstoned at the PATCH; configured again, they come back at the next incremental pass as new versions', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 711, issues: 2 }, 'o/b': { id: 712, issues: 2 } } });
    const id = await driver.connection('github', config(fake, ['o/a', 'o/b']), { token: TOKEN });
    await full(id);
    await incremental(id);
    const before = await head(id);

    await patch(id, config(fake, ['o/a']));
    expect(await live(id)).toEqual(['o/a#1', 'o/a#2']);
    await incremental(id);
    expect(await live(id)).toEqual(['o/a#1', 'o/a#2']);
    expect((await feed(id, before)).sort()).toEqual(['delete o/b#1', 'delete o/b#2']);

    const removed = await head(id);
    await patch(id, config(fake, ['o/a', 'o/b']));
    await incremental(id);
    expect(await live(id)).toEqual(['o/a#1', 'o/a#2', 'o/b#1', 'o/b#2']);
    expect((await feed(id, removed)).sort()).toEqual(['insert o/b#1', 'insert o/b#2']);
  });

  it('a resource type removed from the config has its records tombstoned at the PATCH (no pass of its own runs again)', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/p': { id: 721, issues: 2, pulls: 2 } } });
    const id = await driver.connection('github', config(fake, ['o/p'], ['issues', 'pull_requests']), { token: TOKEN });
    await full(id, ['issues', 'pull_requests']);
    expect(await live(id, 'pull_requests')).toEqual(['o/p#2', 'o/p#4']);
    const before = await head(id);

    await patch(id, config(fake, ['o/p'], ['issues']));
    expect(await live(id, 'pull_requests')).toEqual([]);
    await incremental(id, ['issues']);
    await full(id, ['issues']);
    expect(await live(id, 'pull_requests')).toEqual([]);
    expect((await feed(id, before)).sort()).toEqual(['delete o/p#2', 'delete o/p#4']);
  });

  it.each([
    ['a pass', (id: string) => incremental(id)],
    ['an immediate sync', (id: string) =>
      new MockActivityEnvironment({ attempt: 1 }).run(syncImmediately(testActivityDeps({ pool: db.pool }).deps), { connectionId: id, mode: 'incremental' as const })],
  ])('%s that began before the PATCH removing a repository writes none of its issues after it', async (_, run: (id: string) => Promise<unknown>) => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 731, issues: 2 }, 'o/b': { id: 732, issues: 2 } } });
    const id = await driver.connection('github', config(fake, ['o/a', 'o/b']), { token: TOKEN });
    await full(id);
    fake.touch('o/b', 1);
    fake.touch('o/b', 2);
    // The next run has read the config naming o/b; while it reads o/a, o/b is removed: it asks
    // for o/b after the tombstones were written (a page fetched before them could not undo them).
    const changed = onceBeforeServe(fake, '/repos/o/a/', () => patch(id, config(fake, ['o/a'])));
    await run(id);
    fake.beforeServe = null;
    expect(changed()).toBe(true);
    expect(fake.requests.some((r) => r.url.startsWith('/repos/o/b/issues'))).toBe(true);
    expect(await live(id)).toEqual(['o/a#1', 'o/a#2']);
    expect(await driver.tombstones(id, 'issues')).toEqual(['o/b#1', 'o/b#2']);
    // Nothing of o/b was written after its tombstone: each is one deletion in the feed.
    expect((await feed(id, '0')).filter((c) => c.includes('o/b#')).sort()).toEqual(['delete o/b#1', 'delete o/b#2']);
  });

  it('a pass that spans a repository removed and configured again leaves no issue of it tombstoned for good', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 741, issues: 2 }, 'o/b': { id: 742, issues: 3 } } });
    const id = await driver.connection('github', config(fake, ['o/a', 'o/b']), { token: TOKEN });
    await full(id);
    fake.touch('o/b', 1);
    // While the next pass asks for o/b, o/b is removed and configured again: the pass reads o/b
    // from its old cursor (one issue), the other two were tombstoned meanwhile.
    const changed = onceBeforeServe(fake, '/repos/o/b/', async () => {
      await patch(id, config(fake, ['o/a']));
      await patch(id, config(fake, ['o/a', 'o/b']));
    });
    await incremental(id);
    fake.beforeServe = null;
    expect(changed()).toBe(true);
    await incremental(id);
    expect(await live(id)).toEqual(['o/a#1', 'o/a#2', 'o/b#1', 'o/b#2', 'o/b#3']);
  });

  it('an http resource removed from the config has its records tombstoned at the PATCH; configured again, they come back at its next pass', async () => {
    const fake = await serve((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const items = path === '/a' ? [{ id: 'a-1' }, { id: 'a-2' }] : [{ id: 'b-1' }];
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items }));
    });
    const resource = (path: string) => ({ path, records: 'items', id: 'id' });
    const both = { base_url: fake.url, resources: { a: resource('/a'), b: resource('/b') } };
    const id = await createHttpConnection(db.pool, both, 'selection-http');
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, id, 'a', 'full');
    await runPass(deps, id, 'b', 'full');
    expect(await live(id, 'b')).toEqual(['b-1']);
    const before = await head(id);

    await patch(id, { base_url: fake.url, resources: { a: resource('/a') } });
    expect(await live(id, 'b')).toEqual([]);
    await runPass(deps, id, 'a', 'incremental');
    expect(await live(id, 'b')).toEqual([]);
    expect(await live(id, 'a')).toEqual(['a-1', 'a-2']);
    expect(await feed(id, before)).toEqual(['delete b-1']);

    // Configured again, the resource's records come back at its next pass.
    const removed = await head(id);
    await patch(id, both);
    await runPass(deps, id, 'b', 'incremental');
    expect(await live(id, 'b')).toEqual(['b-1']);
    expect(await feed(id, removed)).toEqual(['insert b-1']);
  });
});
