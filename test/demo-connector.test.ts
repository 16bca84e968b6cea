// Unit and property tests of the demo connector and the connector registry. Pure: no
// database or Temporal (the shared globalSetup still starts Postgres; these tests ignore it).
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDemoConnector, demoTitle } from '../connectors/demo';
import { createDemoWorld, demoConnector, demoFetchLog, demoRecords, demoWorlds, resetDemoFailures, resetDemoFetchLog } from './helpers/demo';
import { connectorSlugs, getConnector, registerConnector } from '../connectors/registry';
import { type ConnectorError, Permanent, RateLimited, Transient, type ConnectorRecord, type FetchPageResult } from '../connectors/types';

// ---------------------------------------------------------------------------------------------
// Helpers

const BASE_MS = Date.parse('2025-01-01T00:00:00Z');
const DAY_MS = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

type Config = Record<string, unknown>;

function fetch(
  config: Config,
  resource: string,
  pageToken: string | null = null,
  since: Date | null = null,
  signal?: AbortSignal,
  until: Date | null = null,
) {
  return demoConnector.fetchPage({ resource, since, until, pageToken, config, credentials: null, ...(signal ? { signal } : {}) });
}

/** Pages through one resource; returns every page, in order. */
async function pass(config: Config, resource: string, since: Date | null = null, until: Date | null = null): Promise<FetchPageResult[]> {
  const pages: FetchPageResult[] = [];
  let token: string | null = null;
  do {
    const page: FetchPageResult = await fetch(config, resource, token, since, undefined, until);
    pages.push(page);
    token = page.nextPageToken;
  } while (token !== null);
  return pages;
}

const ids = (records: ConnectorRecord[]) => records.map((r) => r.externalId);
const allRecords = (pages: FetchPageResult[]) => pages.flatMap((p) => p.records);

