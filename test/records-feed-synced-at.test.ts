// The feed's `synced_at` and `modified_after` against a real Postgres. A change's `synced_at` is the
// database's clock read once the connection's feed lock is held, so it grows with the feed: a
// reader filtering by `modified_after` a time it read from one change sees every change written
// after it, also one whose transaction (or statement) began before that change was written. And a
// deletion never moves `synced_at` back: a record a worker wrote by its own clock running ahead
// (before writes took the database's clock) keeps that time through its deletion, which a reader
// filtering by `modified_after` past the write still sees.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PoolClient } from 'pg';
import { fetchTime, lockChangeFeed, readChangesPage, tombstoneDeselectedBatch, tombstoneUnseenRecords, upsertRecords } from '../db/models/records';
import { withTransaction } from '../db/transaction';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { eventually } from './helpers/worker';

const HOUR = 3_600_000;

describe('records feed: synced_at', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function newConnection(): Promise<string> {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('clock-' || gen_random_uuid(), 'demo', 'feed', 'paused') returning id`,
    );
    return rows[0]!.id;
  }
  const write = async (on: PoolClient | TestDatabase['pool'], id: string, externalId: string) =>
    upsertRecords(on, { connectionId: id, resourceType: 'items', jobId: null, fetchedAt: await fetchTime(db.pool) }, [{ externalId, data: { v: 1 }, updatedAt: null }]);

  /** What a reader filtering by `modified_after` = `after` reads of the feed from its start. */
  async function readAfter(id: string, after: Date) {
    const page = await readChangesPage(db.pool, { connectionId: id, afterSeq: '0', limit: 100, modifiedAfter: after });
    return page.changes.map((c) => ({ external_id: c.external_id, change: c.change, synced_at: c.synced_at.getTime() }));
  }

  it('grows with the feed: a write whose transaction began before another write, and waited for the feed lock, is dated after it', async () => {
    const id = await newConnection();
    const first = await db.pool.connect();
    const second = await db.pool.connect();
    try {
      // The second writer's transaction begins first (its now() is the earliest of the two)…
      await second.query('begin');
      await second.query('select now()');
      // …the first writer holds the feed lock, and the second's statement waits for it…
      await first.query('begin');
      await lockChangeFeed(first, id);
      const pid: number = (await second.query('select pg_backend_pid() as pid')).rows[0].pid;
      const waiting = write(second, id, 'b');
      await eventually(async () => {
        const { rows } = await db.pool.query(`select 1 from pg_stat_activity where pid = $1 and wait_event_type = 'Lock'`, [pid]);
        return rows.length > 0 ? true : undefined;
      });
      // …while the first writes a and commits.
      await write(first, id, 'a');
      await first.query('commit');
      await waiting;
      await second.query('commit');
    } finally {
      first.release();
      second.release();
    }
    const feed = (await readChangesPage(db.pool, { connectionId: id, afterSeq: '0', limit: 100 })).changes;
    expect(feed.map((c) => c.external_id)).toEqual(['a', 'b']);
    const { rows } = await db.pool.query<{ later: boolean }>(
      `select (select synced_at from records where connection_id = $1 and external_id = 'b') > (select synced_at from records where connection_id = $1 and external_id = 'a') as later`,
      [id],
    );
    expect(rows[0]!.later).toBe(true);
    // A reader that read a and filters by its time still reads b.
    expect((await readAfter(id, feed[0]!.synced_at)).map((c) => c.external_id)).toContain('b');
  });

  // The record was written by a worker whose clock ran an hour ahead, before writes took the
  // database's clock; the deletion is written now.
  const cases: [string, (tx: PoolClient, id: string, at: Date) => Promise<number>][] = [
    ['a config change that stops selecting it', (tx, id) =>
      tombstoneDeselectedBatch(tx, { connectionId: id, countedChange: true }, { resourceType: 'items', idPrefix: '', keep: [], afterId: '', limit: 100 }).then((r) => r.tombstoned)],
    ['a full pass that did not see it', async (tx, id, at) => {
      const { rows } = await tx.query<{ task: string }>(
        `with job as (insert into sync_jobs (tenant_id, connection_id, job_type, trigger, status) select tenant_id, id, 'full', 'manual', 'running' from connections where id = $1 returning id)
         insert into sync_tasks (job_id, resource_type, status, started_at) select id, 'items', 'processing', $2 from job returning id as task`,
        [id, new Date(at.getTime() + 2 * HOUR)],
      );
      return tombstoneUnseenRecords(tx, { connectionId: id, resourceType: 'items', taskId: rows[0]!.task, changedBefore: at }, { except: [] });
    }],
  ];
  for (const [name, deletion] of cases) {
    it(`${name}: the delete's synced_at is not before the insert's, and modified_after between them shows it`, async () => {
      const now = new Date();
      const ahead = new Date(now.getTime() + HOUR);
      const id = await newConnection();
      await write(db.pool, id, 'a');
      await db.pool.query('update records set synced_at = $2 where connection_id = $1', [id, ahead]);
      const halfway = new Date(now.getTime() + HOUR / 2);
      expect(await readAfter(id, halfway)).toEqual([{ external_id: 'a', change: 'insert', synced_at: ahead.getTime() }]);
      expect(await withTransaction(db.pool, (tx) => deletion(tx, id, now))).toBe(1);
      expect(await readAfter(id, halfway)).toEqual([{ external_id: 'a', change: 'delete', synced_at: ahead.getTime() }]);
    });
  }
});
