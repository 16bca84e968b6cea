// Statements that pick rows by a reference to another table find them by an index, not by reading
// the whole table: a foreign key's cascade (a webhook event's deliveries deleted with it) and its
// existence checks, and the per-connection batches of a connection's purge. Checked on the
// migrated schema of real Postgres.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteFinishedEventsSql } from '../db/models/webhooks';
import { createTestDatabase, type TestDatabase } from './helpers/database';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

/** The plan of `sql` with `params`, with sequential scans made a last resort (tables here are empty). */
async function planOf(sql: string, params: unknown[]): Promise<string> {
  const client = await db.pool.connect();
  try {
    await client.query('begin');
    await client.query('set local enable_seqscan = off');
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`explain ${sql}`, params);
    await client.query('rollback');
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  } finally {
    client.release();
  }
}

describe('indexes of the schema', () => {
  it('every foreign key has an index leading with one of its columns', async () => {
    const { rows } = await db.pool.query<{ fk: string }>(`
      select c.conrelid::regclass::text || ' (' || (
               select string_agg(a.attname, ', ' order by k.n)
                 from unnest(c.conkey) with ordinality k(attnum, n)
                 join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.attnum) || ')' as fk
        from pg_constraint c
       where c.contype = 'f' and c.connamespace = 'public'::regnamespace
         and not exists (select 1 from pg_index i where i.indrelid = c.conrelid and i.indkey[0] = any(c.conkey))
       order by 1`);
    expect(rows.map((r) => r.fk)).toEqual([]);
  });

  it("a connection's purge finds its webhook events by an index", async () => {
    const connectionId = '00000000-0000-4000-8000-000000000001';
    const batch = await planOf(deleteFinishedEventsSql('e.connection_id = $1'), [connectionId, 500]);
    expect(batch).toMatch(/Index Scan (on|using) webhook_events_connection_idx/);
    expect(batch).not.toMatch(/Seq Scan/);
  });
});
