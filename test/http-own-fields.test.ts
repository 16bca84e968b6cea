// Paths into a provider's JSON read the fields it sent, never names every JavaScript object
// inherits (`constructor`, `toString`, `__proto__`): a record without a field `constructor` has no
// value there, so `exclude_when_present: ["constructor"]` keeps it, and a body without a
// `toString` next URL is the last page. Runs the sync activity against real Postgres and a fake
// provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { readPath } from '../connectors/http';
import { parseExactJson } from '../policy/exact-json';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const OLD = new Date(Date.now() - 2 * 3_600_000).toISOString();
const live = async (connectionId: string) =>
  [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();

describe('http connector: paths read own fields only', () => {
  it('reads undefined at an inherited name, and the value of a field of that name the provider sent', () => {
    const body = parseExactJson('{"a": {}, "list": [1, 2], "own": {"constructor": "c", "__proto__": {"x": 1}}}');
    for (const path of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'a.constructor', 'a.__proto__', 'a.valueOf', 'list.length', 'list.constructor']) {
      expect(readPath(body, path), path).toBeUndefined();
    }
    expect(readPath(body, 'own.constructor')).toBe('c');
    expect(readPath(body, 'own.__proto__.x')).toBe(1);
    expect(readPath(body, 'list[1]')).toBe(2);
  });

  it('a full sync keeps a record without a field `constructor` (exclude_when_present) and ends at a body without a `toString` next URL', async () => {
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: [{ id: 'plain', updated_at: OLD }, { id: 'built', constructor: 'acme', updated_at: OLD }] }));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      {
        base_url: fake.url, pagination: { type: 'next_url', path: 'toString' },
        resources: { items: { path: '/items', records: 'data', id: 'id', updated_at: 'updated_at', exclude_when_present: ['constructor'] } },
      },
      'inherited-names',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    expect(await live(connectionId)).toEqual(['plain']);
    expect(fake.requests).toHaveLength(1);
  });
});
