// Record upserts (db/upsert-records.ts) against a real Postgres: unchanged rows are not rewritten,
// and an older version of a record never replaces a newer one (a backfill or a second job of the
// same connection can overlap with the scheduled sync).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertRecords } from '../db/upsert-records';
import { withTransaction } from '../db/transaction';
import { createTestDatabase, type TestDatabase } from './helpers/database';

describe('upsertRecords', () => {
  let db: TestDatabase;
  let connectionId: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    const { rows } = await db.pool.query(`insert into connections (tenant_id, provider_slug, app_key) values ('t', 'demo', 'up') returning id`);
    connectionId = rows[0].id;
  });
  afterAll(async () => {
    await db?.drop();
  });

  const put = (records: { externalId: string; updatedAt: string | null; data: Record<string, unknown> }[]) =>
    withTransaction(db.pool, (tx) => upsertRecords(tx, { connectionId, resourceType: 'issues', jobId: null, at: new Date() }, records));
  const stored = async (id: string) =>
    (await db.pool.query('select data, source_updated_at from records where connection_id = $1 and external_id = $2', [connectionId, id])).rows[0];

  it('writes new and changed records, skips unchanged ones and never goes back to an older version', async () => {
    expect(await put([{ externalId: '1', updatedAt: '2025-01-02T00:00:00Z', data: { v: 2 } }])).toBe(1);
    expect(await put([{ externalId: '1', updatedAt: '2025-01-02T00:00:00Z', data: { v: 2 } }])).toBe(0);
    // An older fetch of the same record arrives late: ignored.
    expect(await put([{ externalId: '1', updatedAt: '2025-01-01T00:00:00Z', data: { v: 1 } }])).toBe(0);
    expect(await stored('1')).toMatchObject({ data: { v: 2 } });
    // A newer one wins; without a provider time the data decides.
    expect(await put([{ externalId: '1', updatedAt: '2025-01-03T00:00:00Z', data: { v: 3 } }])).toBe(1);
    expect(await put([{ externalId: '2', updatedAt: null, data: { v: 1 } }, { externalId: '2', updatedAt: null, data: { v: 9 } }])).toBe(1);
    expect(await put([{ externalId: '2', updatedAt: null, data: { v: 10 } }])).toBe(1);
    expect(await stored('1')).toMatchObject({ data: { v: 3 } });
    expect(await stored('2')).toMatchObject({ data: { v: 10 } });
  });
});
