// A deselection's tombstones are written by one process (the API's PATCH, or the worker running the
// reconcile tick) and undone by a page another process fetched (a pass, on a worker). Their clocks
// may disagree: whether a page was fetched after a deselection's tombstone must not depend on them.
// Here the process playing the API (or the tick) runs with its clock ten minutes ahead of the one
// playing the worker's pass (Date faked around it only; Postgres keeps its own clock). Real
// Postgres, the fake GitHub on 127.0.0.1, the PATCH command as the API runs it.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { finishDeselections } from '../activities/finish-deselections';
import { updateConnection } from '../commands/connections';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { onceBeforeServe, startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { fakeTemporal } from './helpers/fake-temporal';
import { useSyncDriver } from './helpers/sync-driver';

const TOKEN = 'ghp_deselection_clocks_token_1234';
/** How far ahead of the worker's clock the API's (or the tick's) runs. */
const AHEAD_MS = 10 * 60_000;

describe('a deselection undone by a reselection, across processes whose clocks differ', () => {
  const { db, driver } = useSyncDriver();
  afterEach(() => {
    vi.useRealTimers();
  });

  const config = (fake: FakeGitHub, repositories: string[]) => ({ base_url: fake.baseUrl, repositories, resource_types: ['issues'], per_page: 100 });
  /** Runs `f` in a process whose clock is `by` ms ahead of the real one (the worker's; behind when negative). */
  const skewed = async <T>(by: number, f: () => Promise<T>): Promise<T> => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + by });
    try {
      return await f();
    } finally {
      vi.useRealTimers();
    }
  };
  const ahead = <T>(f: () => Promise<T>) => skewed(AHEAD_MS, f);
  const patch = (id: string, config: Record<string, unknown>) => updateConnection(testCommandDeps(db.pool, fakeTemporal().client), id, { config });
  const live = async (id: string) => [...(await driver.live(id, 'issues')).keys()].sort();

  it.each(['incremental', 'full'] as const)(
    'a repository removed and named again by an API whose clock runs ahead has its issues back after the next %s pass',
    async (mode) => {
      const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 801, issues: 2 }, 'o/b': { id: 802, issues: 2 } } });
      const id = await driver.connection('github', config(fake, ['o/a', 'o/b']), { token: TOKEN });
      await driver.pass(id, ['issues'], { mode: 'full' });
      expect(await live(id)).toEqual(['o/a#1', 'o/a#2', 'o/b#1', 'o/b#2']);

      await ahead(() => patch(id, config(fake, ['o/a'])));
      expect(await live(id)).toEqual(['o/a#1', 'o/a#2']);
      await ahead(() => patch(id, config(fake, ['o/a', 'o/b'])));

      // The pass reads o/b whole (its cursors were forgotten), fetched after the reselection.
      await driver.pass(id, ['issues'], { mode });
      expect(await live(id)).toEqual(['o/a#1', 'o/a#2', 'o/b#1', 'o/b#2']);
    },
  );

  it('a repository whose issues the reconcile tick tombstoned on a worker whose clock runs ahead has them back after the next pass once named again', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 811, issues: 1 }, 'o/z': { id: 812, issues: 2 } } });
    const id = await driver.connection('github', config(fake, ['o/a', 'o/z']), { token: TOKEN });
    await driver.pass(id, ['issues'], { mode: 'full' });
    // Records of o/a ahead of o/z's in id order: the PATCH's own batch reaches none of o/z's.
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, fetched_at)
       select $1, 'issues', 'o/a#x-' || n, jsonb_build_object('n', n), now(), now() from generate_series(1, 1000) n`,
      [id],
    );

    await patch(id, config(fake, ['o/a']));
    expect((await live(id)).filter((x) => x.startsWith('o/z#'))).toEqual(['o/z#1', 'o/z#2']);
    expect(await ahead(() => finishDeselections(testActivityDeps({ pool: db.pool }).deps))).toMatchObject({ tombstoned: 2 });
    await patch(id, config(fake, ['o/a', 'o/z']));

    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect((await live(id)).filter((x) => x.startsWith('o/z#'))).toEqual(['o/z#1', 'o/z#2']);
  });

  it('a page fetched before an API whose clock runs behind removed and named again its repository does not undo the tombstones; the next pass brings them back', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 821, issues: 2 }, 'o/b': { id: 822, issues: 3 } } });
    const id = await driver.connection('github', config(fake, ['o/a', 'o/b']), { token: TOKEN });
    await driver.pass(id, ['issues'], { mode: 'full' });
    fake.touch('o/b', 1);
    // While the next pass's request for o/b is in flight (its fetch began), o/b is removed and
    // named again, by an API whose clock runs ten minutes behind the worker's.
    const changed = onceBeforeServe(fake, '/repos/o/b/', () =>
      skewed(-AHEAD_MS, async () => {
        await patch(id, config(fake, ['o/a']));
        await patch(id, config(fake, ['o/a', 'o/b']));
      }));
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    fake.beforeServe = null;
    expect(changed()).toBe(true);
    // Its page (o/b#1, from the old cursor) was fetched before the tombstones: older news.
    expect(await driver.tombstones(id, 'issues')).toEqual(['o/b#1', 'o/b#2', 'o/b#3']);
    // The next pass, fetched after them, reads o/b whole and brings them all back.
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(await live(id)).toEqual(['o/a#1', 'o/a#2', 'o/b#1', 'o/b#2', 'o/b#3']);
  });

  it('a repository removed and named again by an API whose clock runs ahead: an issue of it deleted at GitHub since is tombstoned by the next full pass', async () => {
    const fake = await startFakeGitHub({ token: TOKEN, repos: { 'o/a': { id: 831, issues: 1 }, 'o/b': { id: 832, issues: 2 } } });
    const id = await driver.connection('github', config(fake, ['o/a', 'o/b']), { token: TOKEN });
    await driver.pass(id, ['issues'], { mode: 'full' });
    await ahead(() => patch(id, config(fake, ['o/a'])));
    await ahead(() => patch(id, config(fake, ['o/a', 'o/b'])));
    await driver.pass(id, ['issues'], { mode: 'incremental' });
    expect(await live(id)).toEqual(['o/a#1', 'o/b#1', 'o/b#2']);

    // Deleted at GitHub: the next full pass judges it as any record written before the pass began.
    fake.remove('o/b', 2);
    await driver.pass(id, ['issues'], { mode: 'full' });
    expect(await driver.tombstones(id, 'issues')).toEqual(['o/b#2']);
  });
});
