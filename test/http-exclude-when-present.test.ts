// `exclude_when_present` of the declarative http connector leaves out the records that have a
// value at any of its paths. A field a provider always sends, as null when it does not apply
// (`"deleted_at": null`), is not there: read as present, every record would be left out, and a
// full sync would tombstone them all. Runs the sync activity against real Postgres and a fake
// provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const OLD = new Date(Date.now() - 2 * 3_600_000).toISOString();

describe('http connector: exclude_when_present', () => {
  it('leaves out a record whose field has a value, not one whose field is null or absent', async () => {
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify([
        { id: 'null', deleted_at: null, updated_at: OLD },
        { id: 'set', deleted_at: OLD, updated_at: OLD },
        { id: 'absent', updated_at: OLD },
        { id: 'false', deleted_at: false, updated_at: OLD },
      ]));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'none' }, resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at', exclude_when_present: ['deleted_at'] } } },
      'exclude-null',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    const live = [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
    expect(live).toEqual(['absent', 'null']);
  });
});
