// Providers whose numeric cursor 0 means "no more" (Twitter's `next_cursor: 0`, Redis-style SCAN
// cursors, whose 0 is also where a listing starts). The http connector ended only at an absent,
// null, empty or false cursor, so it sent cursor=0, was served the first page again, and failed
// the task for good as a paging loop: no pass of such a provider completed. A cursor 0 (the number,
// or its text) is the end: as the next position after a page it can only be the listing's start.
// Runs the sync activity against real Postgres and a fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const at = (minutes: number) => new Date(Date.now() - 2 * 3_600_000 + minutes * 60_000).toISOString();
const ITEMS = ['a', 'b', 'c', 'd', 'e'].map((id, k) => ({ id, updated_at: at(k) }));

describe('http connector: a cursor 0 that ends the listing', () => {
  it.each([
    ['a number', (n: number) => n],
    ['text', (n: number) => String(n)],
  ])('as %s: the pass ends there and stores every record', async (form, spell) => {
    const fake = await serve((req, res) => {
      const cursor = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('cursor') ?? 0);
      const page = ITEMS.slice(cursor, cursor + 2);
      const next = cursor + 2 < ITEMS.length ? cursor + 2 : 0;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items: page, next_cursor: spell(next) }));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      {
        base_url: fake.url,
        pagination: { type: 'cursor', path: 'next_cursor', param: 'cursor' },
        resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } },
      },
      `cursor-zero-${form.replace(/\W+/g, '-')}`,
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    const { result } = await runPass(deps, connectionId, 'items', 'full');
    expect(result).toMatchObject({ status: 'completed' });
    const live = [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
    expect(live).toEqual(['a', 'b', 'c', 'd', 'e']);
  });
});
