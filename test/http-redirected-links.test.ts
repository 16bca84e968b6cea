// Relative next links of the declarative http connector after a same-origin redirect: a link is
// relative to the URL that answered (RFC 8288 §3.2, RFC 3986 §5.1.3), not to the URL first asked
// for, as the github connector already reads GitHub's. Runs the sync activity directly against real
// Postgres and a fake provider on 127.0.0.1 whose listing moved from /v1/items to /v2/items/.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

describe('http connector: relative next links after a redirect', () => {
  it.each([
    ['link_header', { type: 'link_header' }],
    ['next_url', { type: 'next_url', path: 'next' }],
  ])('%s: resolves them against the URL that answered', async (_name, pagination) => {
    const fake = await serve((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (path === '/v1/items') return res.writeHead(301, { location: '/v2/items/' }).end();
      const second = path === '/v2/items/page/2';
      if (path !== '/v2/items/' && !second) return res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      const items = [{ id: second ? 'b' : 'a' }];
      res.writeHead(200, { 'content-type': 'application/json', ...(second ? {} : { link: '<page/2>; rel="next"' }) });
      res.end(JSON.stringify(pagination.type === 'next_url' ? { items, next: second ? null : 'page/2' } : { items }));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination, resources: { items: { path: '/v1/items', records: 'items', id: 'id' } } },
      `redirected-${pagination.type}`,
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort()).toEqual(['a', 'b']);
  });
});
