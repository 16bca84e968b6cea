// A provider's change times as the sync stores them: one instant, the one the connector read (its
// `since` filter, keyset steps and cursor), in a form Postgres takes. A change time JavaScript reads
// but Postgres refuses (an impossible day, an offset past ±15:59, a year past 9999) must not fail
// every sync of the resource. Runs the sync activity directly against real Postgres and a fake
// provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import type { ActivityDeps } from '../activities/deps';
import { apiAppWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';
import { storableChangeTime } from '../policy/change-time';

const db = useTestDatabase();
afterEach(closeFakeServers);

/**
 * An `http` connection (app key `appKey`) whose resource `items` is what `items()` gives at each
 * request, answered as one JSON page by a fake provider; and activity deps to sync it with.
 */
async function itemsConnection(appKey: string, items: () => unknown[]): Promise<{ connectionId: string; deps: ActivityDeps }> {
  const fake = await serve((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(items()));
  });
  const connectionId = await createHttpConnection(
    db.pool,
    { base_url: fake.url, resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at' } } },
    appKey,
  );
  return { connectionId, deps: testActivityDeps({ pool: db.pool }).deps };
}

describe('http connector: change times Postgres would read otherwise, or not at all', () => {
  it('stores each record with the instant the connector read, and the pass completes', async () => {
    const items = [
      { id: 'impossible-day', updated_at: '2023-02-29T10:00:00Z' }, // JavaScript: 1 March
      { id: 'far-offset', updated_at: '2024-01-05T10:00:00+20:00' }, // Postgres: displacement out of range
      { id: 'past-9999', updated_at: 1e21 }, // epoch nanoseconds in the year 33658
      { id: 'beyond-dates', updated_at: 1e30 }, // no date at all
      { id: 'micros', updated_at: '2024-01-05T10:00:00.123456Z' }, // kept as given, to the microsecond
      { id: 'plain', updated_at: '2024-01-05T10:00:00Z' },
    ];
    const { connectionId, deps } = await itemsConnection('change-times', () => items);
    const { result } = await runPass(deps, connectionId, 'items', 'full');
    expect(result.status).toBe('completed');
    const { rows } = await db.pool.query<{ external_id: string; at: string | null }>(
      `select external_id, to_char(source_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') as at from records where connection_id = $1`,
      [connectionId],
    );
    expect(Object.fromEntries(rows.map((r) => [r.external_id, r.at]))).toEqual({
      'impossible-day': '2023-03-01T10:00:00.000000',
      'far-offset': '2024-01-04T14:00:00.000000',
      'past-9999': null,
      'beyond-dates': null,
      micros: '2024-01-05T10:00:00.123456',
      plain: '2024-01-05T10:00:00.000000',
    });
  });
});

describe('records feed: change times', () => {
  it('serves each change time in UTC to the microsecond the provider gave, and to the millisecond (as ever) when it gave no more', async () => {
    const items = [
      { id: 'micros', updated_at: '2024-01-05T10:00:00.123456Z' },
      { id: 'micros-offset', updated_at: '2024-01-05T12:00:00.000001+02:00' },
      { id: 'millis', updated_at: '2024-01-05T10:00:00.5Z' },
      { id: 'plain', updated_at: '2024-01-05T10:00:00Z' },
      { id: 'seven-digits', updated_at: '2024-01-05T10:00:00.1234567Z' }, // past Postgres's resolution: read by JavaScript
      { id: 'year-one', updated_at: '0000-12-31T23:00:00-02:00' },
      { id: 'none' },
    ];
    const { connectionId, deps } = await itemsConnection('served-change-times', () => items);
    await runPass(deps, connectionId, 'items', 'full');
    const app = apiAppWithoutTemporal(db.pool, 'http-change-times');
    const res = await app.request(`/connections/${connectionId}/records`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    expect(res.status).toBe(200);
    const { items: served } = (await res.json()) as { items: { external_id: string; source_updated_at: string | null }[] };
    expect(Object.fromEntries(served.map((c) => [c.external_id, c.source_updated_at]))).toEqual({
      micros: '2024-01-05T10:00:00.123456Z',
      'micros-offset': '2024-01-05T10:00:00.000001Z',
      millis: '2024-01-05T10:00:00.500Z',
      plain: '2024-01-05T10:00:00.000Z',
      'seven-digits': '2024-01-05T10:00:00.123Z',
      'year-one': '0001-01-01T01:00:00.000Z',
      none: null,
    });
  });
});

describe('storableChangeTime', () => {
  it('keeps RFC 3339 text Postgres reads alike, gives any other readable time as the instant JavaScript reads, and null past years 1-9999', () => {
    expect(storableChangeTime('2024-01-05T10:00:00.123456Z')).toBe('2024-01-05T10:00:00.123456Z');
    expect(storableChangeTime('2024-01-05T10:00:00+05:30')).toBe('2024-01-05T10:00:00+05:30');
    expect(storableChangeTime('2024-01-05 10:00:00.5+0530')).toBe('2024-01-05 10:00:00.5+0530');
    expect(storableChangeTime('2023-02-29T10:00:00Z')).toBe('2023-03-01T10:00:00.000Z');
    expect(storableChangeTime('2024-01-05T10:00:00.1234567Z')).toBe('2024-01-05T10:00:00.123Z');
    expect(storableChangeTime('Wed Oct 10 20:19:24 +0000 2018')).toBe('2018-10-10T20:19:24.000Z');
    expect(storableChangeTime('+033658-09-27T01:46:40.000Z')).toBeNull();
    expect(storableChangeTime('0000-12-31T23:00:00-02:00')).toBe('0001-01-01T01:00:00.000Z');
    expect(storableChangeTime('0000-12-31T23:00:00Z')).toBeNull();
    expect(storableChangeTime('not a time')).toBeNull();
  });
});

describe('http connector: a change time the provider corrects backwards', () => {
  it('a record once stamped in the future (a provider clock gone wrong) takes its corrected version at the next full pass', async () => {
    const future = new Date(Date.now() + 24 * 3_600_000).toISOString();
    const corrected = new Date(Date.now() - 3_600_000).toISOString();
    let items = [{ id: 'a', name: 'first', updated_at: future }];
    const { connectionId, deps } = await itemsConnection('corrected-times', () => items);
    await runPass(deps, connectionId, 'items', 'full');
    expect((await storedRecords(db.pool, connectionId, 'items')).get('a')?.data.name).toBe('first');

    // The provider's clock is put right, and the record changed since: its change time is now earlier than the stored one.
    items = [{ id: 'a', name: 'second', updated_at: corrected }];
    await runPass(deps, connectionId, 'items', 'full');
    expect((await storedRecords(db.pool, connectionId, 'items')).get('a')?.data.name).toBe('second');
  });

  // Found by the exactness model (test/helpers/http-exactness-model.ts): an item edited with a change
  // time a second or two before its stored one kept its old version through every later pass.
  it("a record edited with a change time a second before its stored one (a provider's servers' clocks differ) takes that version at the next full pass", async () => {
    const t1 = Date.now() - 3_600_000;
    let items = [{ id: 'a', name: 'first', updated_at: new Date(t1).toISOString() }];
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(items));
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at' } } },
      'backwards-second',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    items = [{ id: 'a', name: 'second', updated_at: new Date(t1 - 1000).toISOString() }];
    await runPass(deps, connectionId, 'items', 'full');
    expect((await storedRecords(db.pool, connectionId, 'items')).get('a')?.data.name).toBe('second');
    // A version older by more than the clock skew is still older news: it never replaces the stored one.
    items = [{ id: 'a', name: 'stale', updated_at: new Date(t1 - 1000 - 3_600_000).toISOString() }];
    await runPass(deps, connectionId, 'items', 'full');
    expect((await storedRecords(db.pool, connectionId, 'items')).get('a')?.data.name).toBe('second');
  });
});

describe('http connector: change times without a zone', () => {
  // A worker's own time zone is no part of a provider's change times: `2024-01-05T10:00:00` is read
  // as UTC wherever the worker runs. Read in the worker's zone (here 8 hours behind UTC), a keyset
  // step asked the provider for `since` 8 hours past the last record served, skipping those between.
  it('reads them as UTC whatever the worker zone, so a keyset listing serves every record', async () => {
    const zone = process.env.TZ;
    process.env.TZ = 'America/Los_Angeles';
    try {
      const items = [1, 2, 3, 4, 5, 6].map((hour) => ({ id: `r${hour}`, updated_at: `2024-01-05T0${hour}:00:00` }));
      const utc = (stamp: string) => Date.parse(`${stamp}Z`);
      const fake = await serve((req, res) => {
        const query = new URL(req.url!, 'http://x').searchParams;
        const since = query.get('since');
        const listed = items.filter((item) => since === null || utc(item.updated_at) >= Date.parse(since));
        const page = Number(query.get('page'));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(listed.slice((page - 1) * 2, page * 2)));
      });
      const connectionId = await createHttpConnection(
        db.pool,
        {
          base_url: fake.url,
          pagination: { type: 'page_number', size_param: 'per_page', size: 2 },
          resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at', since: { param: 'since' }, order: 'change_ascending' } },
        },
        'zoneless-times',
      );
      const { result } = await runPass(testActivityDeps({ pool: db.pool }).deps, connectionId, 'items', 'full');
      expect(result.status).toBe('completed');
      const { rows } = await db.pool.query<{ external_id: string; at: string }>(
        `select external_id, to_char(source_updated_at at time zone 'UTC', 'HH24:MI') as at from records where connection_id = $1 order by external_id`,
        [connectionId],
      );
      expect(rows).toEqual(items.map((item) => ({ external_id: item.id, at: item.updated_at.slice(11, 16) })));
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });
});
