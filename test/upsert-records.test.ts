// Record writes (db/models/records.ts) against a real Postgres: unchanged rows are not rewritten, an
// older version of a record never replaces a newer one (a backfill or a second job of the same
// connection can overlap with the scheduled sync), every write takes the next change-feed position,
// and two writers of one connection commit in feed order.
import type { PoolClient } from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeTombstonesBatch, readChangesPage, tombstoneUnseenRecords, upsertRecords } from '../db/models/records';
import { withTransaction } from '../db/transaction';
import { exactJson, JsonNumber } from '../policy/exact-json';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { eventually } from './helpers/worker';

describe('record writes and the change feed', () => {
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

  const record = (externalId: string, data: Record<string, unknown>, updatedAt: string | null = null) => ({ externalId, data, updatedAt });
  const putIn = (tx: PoolClient, records: ReturnType<typeof record>[], resourceType = 'issues', conn = connectionId) =>
    // Outside a full pass nothing joins a seen-set: `seen` is always 0 here; outside a job task's
    // page no claim is checked: `held` is always true.
    upsertRecords(tx, { connectionId: conn, resourceType, jobId: null, fetchedAt: new Date() }, records).then(({ seen, held, ...counts }) => {
      expect(seen).toBe(0);
      expect(held).toBe(true);
      return counts;
    });
  const put = (records: ReturnType<typeof record>[], resourceType = 'issues') => withTransaction(db.pool, (tx) => putIn(tx, records, resourceType));
  const stored = async (id: string) =>
    (await db.pool.query('select data, source_updated_at from records where connection_id = $1 and external_id = $2', [connectionId, id])).rows[0];
  const feed = async (afterSeq: string, conn = connectionId) => (await readChangesPage(db.pool, { connectionId: conn, afterSeq, limit: 1000 })).changes;
  const last = (changes: { change_seq: string }[], fallback: string) => changes.at(-1)?.change_seq ?? fallback;

  it('writes new and changed records, skips unchanged ones and never goes back to an older version', async () => {
    expect(await put([record('1', { v: 2 }, '2025-01-02T00:00:00Z')])).toEqual({ added: 1, updated: 0, unchanged: 0 });
    expect(await put([record('1', { v: 2 }, '2025-01-02T00:00:00Z')])).toEqual({ added: 0, updated: 0, unchanged: 1 });
    // An older fetch of the same record arrives late: ignored.
    expect(await put([record('1', { v: 1 }, '2025-01-01T00:00:00Z')])).toEqual({ added: 0, updated: 0, unchanged: 1 });
    expect(await stored('1')).toMatchObject({ data: { v: 2 } });
    // A newer one wins; without a provider time the data decides; a repeated id counts once.
    expect(await put([record('1', { v: 3 }, '2025-01-03T00:00:00Z')])).toEqual({ added: 0, updated: 1, unchanged: 0 });
    expect(await put([record('2', { v: 1 }), record('2', { v: 9 })])).toEqual({ added: 1, updated: 0, unchanged: 0 });
    expect(await put([record('2', { v: 10 })])).toEqual({ added: 0, updated: 1, unchanged: 0 });
    expect(await stored('1')).toMatchObject({ data: { v: 3 } });
    expect(await stored('2')).toMatchObject({ data: { v: 10 } });
  });

  it("rewrites a record whose numbers changed only their spelling (1.1 to 1.10, and back): the stored data is the provider's latest text", async () => {
    // The database compares jsonb numbers by value (1.1 equals 1.10), but keeps and serves each as written.
    const at = '2025-02-01T00:00:00Z';
    const text = async (id: string) => (await db.pool.query<{ t: string }>('select data::text as t from records where connection_id = $1 and external_id = $2', [connectionId, id])).rows[0]!.t;
    const served = async (id: string) => exactJson((await feed('0')).find((c) => c.external_id === id)!.data);
    expect(await put([record('spelled', { price: 1.1, n: 1 }, at)])).toEqual({ added: 1, updated: 0, unchanged: 0 });
    expect(await put([record('spelled', { price: new JsonNumber('1.10'), n: 1 }, at)])).toEqual({ added: 0, updated: 1, unchanged: 0 });
    expect(await text('spelled')).toBe('{"n": 1, "price": 1.10}');
    expect(await served('spelled')).toBe('{"n":1,"price":1.10}');
    expect(await put([record('spelled', { price: new JsonNumber('1.10'), n: 1 }, at)])).toEqual({ added: 0, updated: 0, unchanged: 1 });
    expect(await put([record('spelled', { price: 1.1, n: 1 }, at)])).toEqual({ added: 0, updated: 1, unchanged: 0 });
    expect(await text('spelled')).toBe('{"n": 1, "price": 1.1}');
    // Scale added to a number spelled as an integer, beside an unchanged one.
    expect(await put([record('spelled', { price: 1.1, n: new JsonNumber('1.0') }, at)])).toEqual({ added: 0, updated: 1, unchanged: 0 });
    expect(await served('spelled')).toBe('{"n":1.0,"price":1.1}');
  });

  it('gives every change the next feed position, each record once at its latest, tombstones included', async () => {
    const { rows } = await db.pool.query(`insert into connections (tenant_id, provider_slug, app_key) values ('t', 'demo', 'feed') returning id`);
    const conn: string = rows[0].id;
    const putConn = (records: ReturnType<typeof record>[]) => withTransaction(db.pool, (tx) => putIn(tx, records, 'issues', conn));
    await putConn([record('a', { v: 1 }), record('b', { v: 1 }), record('c', { v: 1 })]);
    const first = await feed('0', conn);
    expect(first.map((c) => [c.external_id, c.change])).toEqual([['a', 'insert'], ['b', 'insert'], ['c', 'insert']]);
    const cursor = last(first, '0');

    // An unchanged write is no change; a changed one moves the record to the end of the feed.
    await putConn([record('a', { v: 1 }), record('b', { v: 2 })]);
    expect((await feed(cursor, conn)).map((c) => [c.external_id, c.change, c.data])).toEqual([['b', 'update', { v: 2 }]]);

    // A full pass that saw only b tombstones a and c, keeping their data.
    const { rows: task } = await db.pool.query(
      `with j as (insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at)
                  values ($1, 't', 'full', 'api', 'running', now()) returning id)
       insert into sync_tasks (job_id, resource_type, status, started_at) select id, 'issues', 'processing', now() + interval '1 minute' from j returning id`,
      [conn],
    );
    await db.pool.query(`insert into sync_seen (task_id, external_id) values ($1, 'b')`, [task[0].id]);
    expect(await withTransaction(db.pool, (tx) => tombstoneUnseenRecords(tx, { connectionId: conn, resourceType: 'issues', taskId: task[0].id, changedBefore: new Date() }, { except: [] }))).toBe(2);
    const afterDelete = await feed(cursor, conn);
    expect(afterDelete.map((c) => [c.external_id, c.change])).toEqual([['b', 'update'], ['a', 'delete'], ['c', 'delete']]);
    expect(afterDelete[1]).toMatchObject({ data: { v: 1 } });
    expect(afterDelete[1]!.deleted_at).toBeInstanceOf(Date);
    // Tombstoning again changes nothing.
    expect(await withTransaction(db.pool, (tx) => tombstoneUnseenRecords(tx, { connectionId: conn, resourceType: 'issues', taskId: task[0].id, changedBefore: new Date() }, { except: [] }))).toBe(0);

    // Seen again, a tombstoned record comes back as an insert.
    expect(await putConn([record('a', { v: 1 })])).toEqual({ added: 1, updated: 0, unchanged: 0 });
    const back = await feed(last(afterDelete, cursor), conn);
    expect(back.map((c) => [c.external_id, c.change, c.deleted_at])).toEqual([['a', 'insert', null]]);

    // Purging old tombstones removes c and records how far the purge reached.
    expect(await purgeTombstonesBatch(db.pool, new Date(Date.now() + 1000), 100)).toBeGreaterThanOrEqual(1);
    expect((await feed('0', conn)).map((c) => c.external_id)).toEqual(['b', 'a']);
    const { rows: purged } = await db.pool.query('select resource_type, purged_seq::text from feed_purges where connection_id = $1', [conn]);
    expect(purged).toEqual([{ resource_type: 'issues', purged_seq: afterDelete[2]!.change_seq }]);
  });

  it('commits two writers of one connection in feed order, so a reader between them misses nothing', async () => {
    const { rows } = await db.pool.query(`insert into connections (tenant_id, provider_slug, app_key) values ('t', 'demo', 'race') returning id`);
    const conn: string = rows[0].id;
    const first = await db.pool.connect();
    const second = await db.pool.connect();
    try {
      // The first writer takes its feed position and stays open.
      await first.query('begin');
      await putIn(first, [record('from-first', { v: 1 })], 'issues', conn);
      // The second writer takes a later position and commits as soon as it can.
      await second.query('begin');
      const secondPid: number = (await second.query('select pg_backend_pid() as pid')).rows[0].pid;
      let secondDone = false;
      const secondWrite = (async () => {
        await putIn(second, [record('from-second', { v: 1 })], 'issues', conn);
        await second.query('commit');
        secondDone = true;
      })();
      // Either it finished (nothing made it wait) or it waits on a lock held by the first writer.
      await eventually(async () => {
        if (secondDone) return true;
        const { rows: waiting } = await db.pool.query(`select 1 from pg_stat_activity where pid = $1 and wait_event_type = 'Lock'`, [secondPid]);
        return waiting.length > 0 ? true : undefined;
      });

      // A consumer reads now, then after both committed, moving its cursor as it goes.
      const seen: string[] = [];
      const before = await feed('0', conn);
      seen.push(...before.map((c) => c.external_id));
      await first.query('commit');
      await secondWrite;
      const after = await feed(last(before, '0'), conn);
      seen.push(...after.map((c) => c.external_id));
      expect(seen).toEqual(['from-first', 'from-second']);
    } finally {
      first.release();
      second.release();
    }
  });

  it('a page fetched before a full pass tombstoned a record never brings it back; a page fetched after does', async () => {
    const t0 = new Date(Date.now() - 60_000);
    const page = [record('gone', { v: 1 }, '2025-01-01T00:00:00Z')];
    await withTransaction(db.pool, (tx) => upsertRecords(tx, { connectionId, resourceType: 'stale', jobId: null, fetchedAt: t0 }, page));
    // A full pass's deletion step tombstones it at `deletedAt`…
    const deletedAt = new Date(Date.now() - 30_000);
    await db.pool.query(
      `update records set deleted_at = $2, synced_at = $2, change = 'delete', change_seq = nextval('records_change_seq')
        where connection_id = $1 and resource_type = 'stale'`,
      [connectionId, deletedAt],
    );
    const state = async () =>
      (await db.pool.query('select deleted_at from records where connection_id = $1 and external_id = $2', [connectionId, 'gone'])).rows[0].deleted_at;
    // …and a page another job fetched before that is written after it: still a tombstone.
    const before = new Date(deletedAt.getTime() - 1000);
    const late = await withTransaction(db.pool, (tx) =>
      upsertRecords(tx, { connectionId, resourceType: 'stale', jobId: null, fetchedAt: before }, page),
    );
    expect(late).toMatchObject({ added: 0, updated: 0 });
    expect(await state()).toEqual(deletedAt);
    // A page fetched after the deletion that has it again brings it back.
    const again = await withTransaction(db.pool, (tx) =>
      upsertRecords(tx, { connectionId, resourceType: 'stale', jobId: null, fetchedAt: new Date() }, page),
    );
    expect(again).toMatchObject({ added: 1, updated: 0 });
    expect(await state()).toBeNull();
  });
  it('a record tombstoned and then served again by a page fetched after the tombstone comes back as the provider has it, even with an older change time', async () => {
    // Re-created (or restored) at the provider with a change time before the deleted version's.
    const t0 = new Date(Date.now() - 600_000);
    const deleted = [record('again', { v: 2 }, new Date(Date.now() - 700_000).toISOString())];
    await withTransaction(db.pool, (tx) => upsertRecords(tx, { connectionId, resourceType: 'recreated', jobId: null, fetchedAt: t0 }, deleted));
    const deletedAt = new Date(Date.now() - 300_000);
    await db.pool.query(
      `update records set deleted_at = $2, synced_at = $2, change = 'delete', change_seq = nextval('records_change_seq')
        where connection_id = $1 and resource_type = 'recreated'`,
      [connectionId, deletedAt],
    );
    const { rows: before } = await db.pool.query(`select max(change_seq)::text as seq from records where connection_id = $1`, [connectionId]);
    const served = [record('again', { v: 1 }, '2020-01-01T00:00:00Z')];
    const back = await withTransaction(db.pool, (tx) =>
      upsertRecords(tx, { connectionId, resourceType: 'recreated', jobId: null, fetchedAt: new Date() }, served),
    );
    expect(back).toMatchObject({ added: 1, updated: 0 });
    const changes = await feed(before[0].seq);
    expect(changes.map((c) => [c.external_id, c.change, c.data, c.deleted_at, c.source_updated_at])).toEqual([
      ['again', 'insert', { v: 1 }, null, '2020-01-01T00:00:00.000Z'],
    ]);
  });

  it('a page checked for later tombstones names, and writes nothing for, a record it serves (anew or unchanged) that a deletion step tombstoned after its fetch, also one committed while it waited for the feed lock', async () => {
    const stale = async (id: string) =>
      (await db.pool.query(`select data, deleted_at from records where connection_id = $1 and resource_type = 'behind' and external_id = $2`, [connectionId, id])).rows[0];
    const t0 = new Date(Date.now() - 60_000);
    await withTransaction(db.pool, (tx) =>
      upsertRecords(tx, { connectionId, resourceType: 'behind', jobId: null, fetchedAt: t0 }, [
        record('again', { v: 1 }, '2025-01-01T00:00:00Z'), record('same', { v: 1 }, '2025-01-01T00:00:00Z'), record('live', { v: 1 }, '2025-01-01T00:00:00Z'),
      ]),
    );
    // An incremental page is fetched: 'again' in a new version (created again), 'same' as stored, 'live' changed.
    const fetchedAt = new Date(Date.now() - 1000);
    const page = [record('again', { v: 2 }, '2025-06-01T00:00:00Z'), record('same', { v: 1 }, '2025-01-01T00:00:00Z'), record('live', { v: 2 }, '2025-06-01T00:00:00Z')];
    // A full pass's deletion step holds the feed lock and tombstones 'again' and 'same'…
    const deletion = await db.pool.connect();
    const page1 = await db.pool.connect();
    try {
      await deletion.query('begin');
      await deletion.query(`select pg_advisory_xact_lock(${0x5eed}, hashtext($1))`, [connectionId]);
      await deletion.query(
        `update records set deleted_at = now(), synced_at = now(), change = 'delete', change_seq = nextval('records_change_seq')
          where connection_id = $1 and resource_type = 'behind' and external_id in ('again', 'same')`,
        [connectionId],
      );
      // …while the page's statement (its snapshot taken before that commits) waits for the lock.
      const pid: number = (await page1.query('select pg_backend_pid() as pid')).rows[0].pid;
      const write = upsertRecords(page1, { connectionId, resourceType: 'behind', jobId: null, fetchedAt, behindKnown: [] }, page);
      await eventually(async () => {
        const { rows: waiting } = await db.pool.query(`select 1 from pg_stat_activity where pid = $1 and wait_event_type = 'Lock'`, [pid]);
        return waiting.length > 0 ? true : undefined;
      });
      await deletion.query('commit');
      // Both stand behind the tombstones: 'again' in a new version, 'same' in the version the
      // step judged (its listing may have missed the record alive, past its re-checks).
      expect(await write).toMatchObject({ added: 0, updated: 0, unchanged: 0 });
      expect([...(await write).behind!].sort()).toEqual(['again', 'same']);
      expect((await stale('live')).data).toEqual({ v: 1 });
    } finally {
      deletion.release();
      page1.release();
    }
    // Named, the page is stored: the tombstones stand (the page was fetched before them).
    const stored = await withTransaction(db.pool, (tx) =>
      upsertRecords(tx, { connectionId, resourceType: 'behind', jobId: null, fetchedAt, behindKnown: ['again', 'same'] }, page),
    );
    expect(stored).toMatchObject({ added: 0, updated: 1, unchanged: 2, behind: [] });
    expect((await stale('live')).data).toEqual({ v: 2 });
    expect((await stale('again')).deleted_at).not.toBeNull();
    expect((await stale('same')).deleted_at).not.toBeNull();
  });

  it('a page fetched before the stored version never replaces it when the provider time cannot order them (equal, or none), and a page fetched after does', async () => {
    const stored = async (id: string) =>
      (await db.pool.query('select data from records where connection_id = $1 and resource_type = $2 and external_id = $3', [connectionId, 'overlap', id])).rows[0].data;
    const write = (records: ReturnType<typeof record>[], fetchedAt: Date) =>
      withTransaction(db.pool, (tx) => upsertRecords(tx, { connectionId, resourceType: 'overlap', jobId: null, fetchedAt }, records));
    const t = (ms: number) => new Date(Date.now() - 60_000 + ms);
    // Two overlapping jobs: one fetched v1 first, the other fetched v2 after (changed within the
    // provider's one-second resolution, or a provider without change times) and wrote first.
    for (const updatedAt of ['2025-01-01T00:00:00Z', null]) {
      const id = `same-${updatedAt ?? 'none'}`;
      await write([record(id, { v: 0 }, updatedAt)], t(0));
      expect(await write([record(id, { v: 2 }, updatedAt)], t(2_000))).toMatchObject({ updated: 1 });
      // The slower job's page, fetched at t(1000), is written only now: older news.
      expect(await write([record(id, { v: 1 }, updatedAt)], t(1_000)), `${updatedAt}`).toMatchObject({ updated: 0, unchanged: 1 });
      expect(await stored(id), `${updatedAt}`).toEqual({ v: 2 });
      // A page fetched later wins.
      expect(await write([record(id, { v: 3 }, updatedAt)], t(3_000))).toMatchObject({ updated: 1 });
      expect(await stored(id)).toEqual({ v: 3 });
    }
    // A later provider time still wins whenever it was fetched.
    await write([record('newer', { v: 1 }, '2025-01-01T00:00:00Z')], t(5_000));
    expect(await write([record('newer', { v: 2 }, '2025-01-02T00:00:00Z')], t(4_000))).toMatchObject({ updated: 1 });
  });
  it('a version confirmed unchanged by a later fetch is not replaced by a page fetched between the two (the provider went back to it)', async () => {
    const stored = async (id: string) =>
      (await db.pool.query('select data from records where connection_id = $1 and resource_type = $2 and external_id = $3', [connectionId, 'back', id])).rows[0].data;
    const write = (records: ReturnType<typeof record>[], fetchedAt: Date) =>
      withTransaction(db.pool, (tx) => upsertRecords(tx, { connectionId, resourceType: 'back', jobId: null, fetchedAt }, records));
    const base = Date.now() - 60_000;
    const t = (ms: number) => new Date(base + ms);
    // A provider of whole seconds (the three versions changed within one), and one without change times.
    const second = new Date(Math.floor(base / 1000) * 1000).toISOString();
    for (const updatedAt of [second, null]) {
      const id = `back-${updatedAt === null ? 'none' : 'second'}`;
      // v1 is stored, fetched at t(0).
      await write([record(id, { v: 1 }, updatedAt)], t(0));
      const position = async () =>
        (await db.pool.query('select change_seq::text from records where connection_id = $1 and resource_type = $2 and external_id = $3', [connectionId, 'back', id])).rows[0].change_seq;
      const before = await position();
      // A slow page of one job fetches v2 at t(100); the provider then goes back to v1, which a
      // page of an overlapping job fetches at t(200) and writes first: unchanged, no feed change.
      expect(await write([record(id, { v: 1 }, updatedAt)], t(200))).toMatchObject({ added: 0, updated: 0, unchanged: 1 });
      expect(await position()).toBe(before);
      // The slow page is written last: fetched before v1 was last seen, it is older news.
      expect(await write([record(id, { v: 2 }, updatedAt)], t(100)), `${updatedAt}`).toMatchObject({ updated: 0, unchanged: 1 });
      expect(await stored(id), `${updatedAt}`).toEqual({ v: 1 });
      // A page fetched after the confirmation still wins.
      expect(await write([record(id, { v: 3 }, updatedAt)], t(300))).toMatchObject({ updated: 1 });
      expect(await stored(id)).toEqual({ v: 3 });
    }
    // A record changed long before it was fetched is served unchanged by a re-sync at no write.
    await write([record('old', { v: 1 }, '2025-01-01T00:00:00Z')], t(0));
    const version = async () =>
      (await db.pool.query(`select xmin::text as v from records where connection_id = $1 and resource_type = 'back' and external_id = 'old'`, [connectionId])).rows[0].v;
    const written = await version();
    expect(await write([record('old', { v: 1 }, '2025-01-01T00:00:00Z')], t(200))).toMatchObject({ unchanged: 1 });
    expect(await version()).toBe(written);
  });
});
