// Numbers in a record's data as the provider wrote them: an integer past 2^53 (an int64 amount or
// foreign key), a fraction with more digits than a double holds, or an exponent past a double's
// range is stored, compared and served by the feed with the provider's digits. JSON.parse would
// read each as the nearest double: the stored value would differ from the provider's in its last
// digits, and a change in them alone would not be seen. Runs the sync activity directly against
// real Postgres and a fake provider on 127.0.0.1 that writes its JSON by hand, and reads the feed
// through the real API app (no Temporal behind it: a feed read never reaches Temporal).
import type { ApplicationFailure } from '@temporalio/common';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { storedNumberLength } from '../policy/exact-json';
import { apiAppWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { TEST_PROVIDER_POLICY, testActivityDeps } from './helpers/deps';
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

describe('http connector: numbers the database would print otherwise than the record measures', () => {
  /** A pass over one record whose JSON the fake provider writes as `record` (an object's inner text); the failure, if any. */
  const passOver = async (record: string, providers = TEST_PROVIDER_POLICY) => {
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"items": [{"id": "a", ${record}, "updated_at": "${OLD}"}]}`);
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'none' }, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      `printed-${Math.random().toString(36).slice(2)}`,
    );
    const { deps } = testActivityDeps({ pool: db.pool, providers });
    const failure = await runPass(deps, connectionId, 'items', 'full').then(() => null, (err: unknown) => err as ApplicationFailure);
    const { rows } = await db.pool.query<{ n: string }>('select count(*)::text as n from records where connection_id = $1', [connectionId]);
    return { failure, stored: Number(rows[0]!.n) };
  };

  it('fails for good, naming the record, on a number outside what the database stores (past 131072 digits before the point or 16383 after it)', async () => {
    for (const number of ['1e131072', '-2.5e131072', '1e-16384', `0.${'0'.repeat(16383)}1`]) {
      const { failure, stored } = await passOver(`"x": [1, ${number}]`);
      expect(stored, number).toBe(0);
      expect(failure?.nonRetryable, `${number}: ${failure?.message}`).toBe(true);
      expect(failure?.message, number).toMatch(/^record 'a' of 'items' holds a number the database cannot store \(more than 131072 digits before the point or 16383 after it\): [-0-9.e]{1,39}…?$/);
    }
    // Just within: stored.
    expect(await passOver(`"x": [1e131071, 1e-16383]`)).toEqual({ failure: null, stored: 1 });
  });

  it('counts a number at its size written out in full, as the database stores and prints it, against PROVIDER_MAX_RECORD_BYTES', async () => {
    // 20 bytes of JSON each, 100,001 bytes written out: the record is 2,000,020 bytes as the feed serves it.
    const many = Array.from({ length: 20 }, () => '1.0e100000').join(', ');
    const providers = { ...TEST_PROVIDER_POLICY, maxRecordBytes: 1024 * 1024 };
    const { failure, stored } = await passOver(`"x": [${many}]`, providers);
    expect(stored).toBe(0);
    expect(failure?.nonRetryable, failure?.message).toBe(true);
    expect(failure?.message).toBe(`record 'a' of 'items' exceeds ${1024 * 1024} bytes (PROVIDER_MAX_RECORD_BYTES)`);
    // Ten of them (about 1,000,010 bytes written out) fit.
    expect(await passOver(`"x": [${Array.from({ length: 10 }, () => '1e100000').join(', ')}]`, providers)).toEqual({ failure: null, stored: 1 });
  });
});

describe('storedNumberLength', () => {
  it("is the length of a number as the database stores and prints it in jsonb, or null where the database refuses it", async () => {
    const exponents = fc.oneof(fc.integer({ min: -20, max: 20 }), fc.integer({ min: -16400, max: -16370 }), fc.integer({ min: 131000, max: 131100 }));
    const numbers = fc
      .tuple(fc.boolean(), fc.stringMatching(/^(0|[1-9]\d{0,20})$/), fc.option(fc.stringMatching(/^\d{1,25}$/), { nil: undefined }), fc.option(exponents, { nil: undefined }))
      .map(([negative, whole, fraction, exponent]) => `${negative ? '-' : ''}${whole}${fraction === undefined ? '' : `.${fraction}`}${exponent === undefined ? '' : `e${exponent}`}`);
    await fc.assert(
      fc.asyncProperty(numbers, async (text) => {
        const printed = await db.pool.query<{ n: number }>('select octet_length(($1::jsonb)::text)::int as n', [text]).then((r) => r.rows[0]!.n, () => null);
        expect(storedNumberLength(text)).toBe(printed);
      }),
      { numRuns: 300 },
    );
  });
});

describe('records feed: deeply nested data', () => {
  it('serves a record nested as deeply as a record may be, whatever numbers the database prints in it', async () => {
    // 3,000 levels of objects (within the bound a record is stored by, about 4,000), holding 1e21:
    // read and written as a double by the connector, printed by the database as 22 digits.
    const depth = 3000;
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"items": [{"id": "deep", "updated_at": "${OLD}", "x": ${'{"a": '.repeat(depth)}[1e21, 5]${'}'.repeat(depth)}}]}`);
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'none' }, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      'deep-numbers',
    );
    await runPass(testActivityDeps({ pool: db.pool }).deps, connectionId, 'items', 'full');
    const app = apiAppWithoutTemporal(db.pool, 'http-record-numbers');
    const res = await app.request(`/connections/${connectionId}/records`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    const text = await res.text();
    expect(res.status, text.slice(0, 300)).toBe(200);
    expect(text).toContain(`"a":[1000000000000000000000,5]${'}'.repeat(depth)}`);
  });
});
