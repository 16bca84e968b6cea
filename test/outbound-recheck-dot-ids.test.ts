// The http connector's re-check asks for a record at its `item.path`, its id one path segment. An
// id `.` or `..` is no segment a URL can carry (the URL parser removes it as a dot segment, in any
// spelling: `%2e` too), so the request went to another path of the provider (`/items/..` is `/`),
// whose 404 said the record was gone: a live record deleted. Such an id cannot be looked up: it is
// neither alive nor gone (it stays as it is), and nothing is requested for it. Against a fake
// provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { httpConnector } from '../connectors/http';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';

afterEach(closeFakeServers);

describe('http connector: re-checking ids that are dot segments', () => {
  it('requests nothing for `.` and `..` and reports them neither alive nor gone; other ids are looked up at their own path', async () => {
    const fake = await serve((req, res) => {
      const id = req.url?.match(/^\/v1\/items\/([^/?]+)$/)?.[1];
      if (id === 'a') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'a' }));
      res.writeHead(404).end();
    });
    const config = {
      base_url: `${fake.url}/v1`,
      auth: { type: 'none' },
      resources: { items: { path: '/items', records: 'data', id: 'id', item: { path: '/items/{id}' } } },
    };
    const result = await httpConnector.recheck!({ resource: 'items', externalIds: ['..', '.', 'a', 'gone-1'], config, credentials: null, policy: TEST_PROVIDER_POLICY });
    expect({ alive: result.alive.map((r) => r.externalId), gone: result.gone }).toEqual({ alive: ['a'], gone: ['gone-1'] });
    expect(fake.requests.map((r) => r.url)).toEqual(['/v1/items/a', '/v1/items/gone-1']);
  });
});
