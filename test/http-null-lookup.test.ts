// A provider whose one-record look-up answers 200 with null where the record would be for an id it
// no longer has (`{"data": null}`, as GraphQL APIs and many JSON wrappers answer a missing object).
// The http connector read that null as a record that is not an object and failed the deletion step
// for good, on every full pass: a record deleted at the provider was never tombstoned (the stored
// copy stayed live) and no full sync completed again. Null there is an answer naming no record:
// the record is gone. Runs the sync activity against real Postgres and a fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const at = (minutes: number) => new Date(Date.now() - 2 * 3_600_000 + minutes * 60_000).toISOString();

describe('http connector: an item look-up answering null for a record', () => {
  it('is gone: a full pass tombstones it and completes', async () => {
    const items = new Map(['a', 'b', 'c'].map((id, k) => [id, { id, updated_at: at(k) }]));
    const fake = await serve((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const one = /^\/items\/(.+)$/.exec(url.pathname);
      res.writeHead(200, { 'content-type': 'application/json' });
      if (one) return res.end(JSON.stringify({ data: items.get(decodeURIComponent(one[1]!)) ?? null }));
      res.end(JSON.stringify({ data: [...items.values()] }));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      {
        base_url: fake.url,
        // Not stable: a full pass deletes only what the look-up confirms gone.
        pagination: { type: 'next_url', path: 'next', stable: false },
        resources: { items: { path: '/items', records: 'data', id: 'id', updated_at: 'updated_at', item: { path: '/items/{id}', record: 'data' } } },
      },
      'null-lookup',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    const live = async () =>
      [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
    expect((await runPass(deps, connectionId, 'items', 'full')).result).toMatchObject({ status: 'completed' });
    expect(await live()).toEqual(['a', 'b', 'c']);

    items.delete('b');
    expect((await runPass(deps, connectionId, 'items', 'full')).result).toMatchObject({ status: 'completed' });
    expect(await live()).toEqual(['a', 'c']);
  });
});
