// Numbers in a record's data as the provider wrote them: an integer past 2^53 (an int64 amount or
// foreign key), a fraction with more digits than a double holds, or an exponent past a double's
// range is stored, compared and served by the feed with the provider's digits. JSON.parse would
// read each as the nearest double: the stored value would differ from the provider's in its last
// digits, and a change in them alone would not be seen. Runs the sync activity directly against
// real Postgres and a fake provider on 127.0.0.1 that writes its JSON by hand, and reads the feed
// through the real API app (no Temporal behind it: a feed read never reaches Temporal).
import { afterEach, describe, expect, it } from 'vitest';
import { apiAppWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const OLD = new Date(Date.now() - 2 * 3_600_000).toISOString();

describe('http connector: numbers in record data', () => {
  it('are stored and served with the digits the provider sent, and a change in the last digit alone is a change', async () => {
    let amount = '12345678901234567891';
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        `{"items": [{"id": "a", "amount": ${amount}, "fk": -9223372036854775807, "ratio": 0.12345678901234567890, ` +
          `"huge": 1e400, "small": 42, "half": 0.5, "list": [9007199254740993, 1], "text": "12345678901234567891", "updated_at": "${OLD}"}]}`,
      );
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'none' }, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      'long-numbers',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    const stored = async () => {
      const { rows } = await db.pool.query<Record<string, string>>(
        `select data->>'amount' as amount, jsonb_typeof(data->'amount') as amount_type, data->>'fk' as fk, data->>'ratio' as ratio,
                data->>'huge' as huge, data->>'small' as small, data->>'half' as half, data->'list'->>0 as first, data->>'text' as text,
                jsonb_typeof(data->'text') as text_type, change_seq::text as seq
           from records where connection_id = $1 and external_id = 'a'`,
        [connectionId],
      );
      return rows[0]!;
    };
    const feed = async () => {
      const app = apiAppWithoutTemporal(db.pool, 'http-record-numbers');
      const res = await app.request(`/connections/${connectionId}/records`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
      expect(res.status).toBe(200);
      return res.text();
    };

    await runPass(deps, connectionId, 'items', 'full');
    const first = await stored();
    expect({ ...first, seq: undefined }).toEqual({
      amount: '12345678901234567891', amount_type: 'number', fk: '-9223372036854775807', ratio: '0.12345678901234567890',
      huge: `1${'0'.repeat(400)}`, small: '42', half: '0.5', first: '9007199254740993', text: '12345678901234567891', text_type: 'string', seq: undefined,
    });
    const page = await feed();
    for (const exact of ['"amount":12345678901234567891', '"fk":-9223372036854775807', '"ratio":0.12345678901234567890', '"list":[9007199254740993,1]', '"text":"12345678901234567891"', '"small":42']) {
      expect(page).toContain(exact);
    }

    // The last digit alone changes (the change time does not): a change, stored and served.
    amount = '12345678901234567892';
    await runPass(deps, connectionId, 'items', 'full');
    const second = await stored();
    expect(second.amount).toBe('12345678901234567892');
    expect(BigInt(second.seq!)).toBeGreaterThan(BigInt(first.seq!));
    expect(await feed()).toContain('"amount":12345678901234567892');
  });

  it('sends a numeric cursor past 2^53 back with its digits', async () => {
    const asked: (string | null)[] = [];
    const fake = await serve((req, res) => {
      const after = new URL(req.url ?? '/', 'http://x').searchParams.get('after');
      asked.push(after);
      res.writeHead(200, { 'content-type': 'application/json' });
      if (after === null) return res.end(`{"items": [{"id": "p1", "updated_at": "${OLD}"}], "next": 12345678901234567891}`);
      if (after === '12345678901234567891') return res.end(`{"items": [{"id": "p2", "updated_at": "${OLD}"}], "next": null}`);
      res.end(`{"items": [], "next": null}`);
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'cursor', path: 'next', param: 'after' }, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      'long-cursor',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    expect(asked).toEqual([null, '12345678901234567891']);
    const { rows } = await db.pool.query<{ external_id: string }>('select external_id from records where connection_id = $1 order by external_id', [connectionId]);
    expect(rows.map((r) => r.external_id)).toEqual(['p1', 'p2']);
  });
});
