// A provider listing newest first (by change time descending, as many APIs do by default), paged
// by its own links or cursors (keyset positions: after this record). An item edited while a pass
// pages moves to the head, behind the position, and the pages still ahead never serve it: without
// a catch-up a full pass would tombstone an item the provider had for the whole pass. Against the
// fake provider of test/helpers/fake-http-provider.ts on 127.0.0.1 and real Postgres, with no item
// lookup (the deletion step goes by the listing's word).
import { describe, expect, it } from 'vitest';
import { httpConnector } from '../connectors/http';
import { encodePageToken } from '../connectors/page-token';
import { useTestDatabase } from './helpers/database';
import { TEST_PROVIDER_POLICY, testActivityDeps } from './helpers/deps';
import { initialItems, paginationOf, RECORDS_PATH, useFakeHttpProviders, type FakeHttpProvider, type FakeHttpStyle } from './helpers/fake-http-provider';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
const startFake = useFakeHttpProviders();

const HOUR = 3_600_000;
let seq = 0;

/** A fake listing newest first with 9 items changed two hours ago (`perSecond` a second), 3 a page; its clock is `clock.ms`. */
async function setUp(style: FakeHttpStyle, newestFirst = true, perSecond = 1) {
  const clock = { ms: Date.now() - 2 * HOUR };
  const fake = await startFake({ size: 3, initial: initialItems(9, clock.ms, perSecond), clock: () => clock.ms, newestFirst });
  const config = {
    base_url: fake.baseUrl,
    pagination: paginationOf(style, 3),
    resources: { items: { path: `/${style}/items`, records: RECORDS_PATH[style], id: 'id', updated_at: 'updated_at', since: { param: 'updated_since' } } },
  };
  seq += 1;
  const connectionId = await createHttpConnection(db.pool, config, `newest-first-${seq}`);
  return { fake, clock, connectionId, config, deps: testActivityDeps({ pool: db.pool }).deps };
}

/** Runs `change` before the `n`th page request from now on (1-based). */
function beforeRequest(fake: FakeHttpProvider, n: number, change: () => void) {
  const first = fake.requests;
  const earlier = fake.beforeRequest;
  fake.beforeRequest = (url) => {
    earlier?.(url);
    if (fake.requests - first === n) change();
  };
}

const tombstones = async (connectionId: string) =>
  [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at !== null).map((r) => r.external_id).sort();

describe.each(['link', 'next', 'cursor'] as const)('http connector, %s paging of a newest-first listing', (style) => {
  it('a full pass does not tombstone an item edited on a page not yet read (it moved to the head)', async () => {
    const { fake, clock, connectionId, deps } = await setUp(style);
    await runPass(deps, connectionId, 'items', 'full');
    expect((await storedRecords(db.pool, connectionId, 'items')).size).toBe(9);
    // Pages [9, 8, 7], [6, 5, 4], [3, 2, 1]. Page 1 is read; then item 2 changes now and moves to
    // the head: page 3 is [3, 1].
    clock.ms = Date.now();
    beforeRequest(fake, 2, () => fake.edit('i00002'));
    const before = fake.requests;
    await runPass(deps, connectionId, 'items', 'full');
    fake.beforeRequest = null;
    expect(await tombstones(connectionId), 'items the provider had for the whole pass were tombstoned').toEqual([]);
    expect((await storedRecords(db.pool, connectionId, 'items')).get('i00002')!.data).toMatchObject({ version: 2 });
    // The three pages, then the head again down to item 9 (the newest change the first page showed): [2, 9, 8].
    expect(fake.requests - before).toBe(4);
  });
});

