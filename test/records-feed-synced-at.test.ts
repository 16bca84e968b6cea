// The feed's `synced_at` and `modified_after` against a real Postgres: a deletion is a change
// written after the record's last write, so its `synced_at` never stands before that write's (a
// writer's clock may be behind the one that wrote the record), and a reader filtering by
// `modified_after` sees it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PoolClient } from 'pg';
import { readChangesPage, tombstoneDeselectedBatch, tombstoneUnseenRecords, upsertRecords } from '../db/models/records';
import { withTransaction } from '../db/transaction';
import { createTestDatabase, type TestDatabase } from './helpers/database';

const HOUR = 3_600_000;

describe('records feed: a deletion never moves synced_at back', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function connectionWithRecord(at: Date): Promise<string> {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('clock-' || gen_random_uuid(), 'demo', 'feed', 'paused') returning id`,
    );
    const id = rows[0]!.id;
    await upsertRecords(db.pool, { connectionId: id, resourceType: 'items', jobId: null, at }, [{ externalId: 'a', data: { v: 1 }, updatedAt: null }]);
    return id;
  }

  /** What a reader filtering by `modified_after` = `after` reads of the feed from its start. */
  async function readAfter(id: string, after: Date) {
    const page = await readChangesPage(db.pool, { connectionId: id, afterSeq: '0', limit: 100, modifiedAfter: after });
    return page.changes.map((c) => ({ external_id: c.external_id, change: c.change, synced_at: c.synced_at.getTime() }));
  }

  // The record was written by a worker whose clock runs an hour ahead; the deletion by one whose
  // clock is right (a config change's deletion takes the database's clock, which is).
  const cases: [string, (tx: PoolClient, id: string, at: Date) => Promise<number>][] = [
    ['a config change that stops selecting it', (tx, id) =>
      tombstoneDeselectedBatch(tx, { connectionId: id, countedChange: true }, { resourceType: 'items', idPrefix: '', keep: [], afterId: '', limit: 100 }).then((r) => r.tombstoned)],
    ['a full pass that did not see it', async (tx, id, at) => {
      const { rows } = await tx.query<{ task: string }>(
        `with job as (insert into sync_jobs (tenant_id, connection_id, job_type, trigger, status) select tenant_id, id, 'full', 'manual', 'running' from connections where id = $1 returning id)
         insert into sync_tasks (job_id, resource_type, status, started_at) select id, 'items', 'processing', $2 from job returning id as task`,
        [id, new Date(at.getTime() + 2 * HOUR)],
      );
      return tombstoneUnseenRecords(tx, { connectionId: id, resourceType: 'items', taskId: rows[0]!.task, changedBefore: at, at }, { except: [] });
    }],
  ];
  for (const [name, deletion] of cases) {
    it(`${name}: the delete's synced_at is not before the insert's, and modified_after between them shows it`, async () => {
      const now = new Date();
      const ahead = new Date(now.getTime() + HOUR);
      const id = await connectionWithRecord(ahead);
      const halfway = new Date(now.getTime() + HOUR / 2);
      expect(await readAfter(id, halfway)).toEqual([{ external_id: 'a', change: 'insert', synced_at: ahead.getTime() }]);
      expect(await withTransaction(db.pool, (tx) => deletion(tx, id, now))).toBe(1);
      expect(await readAfter(id, halfway)).toEqual([{ external_id: 'a', change: 'delete', synced_at: ahead.getTime() }]);
    });
  }
});
