// A provider written in Go marshals an empty list (a nil slice) as JSON `null`: `{"results": null}`
// is its empty page. The http connector read that as a page with no array of records and failed
// the task for good, so a listing paged by offset (which ends at its first empty page) never
// completed, nor did an incremental pass with nothing new. `null` where the records are is a page
// with no records. Runs the sync activity against real Postgres and a fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const at = (minutes: number) => new Date(Date.now() - 2 * 3_600_000 + minutes * 60_000).toISOString();

describe('http connector: a page whose records are null (a Go provider\'s empty list)', () => {
  it('is a page with no records: an offset listing ends there, and an incremental pass with nothing new completes', async () => {
    let items = [
      { id: 'a', updated_at: at(1) },
      { id: 'b', updated_at: at(2) },
      { id: 'c', updated_at: at(3) },
    ];
    const fake = await serve((req, res) => {
      const q = new URL(req.url ?? '/', 'http://x').searchParams;
      const since = q.get('updated_since');
      const offset = Number(q.get('offset') ?? 0);
      const limit = Number(q.get('limit') ?? 2);
      const page = items.filter((i) => since === null || i.updated_at >= since).slice(offset, offset + limit);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ results: page.length === 0 ? null : page }));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      {
        base_url: fake.url,
        pagination: { type: 'offset', limit: 2 },
        resources: { items: { path: '/items', records: 'results', id: 'id', updated_at: 'updated_at', since: { param: 'updated_since' } } },
      },
      'null-records',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    const live = async () =>
      [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();

    const full = await runPass(deps, connectionId, 'items', 'full');
    expect(full.result).toMatchObject({ status: 'completed' });
    expect(await live()).toEqual(['a', 'b', 'c']);

    // Nothing changed since: the provider answers `null` at once.
    items = items.map((i) => ({ ...i, updated_at: at(0) }));
    const incremental = await runPass(deps, connectionId, 'items', 'incremental');
    expect(incremental.result).toMatchObject({ status: 'completed' });

    // The provider's list emptied: a full pass tombstones every record.
    items = [];
    const emptied = await runPass(deps, connectionId, 'items', 'full');
    expect(emptied.result).toMatchObject({ status: 'completed' });
    expect(await live()).toEqual([]);
  });

  it('nested: null where the path\'s parent would be (`{"data": null}` for `data.items`) is a page with no records too', async () => {
    const items = [{ id: 'a', updated_at: at(1) }, { id: 'b', updated_at: at(2) }, { id: 'c', updated_at: at(3) }];
    const fake = await serve((req, res) => {
      const offset = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('offset') ?? 0);
      const page = items.slice(offset, offset + 2);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: page.length === 0 ? null : { items: page } }));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'offset', limit: 2 }, resources: { items: { path: '/items', records: 'data.items', id: 'id', updated_at: 'updated_at' } } },
      'null-records-nested',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    const { result } = await runPass(deps, connectionId, 'items', 'full');
    expect(result).toMatchObject({ status: 'completed' });
    const live = [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
    expect(live).toEqual(['a', 'b', 'c']);
  });
});