/** The error a promise rejects with (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected a rejection'),
    (error: unknown) => error,
  );
}

beforeEach(() => {
  resetDemoFailures();
  resetDemoFetchLog();
});

// ---------------------------------------------------------------------------------------------

describe('generated records', () => {
  it('serves records_per_resource records in ceil(n / page_size) pages (one empty page when n = 0)', async () => {
    for (const [n, pageSize] of [
      [0, 10],
      [1, 10],
      [10, 10],
      [11, 10],
      [250, 100],
      [7, 1],
    ] as const) {
      const pages = await pass({ records_per_resource: n, page_size: pageSize }, 'issues');
      expect(allRecords(pages)).toHaveLength(n);
      expect(pages).toHaveLength(Math.max(1, Math.ceil(n / pageSize)));
      // Only the last page says "no more": no trailing empty page.
      expect(pages.map((p) => p.nextPageToken === null)).toEqual(pages.map((_, i) => i === pages.length - 1));
      for (const page of pages.slice(0, -1)) expect(page.records).toHaveLength(pageSize);
    }
  });

  it('uses the defaults: issues, pull_requests and users, 100 records each, pages of 100', async () => {
    expect(demoConnector.resourceTypes({})).toEqual(['issues', 'pull_requests', 'users']);
    for (const resource of ['issues', 'pull_requests', 'users']) {
      const pages = await pass({}, resource);
      expect(pages).toHaveLength(1);
      expect(pages[0]!.records).toHaveLength(100);
    }
  });

  it('accepts records_per_resource per resource type (missing types keep the default 100)', async () => {
    const config = { resource_types: ['issues', 'users'], records_per_resource: { issues: 3 } };
    expect(demoConnector.resourceTypes(config)).toEqual(['issues', 'users']);
    expect(allRecords(await pass(config, 'issues'))).toHaveLength(3);
    expect(allRecords(await pass(config, 'users'))).toHaveLength(100);
  });

  it('shapes record i as `${resource}-${i}`, updated at base_time + i s, ordered by (updatedAt, externalId)', async () => {
    const records = allRecords(await pass({ records_per_resource: 12, page_size: 5 }, 'pull_requests'));
    expect(ids(records)).toEqual(Array.from({ length: 12 }, (_, i) => `pull_requests-${i}`));
    records.forEach((record, i) => {
      expect(record).toEqual({
        externalId: `pull_requests-${i}`,
        updatedAt: iso(BASE_MS + i * 1000),
        data: { id: `pull_requests-${i}`, resource: 'pull_requests', index: i, title: demoTitle('demo', 'pull_requests', i, 0), revision: 0 },
      });
    });
    const custom = allRecords(await pass({ records_per_resource: 2, base_time: '2030-06-01T12:00:00+02:00' }, 'issues'));
    expect(custom.map((r) => r.updatedAt)).toEqual(['2030-06-01T10:00:00.000Z', '2030-06-01T10:00:01.000Z']);
  });

  it('is deterministic: same config, same pages and tokens; another seed changes only the titles', async () => {
    const config = { records_per_resource: 37, page_size: 8, seed: 'alpha' };
    const first = await pass(config, 'issues');
    expect(await pass(config, 'issues')).toEqual(first);
    expect(demoRecords(config, 'issues')).toEqual(allRecords(first));

    const other = allRecords(await pass({ ...config, seed: 'beta' }, 'issues'));
    expect(ids(other)).toEqual(ids(allRecords(first)));
    expect(other.map((r) => r.data.title)).not.toEqual(allRecords(first).map((r) => r.data.title));
  });

  it('after a revision bump, `since` (inclusive) returns only the changed records, later than every original', async () => {
    const n = 50;
    const before = { records_per_resource: n, page_size: 7 };
    const originals = allRecords(await pass(before, 'issues'));
    const cursor = new Date(originals[n - 1]!.updatedAt!); // what a sync would keep as its cursor

    const after = { ...before, revision: 2, changes: { changed: { issues: [30, 3, 7] } } };
    // `since` is inclusive (updatedAt >= since), so the record at the cursor comes back once more.
    const incremental = allRecords(await pass(after, 'issues', cursor));
    expect(ids(incremental)).toEqual(['issues-49', 'issues-3', 'issues-7', 'issues-30']);
    for (const record of incremental.slice(1)) {
      const i = record.data.index as number;
      expect(record.updatedAt).toBe(iso(BASE_MS + 2 * DAY_MS + i * 1000));
      expect(record.data).toMatchObject({ revision: 2, title: demoTitle('demo', 'issues', i, 2) });
      expect(record.data.title).not.toBe(originals[i]!.data.title);
    }
    // Just past the cursor: exactly the changed records.
    expect(ids(allRecords(await pass(after, 'issues', new Date(cursor.getTime() + 1))))).toEqual(['issues-3', 'issues-7', 'issues-30']);

    // A full pass serves every record once, the changed ones last (in their new position).
    const full = ids(allRecords(await pass(after, 'issues')));
    expect(full).toHaveLength(n);
    expect(full.slice(-3)).toEqual(['issues-3', 'issues-7', 'issues-30']);
  });

  it('breaks updatedAt ties by externalId, also across a page boundary (n > one day of seconds)', async () => {
    // Changed record i (base + 1 day + i s) ties with original 86400 + i; 'issues-0' < 'issues-86400'.
    const config = { records_per_resource: 86_402, page_size: 1, revision: 1, changes: { changed: { issues: [0, 1] } } };
    const pages = await pass(config, 'issues', new Date(BASE_MS + 86_399_000));
    expect(ids(allRecords(pages))).toEqual(['issues-86399', 'issues-0', 'issues-86400', 'issues-1', 'issues-86401']);
    expect(pages).toHaveLength(5);
  });

  it('leaves deleted indexes out of full and incremental passes (deleted wins over changed)', async () => {
    const config = {
      records_per_resource: 20,
      page_size: 3,
      revision: 1,
      changes: { deleted: { issues: [0, 5, 19, 99] }, changed: { issues: [5, 6] } },
    };
    const full = ids(allRecords(await pass(config, 'issues')));
    expect(full).toHaveLength(17); // index 99 does not exist, so it deletes nothing
    for (const gone of ['issues-0', 'issues-5', 'issues-19']) expect(full).not.toContain(gone);
    expect(ids(allRecords(await pass(config, 'issues', new Date(BASE_MS + DAY_MS))))).toEqual(['issues-6']);
    // Other resources are untouched.
    expect(allRecords(await pass(config, 'users'))).toHaveLength(20);
  });
});

describe('until', () => {
  afterEach(() => demoWorlds.clear());

  it('serves only records updated before `until` (exclusive), with `since` (inclusive) too, and demoRecords agrees', async () => {
    const config = { records_per_resource: 20, page_size: 3 };
    // Record i is updated at base + i s: [5 s, 12 s) holds records 5–11; the one at 12 s is out.
    const since = new Date(BASE_MS + 5000);
    const until = new Date(BASE_MS + 12_000);
    const pages = await pass(config, 'issues', since, until);
    expect(ids(allRecords(pages))).toEqual([5, 6, 7, 8, 9, 10, 11].map((i) => `issues-${i}`));
    // The last page says it is the last: no trailing page is requested for records past `until`.
    expect(pages).toHaveLength(3);
    expect(pages.at(-1)!.nextPageToken).toBeNull();
    expect(ids(allRecords(await pass(config, 'issues', null, until)))).toHaveLength(12);
    expect(ids(demoRecords(config, 'issues', since, until))).toEqual(ids(allRecords(pages)));
    expect(demoRecords(config, 'issues', null, new Date(BASE_MS))).toEqual([]);
  });

  it('applies `until` to changed records and to worlds alike', async () => {
    const changed = { records_per_resource: 10, page_size: 4, revision: 1, changes: { changed: { issues: [2, 8] } } };
    // Changed records moved a day later: before base + 1 day only the unchanged ones remain.
    expect(ids(allRecords(await pass(changed, 'issues', null, new Date(BASE_MS + DAY_MS))))).toEqual(
      [0, 1, 3, 4, 5, 6, 7, 9].map((i) => `issues-${i}`),
    );
    expect(ids(allRecords(await pass(changed, 'issues', null, new Date(BASE_MS + DAY_MS + 8000))))).toEqual(
      [0, 1, 3, 4, 5, 6, 7, 9, 2].map((i) => `issues-${i}`),
    );

    const w = createDemoWorld('until-world');
    for (let i = 0; i < 6; i++) w.upsert('issues', `w${i}`, { i }, iso(BASE_MS + i * 1000));
    const inWorld = await pass({ world: 'until-world', page_size: 2 }, 'issues', new Date(BASE_MS + 1000), new Date(BASE_MS + 4000));
    expect(ids(allRecords(inWorld))).toEqual(['w1', 'w2', 'w3']);
    expect(inWorld).toHaveLength(2);
  });

  it('rejects an invalid until with Permanent', async () => {
    const error = await rejection(fetch({}, 'issues', null, null, undefined, new Date(Number.NaN)));
    expect(error).toBeInstanceOf(Permanent);
    expect((error as Error).message).toMatch(/invalid until/);
  });
});

describe('invalid input', () => {
  it.each([
    [{ page_size: 0 }, 'page_size'],
    [{ page_size: 1001 }, 'page_size'],
    [{ page_size: 2.5 }, 'page_size'],
    [{ records_per_resource: -1 }, 'records_per_resource'],
    [{ records_per_resource: { issues: 'many' } }, 'records_per_resource.issues'],
    [{ resource_types: 'issues' }, 'resource_types'],
    [{ resource_types: ['issues', 'issues'] }, 'resource_types'],
    [{ latency_ms: -5 }, 'latency_ms'],
    [{ seed: 42 }, 'seed'],
    [{ revision: -1 }, 'revision'],
    [{ base_time: 'yesterday' }, 'base_time'],
    [{ changes: { deleted: { issues: [1, -2] } } }, 'changes.deleted.issues[1]'],
    [{ changes: { changed: [1] } }, 'changes.changed'],
    [{ fail: { resource: 'issues', at_page: 0, kind: 'transient' } }, 'fail.at_page'],
    [{ fail: [{ resource: 'issues', at_page: 1, kind: 'boom' }] }, 'fail[0].kind'],
    [{ world: 'no-such-world' }, 'world'],
  ])('rejects %j with a Permanent error naming %s', async (config, key) => {
    const error = await rejection(fetch(config, 'issues'));
    expect(error).toBeInstanceOf(Permanent);
    expect((error as Error).message).toContain(`invalid config: ${key}:`);
    expect(() => demoConnector.resourceTypes(config)).toThrow(Permanent);
  });

  it('rejects unknown resources, garbage tokens and tokens of another resource as Permanent', async () => {
    const config = { records_per_resource: 10, page_size: 2 };
    expect(await rejection(fetch(config, 'commits'))).toBeInstanceOf(Permanent);
    for (const token of ['garbage', '', Buffer.from('{"o":2}').toString('base64url')]) {
      const error = await rejection(fetch(config, 'issues', token));
      expect(error).toBeInstanceOf(Permanent);
      expect((error as Error).message).toMatch(/invalid page token/);
    }
    const { nextPageToken } = await fetch(config, 'issues');
    expect(await rejection(fetch(config, 'users', nextPageToken))).toBeInstanceOf(Permanent);
  });
});

describe('injected failures', () => {
  const base = { records_per_resource: 30, page_size: 10 };

  it('fails the fetch of page at_page `times` times, then succeeds; other pages are unaffected', async () => {
    const config = { ...base, fail: { resource: 'issues', at_page: 2, kind: 'transient', times: 2 } };
    const page1 = await fetch(config, 'issues');
    expect(ids(page1.records)[0]).toBe('issues-0');
    for (let attempt = 0; attempt < 2; attempt++) {
      const error = await rejection(fetch(config, 'issues', page1.nextPageToken));
      expect(error).toBeInstanceOf(Transient);
      expect((error as Error).message).toContain("page 2 of 'issues'");
    }
    const page2 = await fetch(config, 'issues', page1.nextPageToken);
    expect(ids(page2.records)[0]).toBe('issues-10');
    // The budget is spent: a whole new pass now succeeds, and other resources never failed.
    expect(allRecords(await pass(config, 'issues'))).toHaveLength(30);
    expect(allRecords(await pass(config, 'users'))).toHaveLength(30);
    // resetDemoFailures restores the budget.
    resetDemoFailures();
    expect(await rejection(pass(config, 'issues'))).toBeInstanceOf(Transient);
  });

  it('maps kinds to typed errors; without `times` the page always fails', async () => {
    const config = {
      ...base,
      fail: [
        { resource: 'issues', at_page: 1, kind: 'rate_limited', retry_after_seconds: 42 },
        { resource: 'users', at_page: 3, kind: 'permanent' },
      ],
    };
    for (let attempt = 0; attempt < 5; attempt++) {
      const error = await rejection(fetch(config, 'issues'));
      expect(error).toBeInstanceOf(RateLimited);
      expect(error).toMatchObject({ kind: 'rate_limited', retryAfterSeconds: 42 });
    }
    const error = await rejection(pass(config, 'users'));
    expect(error).toBeInstanceOf(Permanent);
    expect((error as ConnectorError).kind).toBe('permanent');
  });

  it('keeps separate budgets per seed', async () => {
    const fail = { resource: 'issues', at_page: 1, kind: 'transient', times: 1 };
    expect(await rejection(fetch({ ...base, fail, seed: 'a' }, 'issues'))).toBeInstanceOf(Transient);
    expect(await rejection(fetch({ ...base, fail, seed: 'b' }, 'issues'))).toBeInstanceOf(Transient);
    await expect(fetch({ ...base, fail, seed: 'a' }, 'issues')).resolves.toBeDefined();
  });
});

describe('latency and cancellation', () => {
  it('waits latency_ms per page', async () => {
    const started = performance.now();
    await pass({ records_per_resource: 3, page_size: 1, latency_ms: 40 }, 'issues');
    expect(performance.now() - started).toBeGreaterThanOrEqual(3 * 40 - 5);
  });

  it('rejects promptly with the signal reason when aborted mid-page, and at once when already aborted', async () => {
    const config = { latency_ms: 60_000 };
    const controller = new AbortController();
    const started = performance.now();
    const pending = fetch(config, 'issues', null, null, controller.signal);
    setTimeout(() => controller.abort(), 20);
    const error = await rejection(pending);
    expect((error as Error).name).toBe('AbortError');
    expect(performance.now() - started).toBeLessThan(1000);

    const reason = new Error('cancelled by the workflow');
    expect(await rejection(fetch(config, 'issues', null, null, AbortSignal.abort(reason)))).toBe(reason);
  });
});

describe('fetch log', () => {
  it('records every call, failed ones included, in order', async () => {
    const before = Date.now();
    const config = { records_per_resource: 5, page_size: 2, fail: { resource: 'issues', at_page: 3, kind: 'transient', times: 1 } };
    const p1 = await fetch(config, 'issues');
    const p2 = await fetch(config, 'issues', p1.nextPageToken);
    await rejection(fetch(config, 'issues', p2.nextPageToken));
    await fetch(config, 'issues', p2.nextPageToken);
    await rejection(fetch({ page_size: 0 }, 'users'));
    expect(demoFetchLog.map(({ resource, pageToken }) => ({ resource, pageToken }))).toEqual([
      { resource: 'issues', pageToken: null },
      { resource: 'issues', pageToken: p1.nextPageToken },
      { resource: 'issues', pageToken: p2.nextPageToken },
      { resource: 'issues', pageToken: p2.nextPageToken },
      { resource: 'users', pageToken: null },
    ]);
    for (const entry of demoFetchLog) expect(entry.at).toBeGreaterThanOrEqual(before);
    resetDemoFetchLog();
    expect(demoFetchLog).toHaveLength(0);
  });
});

describe('worlds', () => {
  afterEach(() => demoWorlds.clear());

  /** A world with `n` issues updated one second apart from BASE_MS, and an empty `users`. */
  function world(id: string, n: number) {
    const w = createDemoWorld(id);
    for (let i = 0; i < n; i++) w.upsert('issues', `i${String(i).padStart(2, '0')}`, { n: i }, iso(BASE_MS + i * 1000));
    w.addResource('users');
    return w;
  }

  it('serves the world’s current records with the same ordering, paging and since rules', async () => {
    const w = world('w1', 5);
    w.upsert('issues', 'tie-b', { tie: true }, iso(BASE_MS + 2000)); // same updatedAt as i02: externalId breaks the tie
    const config = { world: 'w1', page_size: 2 };
    expect(demoConnector.resourceTypes(config)).toEqual(['issues', 'users']);
    expect(demoConnector.resourceTypes({ ...config, resource_types: ['issues'] })).toEqual(['issues']);

    const pages = await pass(config, 'issues');
    expect(pages).toHaveLength(3);
    expect(ids(allRecords(pages))).toEqual(['i00', 'i01', 'i02', 'tie-b', 'i03', 'i04']);
    expect(allRecords(pages)[1]).toEqual({ externalId: 'i01', updatedAt: iso(BASE_MS + 1000), data: { n: 1 } });
    expect(ids(allRecords(await pass(config, 'issues', new Date(BASE_MS + 3000))))).toEqual(['i03', 'i04']);
    expect(await pass(config, 'users')).toEqual([{ records: [], nextPageToken: null }]);
  });

  it('serves a record that changes before it is served exactly once, in its new version', async () => {
    const w = world('w2', 6);
    const config = { world: 'w2', page_size: 2 };
    const page1 = await fetch(config, 'issues');
    expect(ids(page1.records)).toEqual(['i00', 'i01']);

    w.upsert('issues', 'i03', { n: 3, edited: true }, iso(BASE_MS + DAY_MS)); // not yet served: moves to the end
    w.remove('issues', 'i04'); // not yet served: never served (a full sync would delete it)
    w.upsert('issues', 'new', { n: 99 }, iso(BASE_MS + 2500)); // created ahead of the cursor: served

    const rest: ConnectorRecord[] = [];
    let token = page1.nextPageToken;
    while (token !== null) {
      const page = await fetch(config, 'issues', token);
      rest.push(...page.records);
      token = page.nextPageToken;
    }
    expect(ids(rest)).toEqual(['i02', 'new', 'i05', 'i03']);
    expect(rest.find((r) => r.externalId === 'i03')).toEqual({ externalId: 'i03', updatedAt: iso(BASE_MS + DAY_MS), data: { n: 3, edited: true } });
  });

  // Semantics (see DemoWorld): keyset paging is at-least-once for records that change mid-pass. A
  // record already served that then changes gets a later updatedAt, i.e. a key after the cursor, so
  // it is served a second time later in the same pass, in its new version — never twice in one
  // page, and never an unchanged record twice. The sync upserts, so the final row is the new
  // version; pinning a snapshot instead would drop the change from this pass or let the cursor
  // jump past it. Unchanged records are served exactly once regardless.
  it('serves a record that changes after it was served once more, in its new version, and nothing else twice', async () => {
    const w = world('w3', 6);
    const config = { world: 'w3', page_size: 2 };
    const page1 = await fetch(config, 'issues');
    expect(ids(page1.records)).toEqual(['i00', 'i01']);

    w.upsert('issues', 'i00', { n: 0, edited: true }, iso(BASE_MS + DAY_MS));
    w.upsert('issues', 'i01', { n: 1 }, iso(BASE_MS + 500)); // moved backwards behind the cursor: not re-served

    const served = [...page1.records];
    let token = page1.nextPageToken;
    while (token !== null) {
      const page = await fetch(config, 'issues', token);
      expect(new Set(ids(page.records)).size).toBe(page.records.length);
      served.push(...page.records);
      token = page.nextPageToken;
    }
    expect(ids(served)).toEqual(['i00', 'i01', 'i02', 'i03', 'i04', 'i05', 'i00']);
    expect(served.at(-1)).toEqual({ externalId: 'i00', updatedAt: iso(BASE_MS + DAY_MS), data: { n: 0, edited: true } });
    // The last version served for every id is the world's current one: upserting the pass in order
    // converges on the world.
    const lastServed = new Map(served.map((r) => [r.externalId, r]));
    expect([...lastServed.keys()].sort()).toEqual([...w.resources.get('issues')!.keys()].sort());
    expect(lastServed.get('i00')!.data).toEqual({ n: 0, edited: true });
  });

  it('does not let callers mutate the world through served or upserted data', async () => {
    const w = createDemoWorld('w4');
    const data = { tags: ['a'] };
    w.upsert('issues', 'x', data, new Date(BASE_MS));
    data.tags.push('b');
    const [record] = allRecords(await pass({ world: 'w4' }, 'issues'));
    (record!.data.tags as string[]).push('c');
    expect(w.resources.get('issues')!.get('x')!.data).toEqual({ tags: ['a'] });
    expect(() => w.upsert('issues', 'y', {}, 'not a date')).toThrow();
  });
});

