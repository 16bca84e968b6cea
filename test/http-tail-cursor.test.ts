// Providers whose listing ends in a tail position: every page, the last and an empty one included,
// gives a next cursor or link (the position after the last record served; `has_more: false` beside
// it), and an empty page gives back the very position it was asked for, to poll from later. The
// http connector followed it onto the empty page, whose next page was that page again, and the
// paging guard failed the task for good as a paging loop: no pass of such a provider completed.
// An empty page pointing at itself is the end of the listing. Runs the sync activity against real
// Postgres and a fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const at = (minutes: number) => new Date(Date.now() - 2 * 3_600_000 + minutes * 60_000).toISOString();
const ITEMS = ['a', 'b', 'c', 'd', 'e'].map((id, k) => ({ id, updated_at: at(k) }));

/** A keyset provider, 2 items a page, whose every page names the position after its last item (the one asked for, when empty). */
async function tailProvider() {
  return serve((req, res) => {
    const url = new URL(req.url ?? '/', `http://${req.headers.host}`);
    const after = url.searchParams.get('after') ?? url.searchParams.get('cursor');
    const rest = ITEMS.filter((i) => after === null || i.id > after);
    const page = rest.slice(0, 2);
    const position = page.at(-1)?.id ?? after ?? '';
    const hasMore = rest.length > 2;
    const next = new URL('/items', url);
    next.searchParams.set('after', position);
    res.writeHead(200, { 'content-type': 'application/json', link: `<${next.href}>; rel="next"` });
    res.end(JSON.stringify({ data: page, next: `/items?after=${position}`, meta: { next_cursor: position, has_more: hasMore } }));
  });
}

describe('http connector: a listing ending in a tail position', () => {
  it.each([
    ['link_header', { type: 'link_header' }],
    ['next_url', { type: 'next_url', path: 'next' }],
    ['cursor', { type: 'cursor', path: 'meta.next_cursor', param: 'cursor' }],
  ])('%s: an empty page pointing at itself ends the listing, and the pass stores every record', async (style, pagination) => {
    const fake = await tailProvider();
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination, resources: { items: { path: '/items', records: 'data', id: 'id', updated_at: 'updated_at' } } },
      `tail-${style}`,
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    const { result } = await runPass(deps, connectionId, 'items', 'full');
    expect(result).toMatchObject({ status: 'completed' });
    const live = [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
    expect(live).toEqual(['a', 'b', 'c', 'd', 'e']);
  });
});
