// Numbers in a record's data spelled as the provider wrote them: a fraction's trailing zeros (a
// price of 1.10, a quantity of 1.0) are stored and served by the feed as sent, for the http
// connector and for GitHub. JSON.parse reads 1.10 as the double 1.1, whose text is 1.1; the
// database keeps a number's digits and scale (jsonb's numeric), so the spelling is the platform's
// to keep on the way in and on the way out. An exponent and a negative zero are the database's
// limit: it stores the value, printed in full (1e2 as 100, -0 as 0). Runs the sync activity
// directly against real Postgres and fake providers on 127.0.0.1 that write their JSON by hand,
// and reads the feed through the real API app (no Temporal behind it: a feed read never reaches
// Temporal).
import { describe, expect, it } from 'vitest';
import { apiAppWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { serve } from './helpers/fake-server';
import { createHttpConnection } from './helpers/http-sync';
import { useSyncDriver } from './helpers/sync-driver';

const { db, driver } = useSyncDriver();

const OLD = new Date(Date.now() - 2 * 3_600_000).toISOString();

/** Numbers as a provider may spell them, and how the feed serves each (a fraction as sent). */
const SPELLED = '"price": 1.10, "qty": 1.0, "rate": 2.50, "zero": 0.00, "tiny": 0.0000001, "list": [100.00, -0.0, 7], "text": "1.10"';
const SERVED = ['"price":1.10', '"qty":1.0', '"rate":2.50', '"zero":0.00', '"tiny":0.0000001', '"list":[100.00,0.0,7]', '"text":"1.10"'];
/** Spellings the database does not keep (it stores the value): served as it prints them. */
const PRINTED = { written: '"hundred": 1e2, "scaled": 1.50e1, "negative_zero": -0', served: ['"hundred":100', '"scaled":15.0', '"negative_zero":0'] };

/** The feed of `connectionId` as the API answers it (its text). */
async function feedText(connectionId: string): Promise<string> {
  const app = apiAppWithoutTemporal(db.pool, 'record-number-spelling');
  const res = await app.request(`/connections/${connectionId}/records`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
  const text = await res.text();
  expect(res.status, text.slice(0, 300)).toBe(200);
  return text;
}

/** The stored numbers of `externalId`, as the database prints them. */
async function storedNumbers(connectionId: string, externalId: string): Promise<Record<string, string>> {
  const { rows } = await db.pool.query<Record<string, string>>(
    `select data->'price' #>> '{}' as price, data->'qty' #>> '{}' as qty, data->'rate' #>> '{}' as rate, data->'zero' #>> '{}' as zero,
            data->'tiny' #>> '{}' as tiny, (data->'list')::text as list
       from records where connection_id = $1 and external_id = $2`,
    [connectionId, externalId],
  );
  return rows[0]!;
}

const STORED = { price: '1.10', qty: '1.0', rate: '2.50', zero: '0.00', tiny: '0.0000001', list: '[100.00, 0.0, 7]' };

describe('numbers spelled with trailing zeros in record data', () => {
  it('http connector: are stored and served by the feed as the provider wrote them', async () => {
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"items": [{"id": "a", ${SPELLED}, ${PRINTED.written}, "updated_at": "${OLD}"}, {"id": 7.0, "updated_at": "${OLD}"}, {"id": 8e0, "updated_at": "${OLD}"}]}`);
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'none' }, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      'spelled-numbers',
    );
    await driver.pass(connectionId, ['items'], { mode: 'full' });
    expect(await storedNumbers(connectionId, 'a')).toEqual(STORED);
    // An id is its value's digits, however spelled: the record it always was.
    expect([...(await driver.live(connectionId, 'items')).keys()].sort()).toEqual(['7', '8', 'a']);
    const page = await feedText(connectionId);
    for (const served of [...SERVED, ...PRINTED.served]) expect(page).toContain(served);
  });

  it('http connector: a record stored with another spelling of the same numbers (1.1 for 1.10) is rewritten, once, as an update', async () => {
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"items": [{"id": "a", ${SPELLED}, "updated_at": "${OLD}"}, {"id": "b", "n": 1, "updated_at": "${OLD}"}]}`);
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'none' }, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      'respelled-numbers',
    );
    await driver.pass(connectionId, ['items'], { mode: 'full' });
    // As a platform that read 1.10 as 1.1 stored it (the same values, other text).
    await db.pool.query(
      `update records set data = data || '{"price": 1.1, "qty": 1, "rate": 2.5, "zero": 0, "list": [100, 0, 7]}'::jsonb where connection_id = $1 and external_id = 'a'`,
      [connectionId],
    );
    const { rows } = await db.pool.query<{ seq: string }>(`select max(change_seq)::text as seq from records where connection_id = $1`, [connectionId]);
    const result = await driver.pass(connectionId, ['items'], { mode: 'full' });
    expect(result.get('items')).toMatchObject({ entityCount: 2, writtenCount: 1 });
    expect(await storedNumbers(connectionId, 'a')).toEqual(STORED);
    const { rows: changed } = await db.pool.query<{ external_id: string }>(`select external_id from records where connection_id = $1 and change_seq > $2`, [connectionId, rows[0]!.seq]);
    expect(changed.map((r) => r.external_id)).toEqual(['a']);
    // Served as stored now: no further change.
    expect((await driver.pass(connectionId, ['items'], { mode: 'full' })).get('items')).toMatchObject({ entityCount: 2, writtenCount: 0 });
  });

  it('http connector: a number that loses its point (1.0 now served as 1) is a change, on a page holding no other pointed number', async () => {
    let body = `{"items": [{"id": "a", "qty": 1.0, "updated_at": "${OLD}"}, {"id": "b", "n": 2, "updated_at": "${OLD}"}]}`;
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'none' }, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      'unpointed-numbers',
    );
    await driver.pass(connectionId, ['items'], { mode: 'full' });
    const qty = async () => (await db.pool.query<{ qty: string }>(`select data->'qty' #>> '{}' as qty from records where connection_id = $1 and external_id = 'a'`, [connectionId])).rows[0]!.qty;
    expect(await qty()).toBe('1.0');
    body = `{"items": [{"id": "a", "qty": 1, "updated_at": "${OLD}"}, {"id": "b", "n": 2, "updated_at": "${OLD}"}]}`;
    const result = await driver.pass(connectionId, ['items'], { mode: 'full' });
    expect({ written: result.get('items')?.writtenCount, qty: await qty() }).toEqual({ written: 1, qty: '1' });
    expect(await feedText(connectionId)).toContain('"qty":1,');
  });

  it('github: are stored and served by the feed as GitHub wrote them', async () => {
    const fake = await serve((req, res) => {
      if (!/^\/repos\/octo\/shop\/issues\?/.test(req.url ?? '')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return res.end('{"message": "Not Found"}');
      }
      res.writeHead(200, { 'content-type': 'application/json', 'x-ratelimit-remaining': '4999', 'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600) });
      res.end(`[{"id": 1001, "number": 1, "title": "priced", "state": "open", ${SPELLED}, ${PRINTED.written}, "created_at": "${OLD}", "updated_at": "${OLD}"}]`);
    });
    const connectionId = await driver.connection('github', { base_url: fake.url, repositories: ['octo/shop'], resource_types: ['issues'] }, { token: 'ghp_spelled_numbers_token_1234567890' });
    await driver.pass(connectionId, ['issues'], { mode: 'full' });
    expect(await storedNumbers(connectionId, 'octo/shop#1')).toEqual(STORED);
    const page = await feedText(connectionId);
    for (const served of [...SERVED, ...PRINTED.served]) expect(page).toContain(served);
  });
});
