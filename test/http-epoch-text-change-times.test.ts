// Providers that send every number as a string (many PHP and Slack-style APIs) send a change time
// in epoch seconds or milliseconds as `"1700000000"`. The http connector read only ISO text and
// epoch numbers, so such a record had no change time: a backfill, which keeps the records changed
// in its window, stored none of them, and an incremental pass never moved its cursor. Text of
// 10, 13, 16 or 19 digits is now the epoch number it spells; compact calendar text (`20240101`,
// `yyyyMMddHHmm`, `yyyyMMddHHmmss`) is none.
// Runs the sync activity against real Postgres and a fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const BASE = Math.floor((Date.now() - 2 * 3_600_000) / 1000);

/** An http connection (app key `appKey`) to a fake provider serving `items` under `data`, change times at `updated_at`. */
async function providerServing(items: { id: string; updated_at: string }[], appKey: string): Promise<string> {
  const fake = await serve((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ data: items }));
  });
  return createHttpConnection(
    db.pool,
    { base_url: fake.url, resources: { items: { path: '/items', records: 'data', id: 'id', updated_at: 'updated_at' } } },
    appKey,
  );
}

describe('http connector: change times in epoch seconds or milliseconds sent as text', () => {
  it('are read as those instants: a backfill stores the records changed in its window', async () => {
    const items = [
      { id: 'a', updated_at: String(BASE) },
      { id: 'b', updated_at: String(BASE + 600) },
      { id: 'c', updated_at: String((BASE + 1200) * 1000) },
      { id: 'd', updated_at: `${BASE + 1800}.250` },
    ];
    const connectionId = await providerServing(items, 'epoch-text');
    const { deps } = testActivityDeps({ pool: db.pool });
    const window = { start: new Date((BASE + 300) * 1000), end: new Date((BASE + 2400) * 1000) };
    const { result } = await runPass(deps, connectionId, 'items', 'backfill', window);
    expect(result).toMatchObject({ status: 'completed' });
    const { rows } = await db.pool.query<{ external_id: string; source_updated_at: Date | null }>(
      'select external_id, source_updated_at from records where connection_id = $1 order by external_id',
      [connectionId],
    );
    expect(rows.map((r) => [r.external_id, r.source_updated_at?.toISOString() ?? null])).toEqual([
      ['b', new Date((BASE + 600) * 1000).toISOString()],
      ['c', new Date((BASE + 1200) * 1000).toISOString()],
      ['d', new Date((BASE + 1800) * 1000 + 250).toISOString()],
    ]);
  });

  it('reads no compact calendar text (yyyyMMddHHmm, yyyyMMddHHmmss) as an epoch number: no change time, never year 1976 or 2611', async () => {
    const items = [
      { id: 'minutes', updated_at: '202401011200' },
      { id: 'seconds', updated_at: '20240101120000' },
      { id: 'epoch', updated_at: String(BASE) },
    ];
    const connectionId = await providerServing(items, 'compact-text');
    const { deps } = testActivityDeps({ pool: db.pool });
    const { result } = await runPass(deps, connectionId, 'items', 'full');
    expect(result).toMatchObject({ status: 'completed' });
    const { rows } = await db.pool.query<{ external_id: string; source_updated_at: Date | null }>(
      'select external_id, source_updated_at from records where connection_id = $1 order by external_id',
      [connectionId],
    );
    expect(rows.map((r) => [r.external_id, r.source_updated_at?.toISOString() ?? null])).toEqual([
      ['epoch', new Date(BASE * 1000).toISOString()],
      ['minutes', null],
      ['seconds', null],
    ]);
  });
});
