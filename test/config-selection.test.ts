// What a config change that stops selecting a partition (a GitHub repository, a resource type, an
// http resource) does to the stored records: they leave the live set as tombstones, each with one
// deletion change in the feed, a batch of them at the PATCH itself and the rest by the reconcile
// tick (so the request's work is bounded); a pass (or an immediate sync) that began before the
// change writes none of them after it; selected again, they come back at the next pass as new
// versions, and the tick tombstones nothing the config selects again. Runs the sync activities and
// the tick's step directly (real Postgres, fake providers on 127.0.0.1) and the PATCH command as
// the API runs it.
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { finishDeselections } from '../activities/finish-deselections';
import { reconcileConnections } from '../activities/reconcile-connections';
import { syncImmediately } from '../activities/sync-immediately';
import { updateConnection } from '../commands/connections';
import { DESELECTION_BATCH } from '../db/models/records';
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

  /** Inserts `count` live records of `type` (ids `prefix` + n) as a pass would have stored them. */
  const many = async (id: string, type: string, prefix: string, count: number) => {
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, fetched_at)
       select $1, $2, $3 || n, jsonb_build_object('n', n), now(), now() from generate_series(1, $4::int) n`,
      [id, type, prefix, count],
    );
  };
  /** The position the records' change sequence has reached (every change of any record takes one). */
  const sequence = async () => (await db.pool.query<{ seq: string }>('select last_value::text as seq from records_change_seq')).rows[0]!.seq;
  /** The connection's pending deselections, as `type:prefix`. */
  const pendingOf = async (id: string) =>
    (await db.pool.query<{ unit: string }>(`select resource_type || ':' || id_prefix as unit from pending_deselections where connection_id = $1 order by 1`, [id])).rows.map((r) => r.unit);
  const quietDeps = () => testActivityDeps({ pool: db.pool }).deps;
  const tombstoneCount = async (id: string, type: string) =>
    (await db.pool.query<{ n: number }>('select count(*)::int as n from records where connection_id = $1 and resource_type = $2 and deleted_at is not null', [id, type])).rows[0]!.n;

  it('a PATCH that stops selecting a resource type of many records tombstones one batch in its request; the reconcile tick tombstones the rest in batches, each record one deletion', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/m': { id: 751, issues: 1, pulls: 1 } } });
    const id = await driver.connection('github', config(fake, ['o/m'], ['issues', 'pull_requests']), { token: TOKEN });
    await many(id, 'pull_requests', 'o/m#pr-', 3000);
    const before = await head(id);
    const seqBefore = await sequence();

    await patch(id, config(fake, ['o/m'], ['issues']));
    // The request's work does not grow with the records: one batch, the rest pending.
    expect(await tombstoneCount(id, 'pull_requests')).toBe(DESELECTION_BATCH);
    expect(await pendingOf(id)).toEqual(['pull_requests:']);

    // The tick's step goes batch by batch (one here), each its own transaction...
    expect(await finishDeselections(quietDeps(), 1)).toEqual({ tombstoned: DESELECTION_BATCH, finished: 0, batches: 1 });
    expect(await tombstoneCount(id, 'pull_requests')).toBe(2 * DESELECTION_BATCH);
    // ...and the reconcile tick finishes them.
    const tick = await reconcileConnections(testActivityDeps({ pool: db.pool, temporal: fakeTemporal().client }).deps)({ at: Date.now() });
    expect(tick.deselectedTombstoned).toBe(1000);
    expect(await live(id, 'pull_requests')).toEqual([]);
    expect(await pendingOf(id)).toEqual([]);
    // Each record is one deletion in the feed: 3,000 changes, 3,000 positions taken.
    const changes = await feed(id, before);
    expect({ changes: changes.length, deletes: new Set(changes.filter((c) => c.startsWith('delete o/m#pr-'))).size }).toEqual({ changes: 3000, deletes: 3000 });
    expect(BigInt(await sequence()) - BigInt(seqBefore)).toBe(3000n);

    // Done: another step changes nothing.
    const settled = await head(id);
    expect(await finishDeselections(quietDeps())).toEqual({ tombstoned: 0, finished: 0, batches: 0 });
    expect(await head(id)).toBe(settled);
  });

  it('a resource type selected again before the tick finished its deselection keeps the records a pass stores of it', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/r': { id: 761, issues: 1, pulls: 2 } } });
    const both = config(fake, ['o/r'], ['issues', 'pull_requests']);
    const id = await driver.connection('github', both, { token: TOKEN });
    await many(id, 'pull_requests', 'o/r#pr-', 2500);

    await patch(id, config(fake, ['o/r'], ['issues']));
    expect(await pendingOf(id)).toEqual(['pull_requests:']);
    await patch(id, both);
    await incremental(id, ['pull_requests']);
    const synced = await live(id, 'pull_requests');
    expect(synced).toEqual(expect.arrayContaining(['o/r#2', 'o/r#3']));
    // The type's repositories are named again: the tick, reading the config under the feed lock,
    // tombstones none of their records and ends the deselection (after visiting the rest of them).
    const settled = await head(id);
    expect(await finishDeselections(quietDeps())).toMatchObject({ tombstoned: 0, finished: 1 });
    expect(await head(id)).toBe(settled);
    expect(await pendingOf(id)).toEqual([]);
    // Those the request did not reach stay live (a later full pass judges them as any record).
    expect(synced).toHaveLength(2 + 2500 - DESELECTION_BATCH);
  });

  it('an http resource selected again has its pending deselection dropped in the same request, before any tick', async () => {
    const fake = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: [{ id: 'new-1' }] })));
    const resource = (path: string) => ({ path, records: 'items', id: 'id' });
    const both = { base_url: fake.url, resources: { a: resource('/a'), b: resource('/b') } };
    const id = await createHttpConnection(db.pool, both, 'selection-http-again');
    await many(id, 'b', 'b-', 1500);
    await patch(id, { base_url: fake.url, resources: { a: resource('/a') } });
    expect(await pendingOf(id)).toEqual(['b:']);
    await patch(id, both);
    expect(await pendingOf(id)).toEqual([]);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, id, 'b', 'incremental');
    expect(await finishDeselections(quietDeps())).toEqual({ tombstoned: 0, finished: 0, batches: 0 });
    expect(await live(id, 'b')).toContain('new-1');
  });

  it('a resource type dropped whole and listed again for fewer repositories: the tick tombstones the rest, never the repositories named again', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 771, issues: 2 }, 'o/b': { id: 772, issues: 2 } } });
    const id = await driver.connection('github', config(fake, ['o/a', 'o/b'], ['issues', 'pull_requests']), { token: TOKEN });
    await many(id, 'issues', 'o/a#x-', 1500);
    await many(id, 'issues', 'o/b#x-', 1500);

    await patch(id, config(fake, ['o/a', 'o/b'], ['pull_requests']));
    expect(await tombstoneCount(id, 'issues')).toBe(DESELECTION_BATCH);
    // Issues again, of o/a only: what is left of o/b's goes; o/a's records are the config's again.
    await patch(id, config(fake, ['o/a'], ['issues', 'pull_requests']));
    expect(await pendingOf(id)).toEqual(['issues:']);
    await incremental(id, ['issues']);
    await finishDeselections(quietDeps());
    expect(await pendingOf(id)).toEqual([]);
    const left = await live(id);
    expect(left.filter((x) => x.startsWith('o/b#'))).toEqual([]);
    expect(left).toEqual(expect.arrayContaining(['o/a#1', 'o/a#2']));
  });

  it('a repository removed among many records of another: the request visits one batch of the type, the tick reaches the removed repository\'s issues', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 791, issues: 1 }, 'o/z': { id: 792, issues: 1 } } });
    const id = await driver.connection('github', config(fake, ['o/a', 'o/z']), { token: TOKEN });
    await many(id, 'issues', 'o/a#x-', 2500);
    await many(id, 'issues', 'o/z#x-', 5);

    await patch(id, config(fake, ['o/a']));
    // o/z's issues come after o/a's in id order: the request's batch reached none of them.
    expect(await tombstoneCount(id, 'issues')).toBe(0);
    expect(await pendingOf(id)).toEqual(['issues:o/z#']);
    expect(await finishDeselections(quietDeps())).toMatchObject({ tombstoned: 5, finished: 1 });
    expect(await driver.tombstones(id, 'issues')).toEqual(['o/z#x-1', 'o/z#x-2', 'o/z#x-3', 'o/z#x-4', 'o/z#x-5']);
    expect((await live(id)).length).toBe(2500);
  });

  it('a connection being purged keeps its pending deselections out of the tick, and its deletion takes them with it', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/g': { id: 781, issues: 1, pulls: 1 } } });
    const id = await driver.connection('github', config(fake, ['o/g'], ['issues', 'pull_requests']), { token: TOKEN });
    await many(id, 'pull_requests', 'o/g#pr-', 1500);
    await patch(id, config(fake, ['o/g'], ['issues']));
    await db.pool.query(`insert into connection_purges (connection_id, tenant_id) values ($1, 'acme')`, [id]);
    expect(await finishDeselections(quietDeps())).toMatchObject({ tombstoned: 0 });
    expect(await pendingOf(id)).toEqual(['pull_requests:']);
    await db.pool.query('delete from connection_purges where connection_id = $1', [id]);
    await db.pool.query('delete from records where connection_id = $1', [id]);
    await db.pool.query('delete from connections where id = $1', [id]);
    expect(await pendingOf(id)).toEqual([]);
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
