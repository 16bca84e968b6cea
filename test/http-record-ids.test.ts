// Record ids the declarative http connector reads from a provider's JSON: numeric ids past 2^53
// (int64 ids, such as snowflake ids) are the provider's digits exactly. JSON.parse rounds such a
// number to the nearest double, so two records whose ids differ only in the last digits would be
// stored as one (the later overwriting the earlier), under an id the provider never gave. Runs the
// sync activity directly against real Postgres and a fake provider on 127.0.0.1 that writes its
// JSON by hand.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const OLD = new Date(Date.now() - 2 * 3_600_000).toISOString();

describe('http connector: numeric ids past 2^53', () => {
  it('are stored under the exact digits the provider sent, one record each, and looked up by them', async () => {
    let listed = ['1234567890123456789', '1234567890123456790', '-9223372036854775808', '42'];
    const lookups: string[] = [];
    const fake = await serve((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const one = /^\/items\/(.+)$/.exec(url.pathname);
      res.writeHead(one && one[1] !== '1234567890123456790' ? 404 : 200, { 'content-type': 'application/json' });
      if (one) {
        lookups.push(one[1]!);
        return res.end(one[1] === '1234567890123456790' ? `{"item": {"id": 1234567890123456790, "name": "b", "updated_at": "${OLD}"}}` : '{}');
      }
      // A string that looks like a long integer stays a string; a long fraction stays a number.
      res.end(`{"items": [${listed.map((id) => `{"id": ${id}, "note": "id 1234567890123456789", "ratio": 0.12345678901234567890, "updated_at": "${OLD}"}`).join(', ')}]}`);
    });
    const connectionId = await createHttpConnection(
      db.pool,
      {
        base_url: fake.url,
        pagination: { type: 'none' },
        resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at', item: { path: '/items/{id}', record: 'item' } } },
      },
      'long-ids',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    const ids = async (live: boolean) =>
      [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => (r.deleted_at === null) === live).map((r) => r.external_id).sort();
    expect(await ids(true)).toEqual(['-9223372036854775808', '1234567890123456789', '1234567890123456790', '42']);
    expect((await storedRecords(db.pool, connectionId, 'items')).get('42')?.data.note).toBe('id 1234567890123456789');

    // Gone from the listing: the lookups ask for the provider's own ids; one is alive, the rest 404.
    listed = ['42'];
    await runPass(deps, connectionId, 'items', 'full');
    expect(lookups.sort()).toEqual(['-9223372036854775808', '1234567890123456789', '1234567890123456790']);
    expect(await ids(true)).toEqual(['1234567890123456790', '42']);
    expect(await ids(false)).toEqual(['-9223372036854775808', '1234567890123456789']);
  });
});

describe('http connector: one id served twice in a page', () => {
  it('stores the newer version of the two, which the cursor has moved past', async () => {
    const at = (minutes: number) => new Date(Date.now() - 2 * 3_600_000 + minutes * 60_000).toISOString();
    // A provider answering from replicas: the page has 'x' as it is now and, after it, as it was.
    let page = [
      { id: 'x', name: 'x v2', updated_at: at(2) },
      { id: 'x', name: 'x v1', updated_at: at(1) },
      { id: 'y', name: 'y v1', updated_at: at(3) },
    ];
    const fake = await serve((req, res) => {
      const since = new URL(req.url ?? '/', 'http://x').searchParams.get('updated_since');
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(page.filter((item) => since === null || item.updated_at >= since)));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at', since: { param: 'updated_since' } } } },
      'twice-in-a-page',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'incremental');
    // The next incremental pass starts at y's change time: x is not served again.
    page = [{ id: 'x', name: 'x v2', updated_at: at(2) }, { id: 'y', name: 'y v1', updated_at: at(3) }];
    await runPass(deps, connectionId, 'items', 'incremental');
    expect((await storedRecords(db.pool, connectionId, 'items')).get('x')?.data.name).toBe('x v2');
  });
});

describe('http connector: an id too long to index', () => {
  it('fails the task for good, naming the record and the limit, and stores nothing of the page', async () => {
    // Random hex: Postgres compresses a long key before it indexes it, so a repetitive one might fit.
    const long = `k${randomBytes(1500).toString('hex')}`;
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items: [{ id: 'short', updated_at: OLD }, { id: long, updated_at: OLD }] }));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      'long-id',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    // Not Postgres's own "index row size … exceeds btree version 4 maximum 2704" (an untyped error,
    // retried on every run): the same id comes back on every retry.
    await expect(runPass(deps, connectionId, 'items', 'full')).rejects.toMatchObject({
      type: 'permanent',
      message: expect.stringMatching(/record 'k[0-9a-f]+…' of 'items' has an id of 3001 bytes, more than 2000/),
    });
    expect((await storedRecords(db.pool, connectionId, 'items')).size).toBe(0);

    // One of 2000 bytes (the limit, in UTF-8: 'é' is two) is stored.
    const most = `${'é'.repeat(500)}${randomBytes(500).toString('hex')}`;
    const fits = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items: [{ id: most, updated_at: OLD }] }));
    });
    const other = await createHttpConnection(
      db.pool,
      { base_url: fits.url, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      'longest-id',
    );
    await runPass(deps, other, 'items', 'full');
    expect([...(await storedRecords(db.pool, other, 'items')).keys()]).toEqual([most]);
  });
});
