// A provider paged by position that answers fewer records than asked for, a different number on
// each request (a time budget per request, say), while its data holds still. Reads of the listing
// then split the same records into other pages; two reads in a row serving the same records in the
// same order agree, whatever their pages, so the pass ends and stores every record. By keyset, a read
// of a block of one change time ends with the page that goes past it, as far as that page goes: two
// reads agree on the block and the first record after it, wherever that page stops. Runs the sync
// activity directly against real Postgres and a fake provider on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();

const ITEMS = Array.from({ length: 7 }, (_, k) => ({ id: `r${k + 1}` }));
let seq = 0;

/** The change times of the records: one a second; all in one second; the first five in one second, then one a second. */
const TIMES = {
  'one a second': (k: number) => `2025-03-01T10:00:0${k}Z`,
  'all in one second': () => '2025-03-01T10:00:00Z',
  'five in one second, then one a second': (k: number) => `2025-03-01T10:00:0${Math.max(0, k - 4)}Z`,
};

describe.each([
  ['offset', 'one a second'],
  ['offset by keyset', 'all in one second'],
  ['offset by keyset', 'five in one second, then one a second'],
] as const)('http connector, %s (%s), a provider answering 1 to 3 records a request (3 asked for), its data still', (name, times) => {
  const pagination = { type: 'offset', param: 'offset', limit_param: 'limit', limit: 3 };
  it.each([['full'], ['incremental']] as const)('the %s pass ends and stores every record', async (kind) => {
    // By keyset, a block of one change time is paged by position (and read until two reads agree).
    const items = ITEMS.map((i, k) => ({ ...i, updated_at: TIMES[times](k) }));
    const visits = new Map<string, number>();
    const fake = await serve((req, res) => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const since = url.searchParams.get('updated_since');
      const listed = items.filter((i) => since === null || Date.parse(i.updated_at) >= Date.parse(since));
      const offset = Number(url.searchParams.get('offset') ?? 0);
      const limit = Number(url.searchParams.get('limit') ?? 3);
      // The first position answered whole (as many as asked for), each other one whole and with one record, in turns.
      const key = `${since ?? ''}@${offset}`;
      visits.set(key, (visits.get(key) ?? 0) + 1);
      const served = offset === 0 || visits.get(key)! % 2 === 1 ? limit : 1;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(listed.slice(offset, offset + served)));
    });
    try {
      seq += 1;
      const connectionId = await createHttpConnection(
        db.pool,
        {
          base_url: fake.url,
          pagination,
          resources: {
            items: {
              path: '/items', id: 'id', updated_at: 'updated_at', since: { param: 'updated_since' },
              ...(name === 'offset by keyset' && { order: 'change_ascending' }),
            },
          },
        },
        `varying-pages-${seq}`,
      );
      const { deps } = testActivityDeps({ pool: db.pool });
      const outcome = await runPass(deps, connectionId, 'items', kind).then(({ result }) => result.status, (err: Error) => err.message);
      expect(outcome).toBe('completed');
      const stored = await storedRecords(db.pool, connectionId, 'items');
      expect([...stored.keys()].sort()).toEqual(items.map((i) => i.id));
    } finally {
      await fake.close();
    }
  });
});
