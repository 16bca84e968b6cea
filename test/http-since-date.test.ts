// A `since` in the `date` format asks a provider for the records changed on or after a day, and
// the provider reads that day in its own zone: a day begins up to 14 hours before midnight UTC
// (east of UTC) or up to 12 after it (west). Asked the UTC day of the cursor, a provider west of
// UTC leaves out what changed after the cursor but before its own midnight; the connector asks for
// the UTC day before (harmless: it leaves out what changed before the cursor itself, and storing a
// record again writes nothing), and a provider east of UTC listing records of that earlier day is
// no provider ignoring `since`. Against fake providers on 127.0.0.1 (UTC-8 and UTC+9), whole and
// paged by keyset (`order: 'change_ascending'`).
import { afterEach, describe, expect, it } from 'vitest';
import { httpConnector } from '../connectors/http';
import { pagesOf } from '../connectors/pages';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';

afterEach(closeFakeServers);

const ITEMS = [
  ['r1', '2025-02-28T20:00:00.000Z'], ['r2', '2025-03-01T02:00:00.000Z'], ['r3', '2025-03-01T05:00:00.000Z'], ['r4', '2025-03-01T09:00:00.000Z'],
  ['r5', '2025-03-02T01:00:00.000Z'], ['r6', '2025-03-02T12:00:00.000Z'], ['r7', '2025-03-03T00:30:00.000Z'],
].map(([id, updated_at]) => ({ id: id!, updated_at: updated_at! }));
/** The cursor: 03:00 UTC on 1 March, which is still 28 February at UTC-8. */
const SINCE = new Date('2025-03-01T03:00:00.000Z');

/** A provider whose days begin at midnight in the zone `offsetHours` from UTC, listing by change time, `limit` a page from `offset`. */
const providerIn = (offsetHours: number) =>
  serve((req, res) => {
    const q = new URL(req.url ?? '/', 'http://x').searchParams;
    const day = q.get('changed_since');
    const from = day === null ? Number.NEGATIVE_INFINITY : Date.parse(`${day}T00:00:00Z`) - offsetHours * 3_600_000;
    const listed = ITEMS.filter((item) => Date.parse(item.updated_at) >= from);
    const offset = Number(q.get('offset') ?? 0);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(listed.slice(offset, offset + Number(q.get('limit') ?? 100))));
  });

/** The ids an incremental pass from SINCE serves. */
async function incremental(url: string, order: 'unspecified' | 'change_ascending'): Promise<string[]> {
  const config = {
    base_url: url, pagination: { type: 'offset', limit: 2 },
    resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at', since: { param: 'changed_since', format: 'date' }, order } },
  };
  const ids = new Set<string>();
  for await (const page of pagesOf(httpConnector, { resource: 'items', since: SINCE, cursors: new Map([['', SINCE]]), until: null, config, credentials: null, policy: TEST_PROVIDER_POLICY }, null)) {
    for (const record of page.records) ids.add(record.externalId);
  }
  return [...ids].sort();
}

describe('http connector: since as a date', () => {
  it.each([
    ['UTC-8', -8, 'unspecified'],
    ['UTC-8', -8, 'change_ascending'],
    ['UTC+9', 9, 'unspecified'],
    ['UTC+9', 9, 'change_ascending'],
  ] as const)('a provider whose days are in %s (%i hours) serves every record changed at or after the cursor (order %s)', async (_zone, offsetHours, order) => {
    const fake = await providerIn(offsetHours);
    expect(await incremental(fake.url, order)).toEqual(['r3', 'r4', 'r5', 'r6', 'r7']);
    // The first request asks for the UTC day before the cursor's.
    expect(new URL(fake.requests[0]!.url, 'http://x').searchParams.get('changed_since')).toBe('2025-02-28');
  });
});
