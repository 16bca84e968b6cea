// A backfill's window [start, end) begins at a time the user gave, often a whole second or a whole
// day, at which providers (stamping whole seconds) may well have changed a record. Many providers'
// `since` (`updated_after`) is exclusive: asked since T they leave out the records changed at T.
// Asked for the window's start as it is, such a provider left the records changed exactly there
// out of the backfill, whatever the listing's `order`. The connector asks a backfill's first
// request one unit of the `since` format's resolution earlier (1 ms, 1 s; for `date`, whose value
// is already the day before, one more day: a provider reading "after this day" west of UTC starts
// that day at its own midnight, hours after the window's). Against fake providers on 127.0.0.1
// and real Postgres, in each `since` format, paged by keyset (`change_ascending` page numbers) and
// as one unordered page.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

type Format = 'iso8601' | 'epoch_millis' | 'epoch_seconds' | 'date';
type Listing = 'keyset' | 'unordered';

/** The window's start: a whole day (so a whole second too). */
const START = Date.parse('2025-03-01T00:00:00.000Z');
const HOUR = 3_600_000;

/**
 * at: exactly at the window's start; mid: later that day (for `date`, still before midnight in
 * UTC-8); late: later still; out: after the window's end.
 */
const itemsFor = (format: Format) => {
  const at = format === 'date' ? [0, 3, 12, 72].map((h) => START + h * HOUR) : [0, 1000, 2000, 60_000].map((ms) => START + ms);
  return ['at', 'mid', 'late', 'out'].map((id, k) => ({ id, updated_at: new Date(at[k]!).toISOString() }));
};
const windowFor = (format: Format) => ({ start: new Date(START), end: new Date(START + (format === 'date' ? 48 * HOUR : 10_000)) });

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
 * A provider listing `items` by change time, two a page (page numbers), filtering by
 * `updated_after` in `format`: exclusive (>; for a date: the days after it, in UTC-8) unless
 * `inclusive` (>=), or not at all when `ignoresSince`.
 */
async function provider(format: Format, items: { id: string; updated_at: string }[], opts: { inclusive?: boolean; ignoresSince?: boolean } = {}) {
  return serve((req, res) => {
    const q = new URL(req.url ?? '/', 'http://x').searchParams;
    const since = opts.ignoresSince ? null : q.get('updated_after');
    const exclusive = !opts.inclusive;
    const from = since === null ? null : sinceInstant(since, format) + (exclusive && format === 'date' ? 24 * HOUR : 0);
    const listed = items.filter((i) => from === null || (exclusive && format !== 'date' ? Date.parse(i.updated_at) > from : Date.parse(i.updated_at) >= from));
    const offset = (Number(q.get('page') ?? 1) - 1) * 2;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(q.has('page') ? listed.slice(offset, offset + 2) : listed));
  });
}

let seq = 0;
async function connection(url: string, format: Format, listing: Listing): Promise<string> {
  seq += 1;
  const keyset = listing === 'keyset';
  return createHttpConnection(
    db.pool,
    {
      base_url: url,
      pagination: keyset ? { type: 'page_number', size_param: 'per_page', size: 2 } : { type: 'none' },
      resources: {
        items: { path: '/items', id: 'id', updated_at: 'updated_at', since: { param: 'updated_after', format }, ...(keyset && { order: 'change_ascending' }) },
      },
    },
    `backfill-start-${seq}`,
  );
}

const FORMATS: Format[] = ['iso8601', 'epoch_millis', 'epoch_seconds', 'date'];
const CASES: [Format, Listing][] = FORMATS.flatMap((format) => (['keyset', 'unordered'] as const).map((listing): [Format, Listing] => [format, listing]));

/** The value one unit of `format`'s resolution before the window's start's own (for a date, the day before the day before). */
const EARLIER: Record<Format, string> = {
  iso8601: new Date(START - 1).toISOString(),
  epoch_millis: String(START - 1),
  epoch_seconds: String(START / 1000 - 1),
  date: new Date(START - 48 * HOUR).toISOString().slice(0, 10),
};

describe.each(CASES)('http connector, a backfill against an exclusive since (%s, %s)', (format, listing) => {
  it('stores the records changed exactly at the window start', async () => {
    const fake = await provider(format, itemsFor(format));
    const connectionId = await connection(fake.url, format, listing);
    const { result } = await runPass(testActivityDeps({ pool: db.pool }).deps, connectionId, 'items', 'backfill', windowFor(format));
    expect(result.status).toBe('completed');
    expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort(), 'records stored').toEqual(['at', 'late', 'mid']);
    const first = new URL(fake.requests[0]!.url, 'http://x').searchParams.get('updated_after');
    expect(first, "the first request's since").toBe(EARLIER[format]);
  });
});

describe.each(['iso8601', 'epoch_seconds'] as const)('http connector, a keyset backfill asked one unit before its start (%s)', (format) => {
  const unit = format === 'iso8601' ? 1 : 1000;

  it('takes a record an inclusive provider lists from the value asked (before the window), and stores only the window', async () => {
    const items = [{ id: 'before', updated_at: new Date(START - unit).toISOString() }, ...itemsFor(format)];
    const fake = await provider(format, items, { inclusive: true });
    const connectionId = await connection(fake.url, format, 'keyset');
    const { result } = await runPass(testActivityDeps({ pool: db.pool }).deps, connectionId, 'items', 'backfill', windowFor(format));
    expect(result.status).toBe('completed');
    expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort(), 'records stored').toEqual(['at', 'late', 'mid']);
  });

  it('still refuses a record changed before the value asked', async () => {
    const items = [{ id: 'older', updated_at: new Date(START - 2 * unit).toISOString() }, ...itemsFor(format)];
    const fake = await provider(format, items, { ignoresSince: true });
    const connectionId = await connection(fake.url, format, 'keyset');
    const err = await runPass(testActivityDeps({ pool: db.pool }).deps, connectionId, 'items', 'backfill', windowFor(format)).catch((e: Error) => e);
    expect(String((err as Error).message)).toContain(`the provider listed a record changed before updated_after=${EARLIER[format]}`);
  });
});
