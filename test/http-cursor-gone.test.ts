// A provider's cursor or next link that stops naming a position while a pass pages: Stripe-style
// cursors name the last record of the page before (`starting_after=b`), and answer 400 ("No such
// item") once that record was deleted; others expire theirs (410 Gone) after a while, as a pass
// waiting out a rate limit meets. The pass starts again from its first page (what it stored stays,
// and its seen-set: those records were alive when it read them), a few times at most; it failed
// for good, so a full sync over a listing whose page-ending records get deleted, or whose pass
// outlives its cursors, never completed and never tombstoned what the provider deleted.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const OLD = new Date(Date.now() - 2 * 3_600_000).toISOString();

describe('http connector: a cursor the provider no longer knows mid-pass', () => {
  it.each([
    ['400, its record deleted', 400],
    ['410, expired', 410],
  ] as const)('(%s) starts the pass again from its first page, which completes and tombstones what is gone', async (_what, status) => {
    let items = ['a', 'b', 'c', 'd', 'e', 'f', 'z'];
    // Cursors issued before this count of first pages are expired (410).
    let firstPages = 0;
    let expireBefore = 0;
    let onPage: (after: string | null) => void = () => undefined;
    const served: string[] = [];
    const fake = await serve((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const after = url.searchParams.get('starting_after');
      const answer = (code: number, body: unknown) => {
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      served.push(after ?? '(first)');
      if (after === null) firstPages += 1;
      const [cursor, epoch] = (after ?? '').split('@');
      if (after !== null && Number(epoch) < expireBefore) return answer(410, { error: 'cursor expired' });
      const from = after === null ? 0 : items.indexOf(cursor!) + 1;
      if (after !== null && from === 0) return answer(400, { error: `No such item: ${cursor}` });
      const page = items.slice(from, from + 2);
      const more = from + 2 < items.length;
      answer(200, { data: page.map((id) => ({ id, updated_at: OLD })), next: more ? `${page.at(-1)}@${firstPages}` : null });
      onPage(after);
    });
    const connectionId = await createHttpConnection(
      db.pool,
      {
        base_url: fake.url,
        pagination: { type: 'cursor', path: 'next', param: 'starting_after' },
        resources: { items: { path: '/items', records: 'data', id: 'id', updated_at: 'updated_at' } },
      },
      `cursor-gone-${status}`,
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');

    // Gone at the provider before the next pass: z. While it pages, after its first page: b (the
    // record its cursor names), or every cursor issued so far expires.
    items = ['a', 'b', 'c', 'd', 'e', 'f'];
    served.length = 0;
    onPage = (after) => {
      if (after !== null) return;
      onPage = () => undefined;
      if (status === 400) items = items.filter((id) => id !== 'b');
      else expireBefore = firstPages + 1;
    };
    await runPass(deps, connectionId, 'items', 'full');
    expect(served.filter((page) => page === '(first)')).toHaveLength(2);
    const live = async () => [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
    // b was seen alive by this pass (its first page): the next one tombstones it.
    expect(await live()).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    if (status === 400) {
      await runPass(deps, connectionId, 'items', 'full');
      expect(await live()).toEqual(['a', 'c', 'd', 'e', 'f']);
    }
  });

  it('fails for good when the first page is refused, and after a few passes started again', async () => {
    // Every cursor refused: the pass starts again three times, then fails naming the answer.
    const fake = await serve((req, res) => {
      const after = new URL(req.url ?? '/', 'http://x').searchParams.get('starting_after');
      res.writeHead(after === null ? 200 : 410, { 'content-type': 'application/json' });
      res.end(JSON.stringify(after === null ? { data: [{ id: 'a', updated_at: OLD }], next: 'a' } : { error: 'cursor expired' }));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      {
        base_url: fake.url,
        pagination: { type: 'cursor', path: 'next', param: 'starting_after' },
        resources: { items: { path: '/items', records: 'data', id: 'id', updated_at: 'updated_at' } },
      },
      'cursor-always-gone',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    await expect(runPass(deps, connectionId, 'items', 'full')).rejects.toMatchObject({ type: 'permanent', message: expect.stringContaining('answered 410') });
    expect(fake.requests.filter((r) => !r.url?.includes('starting_after'))).toHaveLength(4);

    const refused = await serve((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'bad request' }));
    });
    const other = await createHttpConnection(
      db.pool,
      { base_url: refused.url, pagination: { type: 'cursor', path: 'next', param: 'starting_after' }, resources: { items: { path: '/items', records: 'data', id: 'id' } } },
      'first-page-refused',
    );
    await expect(runPass(deps, other, 'items', 'full')).rejects.toMatchObject({ type: 'permanent', message: expect.stringContaining('answered 400') });
    expect(refused.requests).toHaveLength(1);
  });
});
