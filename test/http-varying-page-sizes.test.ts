// A provider paged by position that answers fewer records than asked for, a different number on
// each request (a time budget per request, say), while its data holds still. Reads of the listing
// then split the same records into other pages; two reads in a row serving the same records in the
// same order agree, whatever their pages, so the pass ends and stores every record. Runs the sync
// activity directly against real Postgres and a fake provider on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();

const ITEMS = Array.from({ length: 7 }, (_, k) => ({ id: `r${k + 1}`, updated_at: `2025-03-01T10:00:0${k}Z` }));
let seq = 0;

describe.each([
  ['offset', { type: 'offset', param: 'offset', limit_param: 'limit', limit: 3 }],
  ['offset by keyset', { type: 'offset', param: 'offset', limit_param: 'limit', limit: 3 }],
] as const)('http connector, %s, a provider answering 1 to 3 records a request (3 asked for), its data still', (name, pagination) => {
  it.each([['full'], ['incremental']] as const)('the %s pass ends and stores every record', async (kind) => {
    // All in one second by keyset (paged by position within it); one a second otherwise.
    const items = name === 'offset by keyset' ? ITEMS.map((i) => ({ ...i, updated_at: '2025-03-01T10:00:00Z' })) : ITEMS;
    let requests = 0;
    const fake = await serve((req, res) => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const since = url.searchParams.get('updated_since');
      const listed = items.filter((i) => since === null || Date.parse(i.updated_at) >= Date.parse(since));
      const offset = Number(url.searchParams.get('offset') ?? 0);
      const limit = Number(url.searchParams.get('limit') ?? 3);
      requests += 1;
      // 2, 3, 1, 2, 3, 1, … records (never more than asked for).
      const served = Math.min(limit, 1 + (requests % 3));
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
