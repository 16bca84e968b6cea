// Paths of the declarative http connector name a field whose name has a dot in it by JSONPath's
// bracket notation with quotes (`$['@odata.nextLink']`, `$["@odata.deltaLink"]`), wherever the
// config takes a path: OData providers (Microsoft Graph, Dynamics, SharePoint) send their next link
// as the body's field `@odata.nextLink`. A malformed path is refused when the config is written, with
// a 400 naming the key. Runs the API (no Temporal) and the sync activity against real Postgres, and
// an OData-like fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { readPath } from '../connectors/http';
import { parseExactJson } from '../policy/exact-json';
import { useApiWithoutTemporal } from './helpers/api';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const api = useApiWithoutTemporal('http-bracket-paths');
afterEach(closeFakeServers);

const OLD = Date.now() - 2 * 3_600_000;
const USERS = Array.from({ length: 7 }, (_, i) => ({
  id: `u${i}`, 'display.name': `User ${i}`, meta: { 'last.modified': new Date(OLD + i * 60_000).toISOString() },
}));

describe('http connector: quoted names in brackets', () => {
  it('reads quoted names, in single or double quotes, with escaped quotes, beside dotted names and indexes', () => {
    const body = parseExactJson(String.raw`{"@odata.nextLink": "n", "value": [{"a.b": {"it's": 1, "say \"hi\"": 2}}], "x": {"y": [0, {"@z": 3}]}}`);
    expect(readPath(body, "$['@odata.nextLink']")).toBe('n');
    expect(readPath(body, '$["@odata.nextLink"]')).toBe('n');
    expect(readPath(body, "['@odata.nextLink']")).toBe('n');
    expect(readPath(body, String.raw`value[0]['a.b']['it\'s']`)).toBe(1);
    expect(readPath(body, String.raw`$.value[0]["a.b"]["say \"hi\""]`)).toBe(2);
    expect(readPath(body, "x.y[1]['@z']")).toBe(3);
    // A quoted name is a field's name, never an index, and never read as dotted.
    expect(readPath(body, "x.y['1']")).toBeUndefined();
    expect(readPath(body, "$['@odata']")).toBeUndefined();
  });

  it('refuses a malformed path when the config is written, with a 400 naming the key', async () => {
    const cases: [Record<string, unknown>, Record<string, unknown>, string][] = [
      [{ id: "$['id" }, {}, 'resources.items.id'],
      [{ id: 'id', updated_at: '$["a\']' }, {}, 'resources.items.updated_at'],
      [{ id: 'id', records: "$[''value']" }, {}, 'resources.items.records'],
      // Descendant search (`..`) and wildcards are not in the subset: refused, never read as something else.
      [{ id: 'id', exclude_when_present: ['$..deleted'] }, {}, 'resources.items.exclude_when_present[0]'],
      [{ id: 'id' }, { pagination: { type: 'next_url', path: "$['@odata.nextLink'].x[*]" } }, 'pagination.path'],
      [{ id: 'id' }, { pagination: { type: 'cursor', path: "$['a']b", param: 'c' } }, 'pagination.path'],
      [{ id: 'id', item: { path: '/items/{id}', record: "$['a'" } }, {}, 'resources.items.item.record'],
    ];
    for (const [index, [resource, extra, key]] of cases.entries()) {
      const config = { base_url: 'http://127.0.0.1:9', resources: { items: { path: '/items', ...resource } }, ...extra };
      const res = await api.call('POST', '/connections', { tenant_id: 'acme', app_key: `bracket-${index}`, provider: 'http', status: 'paused', config });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.error.message, key).toContain(`${key}: must be a JSON path`);
    }
  });

  it('a full sync pages an OData provider by `@odata.nextLink` to the page with `@odata.deltaLink`, reading ids, change times and exclusions by quoted names', async () => {
    const fake = await serve((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const skip = Number(url.searchParams.get('$skiptoken') ?? 0);
      const page = USERS.slice(skip, skip + 3);
      const more = skip + 3 < USERS.length;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({
        '@odata.context': 'https://graph.example/$metadata#users',
        value: page.map((u) => (u.id === 'u5' ? { ...u, '@removed': { reason: 'deleted' } } : u)),
        ...(more ? { '@odata.nextLink': `/v1.0/users?$select=id&$skiptoken=${skip + 3}` } : { '@odata.deltaLink': '/v1.0/users/delta?$deltatoken=abc' }),
      }));
    });
    const connectionId = await createHttpConnection(
      api.db.pool,
      {
        base_url: fake.url,
        pagination: { type: 'next_url', path: "$['@odata.nextLink']" },
        resources: {
          users: {
            path: '/v1.0/users', params: { $select: 'id' }, records: "$['value']", id: '$["id"]', updated_at: "meta['last.modified']",
            exclude_when_present: ["['@removed']"],
          },
        },
      },
      'odata',
    );
    const { deps } = testActivityDeps({ pool: api.db.pool });
    await runPass(deps, connectionId, 'users', 'full');
    const stored = await storedRecords(api.db.pool, connectionId, 'users');
    expect([...stored.keys()].sort()).toEqual(['u0', 'u1', 'u2', 'u3', 'u4', 'u6']);
    expect(stored.get('u6')!.data['display.name']).toBe('User 6');
    expect(fake.requests.map((r) => new URL(r.url, 'http://x').searchParams.get('$skiptoken'))).toEqual([null, '3', '6']);
  });
});