describe('property: paging', () => {
  it('for any n and page_size, a pass yields exactly n distinct externalIds, in order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 500 }), fc.integer({ min: 1, max: 100 }), async (n, pageSize) => {
        const pages = await pass({ records_per_resource: n, page_size: pageSize, resource_types: ['items'] }, 'items');
        const got = ids(allRecords(pages));
        expect(got).toEqual(Array.from({ length: n }, (_, i) => `items-${i}`));
        expect(new Set(got).size).toBe(n);
        expect(pages).toHaveLength(Math.max(1, Math.ceil(n / pageSize)));
      }),
      { numRuns: 200 },
    );
  });

  it('with random changes and deletions, full and incremental passes match demoRecords and stay sorted', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 200 }),
        fc.integer({ min: 1, max: 30 }),
        fc.uniqueArray(fc.integer({ min: 0, max: 220 }), { maxLength: 30 }),
        fc.uniqueArray(fc.integer({ min: 0, max: 220 }), { maxLength: 30 }),
        fc.option(fc.integer({ min: 0, max: 2 * DAY_MS }), { nil: null }),
        async (n, pageSize, changed, deleted, sinceOffset) => {
          const config = { records_per_resource: n, page_size: pageSize, revision: 1, changes: { changed: { issues: changed }, deleted: { issues: deleted } } };
          const since = sinceOffset === null ? null : new Date(BASE_MS + sinceOffset);
          const got = allRecords(await pass(config, 'issues', since));
          expect(got).toEqual(demoRecords(config, 'issues', since));
          // Independent oracle: build every record, filter, sort.
          const deletedSet = new Set(deleted);
          const expected = Array.from({ length: n }, (_, i) => i)
            .filter((i) => !deletedSet.has(i))
            .map((i) => ({ id: `issues-${i}`, ms: BASE_MS + (changed.includes(i) ? DAY_MS : 0) + i * 1000 }))
            .filter((r) => since === null || r.ms >= since.getTime())
            .sort((a, b) => a.ms - b.ms || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
          expect(got.map((r) => [r.externalId, r.updatedAt])).toEqual(expected.map((r) => [r.id, iso(r.ms)]));
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('state per connector', () => {
  it('keeps worlds, failure counters and the fetch log in the connector, not in the module: two connectors share none', async () => {
    const [a, b] = [createDemoConnector(), createDemoConnector()];
    a.createWorld('only-in-a').upsert('issues', 'x', { n: 1 }, '2024-01-01T00:00:00.000Z');
    expect(a.resourceTypes({ world: 'only-in-a' })).toEqual(['issues']);
    expect(() => b.resourceTypes({ world: 'only-in-a' })).toThrow("unknown demo world 'only-in-a'");
    const config = { records_per_resource: 1, fail: { resource: 'issues', at_page: 1, kind: 'transient', times: 1 } };
    const first = (c: typeof a) => c.fetchPage({ resource: 'issues', since: null, until: null, pageToken: null, config, credentials: null });
    await expect(first(a)).rejects.toThrow(Transient);
    await expect(first(a)).resolves.toMatchObject({ records: [expect.anything()] });
    // b's budget of one failure is its own, still unspent.
    await expect(first(b)).rejects.toThrow(Transient);
    // Recording is off until asked for, per connector.
    b.recordFetches(true);
    await first(b);
    expect([a.fetchLog.length, b.fetchLog.length]).toEqual([0, 1]);
  });
});

describe('registry', () => {
  it('returns the demo connector by default and rejects unknown providers as Permanent', () => {
    expect(getConnector('demo')).toBe(demoConnector);
    expect(connectorSlugs()).toContain('demo');
    expect(() => getConnector('nope')).toThrow(Permanent);
    expect(() => getConnector('nope')).toThrow("unknown provider 'nope'");
  });

  it('registers new connectors and replaces (returning) an existing one', () => {
    const fake = { slug: 'fake-test', resourceTypes: () => ['a'], fetchPage: async () => ({ records: [], nextPageToken: null }) };
    expect(registerConnector(fake)).toBeUndefined();
    expect(getConnector('fake-test')).toBe(fake);
    const replacement = { ...fake };
    expect(registerConnector(replacement)).toBe(fake);
    expect(getConnector('fake-test')).toBe(replacement);
  });
});
