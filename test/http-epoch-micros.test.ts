// Change times in epoch microseconds (1700000000123456) or nanoseconds (1700000000123456789), as
// providers built on Postgres, Kafka or Go's UnixNano send them. The http connector read every
// number of 1e11 or more as milliseconds, so these were instants tens of thousands of years ahead,
// past year 9999: no change time, and a backfill, which keeps the records changed in its window,
// stored none of them. A number is now seconds below 1e11, milliseconds below 1e14 (year 5138),
// microseconds below 1e17 and nanoseconds above. Runs the sync activity against real Postgres and a
// fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const BASE = Math.floor((Date.now() - 2 * 3_600_000) / 1000);

describe('http connector: change times in epoch microseconds or nanoseconds', () => {
  it('are read as those instants: a backfill stores the records changed in its window', async () => {
    // Written by hand: the nanoseconds are past 2^53, sent as the provider's digits.
    const body =
      `{"data": [{"id": "a", "updated_at": ${BASE}000000}, {"id": "b", "updated_at": ${BASE + 600}123456}, ` +
      `{"id": "c", "updated_at": ${BASE + 1200}123456789}, {"id": "d", "updated_at": ${BASE + 1800}250}]}`;
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, resources: { items: { path: '/items', records: 'data', id: 'id', updated_at: 'updated_at' } } },
      'epoch-micros',
    );
    const { deps } = testActivityDeps({ pool: db.pool });
    const window = { start: new Date((BASE + 300) * 1000), end: new Date((BASE + 2400) * 1000) };
    const { result } = await runPass(deps, connectionId, 'items', 'backfill', window);
    expect(result).toMatchObject({ status: 'completed' });
    const { rows } = await db.pool.query<{ external_id: string; source_updated_at: Date | null }>(
      'select external_id, source_updated_at from records where connection_id = $1 order by external_id',
      [connectionId],
    );
    expect(rows.map((r) => [r.external_id, r.source_updated_at?.toISOString() ?? null])).toEqual([
      ['b', new Date((BASE + 600) * 1000 + 123).toISOString()],
      ['c', new Date((BASE + 1200) * 1000 + 123).toISOString()],
      ['d', new Date((BASE + 1800) * 1000 + 250).toISOString()],
    ]);
  });
});
