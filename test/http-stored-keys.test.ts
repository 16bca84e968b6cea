// A record is stored with every key the provider gave it, including keys JavaScript objects treat
// specially (`__proto__`), also when its text must be made storable (a NUL). Runs the sync
// activity directly against real Postgres and a fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

describe('http connector: stored keys', () => {
  it("keeps a record's own __proto__ key, whether or not another of its strings holds a NUL", async () => {
    const body = '[{"id": "plain", "__proto__": {"role": "admin"}, "note": "x"}, {"id": "nul", "__proto__": {"role": "admin"}, "note": "x\\u0000y"}]';
    const fake = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
    const connectionId = await createHttpConnection(db.pool, { base_url: fake.url, resources: { items: { path: '/items', id: 'id' } } }, 'stored-keys');
    const { result } = await runPass(testActivityDeps({ pool: db.pool }).deps, connectionId, 'items', 'full');
    expect(result.status).toBe('completed');
    const stored = await storedRecords(db.pool, connectionId, 'items');
    const data = (id: string) => JSON.stringify(stored.get(id)?.data);
    expect(data('plain')).toBe('{"id":"plain","note":"x","__proto__":{"role":"admin"}}');
    expect(data('nul')).toBe('{"id":"nul","note":"xy","__proto__":{"role":"admin"}}');
  });
});
