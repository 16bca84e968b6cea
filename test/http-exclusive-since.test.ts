// A listing declared `order: 'change_ascending'` and paged by page numbers or offsets goes by keyset:
// after a page ending at change time T, the next request asks `since` = T from the first position.
// Many providers' `since` (`updated_after`) is exclusive: asked since T they leave out the records
// changed at T itself, and those after the page that ended at T were never served. Records a@1 s,
// b@2 s, c@2 s, d@3 s, two a page: a, b; since 2 s: d (c left out). The connector asks such a step
// again one unit earlier (1 ms, 1 s, a day) and pages the rest of the pass so. Against fake
// providers on 127.0.0.1 and real Postgres, in each `since` format; `date` in a zone west of UTC
// whose provider reads "after this day" (asked a day early, a UTC provider loses nothing).
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

type Format = 'iso8601' | 'epoch_millis' | 'epoch_seconds' | 'date';
type Style = 'page' | 'offset';

const BASE = Date.parse('2025-03-01T10:00:00.000Z');
const HOUR = 3_600_000;
/** a@1 s, b@2 s, c@2 s, d@3 s (for `date`: hours apart, b and c on one day, a on the day before). */
const itemsFor = (format: Format) => {
  const at = format === 'date' ? [-20, -8, -5, 15].map((h) => BASE + h * HOUR) : [1, 2, 2, 3].map((s) => BASE + s * 1000);
  return ['a', 'b', 'c', 'd'].map((id, k) => ({ id, updated_at: new Date(at[k]!).toISOString() }));
};

/** The instant a `since` value names for the provider (a date: its midnight in the zone UTC-8). */
function sinceInstant(value: string, format: Format): number {
  switch (format) {
    case 'epoch_seconds':
      return Number(value) * 1000;
    case 'epoch_millis':
      return Number(value);
    case 'date':
      return Date.parse(`${value}T00:00:00Z`) + 8 * HOUR;
    default:
      return Date.parse(value);
  }
}

/**
 * A provider listing `items` by change time, two a page, filtering by `updated_after` in `format`:
 * inclusive (>=) or, while `state.exclusive`, exclusive (>; for a date: days after it, in UTC-8).
 */
async function provider(format: Format, state: { exclusive: boolean }, items = itemsFor(format)) {
  return serve((req, res) => {
    const q = new URL(req.url ?? '/', 'http://x').searchParams;
    const since = q.get('updated_after');
    const from = since === null ? null : sinceInstant(since, format) + (state.exclusive && format === 'date' ? 24 * HOUR : 0);
    const listed = items.filter((i) => from === null || (state.exclusive && format !== 'date' ? Date.parse(i.updated_at) > from : Date.parse(i.updated_at) >= from));
    const offset = q.has('page') ? (Number(q.get('page')) - 1) * 2 : Number(q.get('offset') ?? 0);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(listed.slice(offset, offset + 2)));
  });
}

let seq = 0;
async function connection(url: string, format: Format, style: Style, paginationExtra: Record<string, unknown> = {}): Promise<string> {
  seq += 1;
  const pagination = { ...(style === 'page' ? { type: 'page_number', size_param: 'per_page', size: 2 } : { type: 'offset', limit: 2 }), ...paginationExtra };
  return createHttpConnection(
    db.pool,
    {
      base_url: url,
      pagination,
      resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at', since: { param: 'updated_after', format }, order: 'change_ascending' } },
    },
    `exclusive-since-${seq}`,
  );
}

const CASES: [Format, Style][] = [
  ['iso8601', 'page'],
  ['iso8601', 'offset'],
  ['epoch_millis', 'page'],
  ['epoch_seconds', 'offset'],
  ['date', 'page'],
];

describe.each(CASES)('http connector, change_ascending with an exclusive since (%s, %s paging)', (format, style) => {
  it('a full pass stores every record, and tombstones none a pass stored before', async () => {
    const state = { exclusive: false };
    const fake = await provider(format, state);
    const connectionId = await connection(fake.url, format, style);
    const { deps } = testActivityDeps({ pool: db.pool });
    let before = fake.requests.length;
    await runPass(deps, connectionId, 'items', 'full');
    const inclusiveRequests = fake.requests.length - before;
    expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort()).toEqual(['a', 'b', 'c', 'd']);

    state.exclusive = true;
    before = fake.requests.length;
    await runPass(deps, connectionId, 'items', 'full');
    const stored = await storedRecords(db.pool, connectionId, 'items');
    const tombstoned = [...stored.values()].filter((r) => r.deleted_at !== null).map((r) => r.external_id);
    expect(tombstoned, 'records the provider has, tombstoned by a full pass').toEqual([]);
    // The one step asked again a unit earlier; the rest of the pass asks each step so.
    expect(fake.requests.length - before).toBe(inclusiveRequests + 1);
  });

  it('a first full pass stores every record', async () => {
    const fake = await provider(format, { exclusive: true });
    const connectionId = await connection(fake.url, format, style);
    await runPass(testActivityDeps({ pool: db.pool }).deps, connectionId, 'items', 'full');
    expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort(), 'records stored').toEqual(['a', 'b', 'c', 'd']);
  });
});

describe.each(['page', 'offset'] as const)('http connector, change_ascending with an exclusive since, %s paging: one change time over several pages', (style) => {
  /** a@1 s; b, c, d, e@2 s (two pages of one change time); f@3 s. */
  const items = [1, 2, 2, 2, 2, 3].map((s, k) => ({ id: 'abcdef'[k]!, updated_at: new Date(BASE + s * 1000).toISOString() }));

  it('is paged by position from one unit before it, and the pass ends', async () => {
    const fake = await provider('iso8601', { exclusive: true }, items);
    const connectionId = await connection(fake.url, 'iso8601', style);
    const { result } = await runPass(testActivityDeps({ pool: db.pool }).deps, connectionId, 'items', 'full');
    expect(result.status).toBe('completed');
    expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    // The block's pages were asked one millisecond before its time; none at its time but the first step.
    const sinces = fake.requests.map((r) => new URL(r.url, 'http://x').searchParams.get('updated_after'));
    expect(sinces.filter((s) => s === new Date(BASE + 2000).toISOString())).toHaveLength(1);
    expect(sinces).toContain(new Date(BASE + 1999).toISOString());
  });

  it('with max_reads 1, the cursor is held one unit before the block, and the next incremental pass serves it', async () => {
    const fake = await provider('iso8601', { exclusive: true }, items);
    const connectionId = await connection(fake.url, 'iso8601', style, { max_reads: 1 });
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    const { rows } = await db.pool.query<{ cursor: Date }>(`select cursor from sync_state where connection_id = $1 and resource_type = 'items' and partition = ''`, [connectionId]);
    expect(rows[0]!.cursor.toISOString()).toBe(new Date(BASE + 1999).toISOString());
    const before = fake.requests.length;
    await runPass(deps, connectionId, 'items', 'incremental');
    // Asked so, the exclusive provider serves the block's time (and what follows it).
    const first = new URL(fake.requests[before]!.url, 'http://x').searchParams.get('updated_after');
    expect(first).toBe(new Date(BASE + 1999).toISOString());
  });
});