describe('http connector, a newest-first listing by cursor', () => {
  it('catches up again when its catch-up pass, of more than one page, missed an item changed again meanwhile', async () => {
    const { fake, clock, connectionId, deps } = await setUp('cursor');
    await runPass(deps, connectionId, 'items', 'full');
    clock.ms = Date.now() - HOUR;
    // Page 1 is [9, 8, 7]. Then item 4 changes (at T), and 9, 8, 7 a second later (T+1): page 2 is
    // [6, 5, 3], page 3 [2, 1]. The catch-up down to item 9's old time: [9, 8, 7], then item 4
    // changes again (T+2), moving above the catch-up's position: its page 2 is [6, ...], the end.
    beforeRequest(fake, 2, () => {
      fake.edit('i00004');
      clock.ms += 1000;
      for (const id of ['i00009', 'i00008', 'i00007']) fake.edit(id);
    });
    beforeRequest(fake, 5, () => {
      clock.ms += 1000;
      fake.edit('i00004');
    });
    const before = fake.requests;
    await runPass(deps, connectionId, 'items', 'full');
    fake.beforeRequest = null;
    expect(await tombstones(connectionId), 'items the provider had for the whole pass were tombstoned').toEqual([]);
    expect((await storedRecords(db.pool, connectionId, 'items')).get('i00004')!.data).toMatchObject({ version: 3 });
    // Three pages; a catch-up of two; a second one down to T+1 ([4, 9, 8], [7, 6, 5]: it served
    // item 4, which the first did not); a third down to T+2, one page ([4, 9, 8]): the end.
    expect(fake.requests - before).toBe(3 + 2 + 2 + 1);
  });

  it('ends a catch-up of more than one page that serves the records the pass served at or after its head (a head of one change time over pages)', async () => {
    // Items 1-5 share one second, 6-9 the next: pages [9, 8, 7], [6, 5, 4], [3, 2, 1].
    const { fake, connectionId, deps } = await setUp('cursor', true, 5);
    const before = fake.requests;
    await runPass(deps, connectionId, 'items', 'full');
    // The catch-up down to the first record older than item 9: [9, 8, 7], [6, 5, 4], as the pass
    // served them; nothing changed, so nothing moved behind it: the end.
    expect(fake.requests - before).toBe(3 + 2);
    expect((await storedRecords(db.pool, connectionId, 'items')).size).toBe(9);
  });

  it('fails as transient after catch-up passes that never settle, deleting nothing; quiet, the next pass does', async () => {
    const { fake, clock, connectionId, deps } = await setUp('cursor');
    await runPass(deps, connectionId, 'items', 'full');
    fake.remove('i00005');
    clock.ms = Date.now() - HOUR;
    // From the second request on, a second later each time, three items (a page) change.
    let turn = 0;
    const others = ['i00001', 'i00002', 'i00003', 'i00004', 'i00006', 'i00007', 'i00008', 'i00009'];
    fake.beforeRequest = () => {
      turn += 1;
      if (turn < 2) return;
      clock.ms += 1000;
      for (let k = 0; k < 3; k += 1) fake.edit(others[(3 * turn + k) % others.length]!);
    };
    const before = fake.requests;
    const err = (await runPass(deps, connectionId, 'items', 'full').catch((e: Error) => e)) as Error;
    fake.beforeRequest = null;
    expect(err.message).toMatch(/^http connector: 'items' \(\/cursor\/items\): the listing changed during each of 5 reads of its head \(catch-up passes/);
    // Three pages, then five catch-ups of two pages each.
    expect(fake.requests - before).toBe(3 + 5 * 2);
    expect(await tombstones(connectionId), 'nothing is deleted before the pass ends').toEqual([]);
    // Quiet, the next full pass deletes it.
    await runPass(deps, connectionId, 'items', 'full');
    expect(await tombstones(connectionId)).toEqual(['i00005']);
  });

  it('asks nothing more of a listing in ascending change-time order, nor of a backfill window with an end', async () => {
    const ascending = await setUp('cursor', false);
    let before = ascending.fake.requests;
    ascending.clock.ms = Date.now();
    beforeRequest(ascending.fake, 2, () => ascending.fake.edit('i00002'));
    await runPass(ascending.deps, ascending.connectionId, 'items', 'full');
    // [1, 2, 3], [4, 5, 6], [7, 8, 9], [2]: item 2 moved to the end, ahead of the position.
    expect(ascending.fake.requests - before).toBe(4);
    expect(await tombstones(ascending.connectionId)).toEqual([]);

    const { fake, clock, connectionId, deps } = await setUp('cursor');
    const first = Date.parse(fake.list().at(-1)!.updated_at);
    clock.ms = Date.now();
    beforeRequest(fake, 2, () => fake.edit('i00002'));
    before = fake.requests;
    // Items 1 to 8 by their change times: item 2 changes after the window's end.
    await runPass(deps, connectionId, 'items', 'backfill', { start: new Date(first), end: new Date(first + 8000) });
    fake.beforeRequest = null;
    expect(fake.requests - before).toBe(3);
    expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort()).toEqual(['i00001', 'i00003', 'i00004', 'i00005', 'i00006', 'i00007', 'i00008']);
  });

  it('goes on from a page token written before catch-ups were noted as it did: to its end, with no catch-up', async () => {
    const { fake, config } = await setUp('cursor');
    const fetch = (pageToken: string | null) =>
      httpConnector.fetchPage({ resource: 'items', since: null, until: null, pageToken, config, credentials: null, policy: TEST_PROVIDER_POLICY });
    const first = await fetch(null);
    const second = await fetch(first.nextPageToken);
    // The same position as a token of the version before this one holds it: its URL and listing only.
    const { url, listing } = JSON.parse(Buffer.from(second.nextPageToken!, 'base64url').toString('utf8')) as { url: string; listing: string };
    const last = await fetch(encodePageToken({ url, listing }));
    expect(last.records.map((r) => r.externalId)).toEqual(['i00003', 'i00002', 'i00001']);
    expect(last.nextPageToken).toBeNull();
    // Its own token, noting the first page's head, ends in a catch-up of the head instead.
    const caught = await fetch(second.nextPageToken);
    expect(caught.nextPageToken).not.toBeNull();
    expect(httpConnector.pageKey!(caught.nextPageToken!)).toMatch(/\/cursor\/items \(catch-up pass 1\) \(listing [\w-]+\)$/);
    const head = await fetch(caught.nextPageToken);
    expect(head.records.map((r) => r.externalId)).toEqual(['i00009', 'i00008', 'i00007']);
    expect(head.nextPageToken).toBeNull();
    expect(fake.requests).toBe(5);
  });
});
