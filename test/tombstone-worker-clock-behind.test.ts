// A full pass's tombstone against a page of another job fetched before it and stored after it,
// when the worker that wrote the tombstone has a clock behind the database's: a page's fetch time
// is the database's clock (`fetchTime`), so the tombstone must be too, or the page looks fetched
// after it and undoes it (a record the provider deleted comes back alive in the feed, as an
// `insert` of older news, until the next full pass). Real Postgres, the record statements called
// directly, in the order the activities run them.
import { describe, expect, it, vi } from 'vitest';
import { fetchTime, readChangesPage, tombstoneUnseenRecords, upsertRecords } from '../db/models/records';
import { withTransaction } from '../db/transaction';
import { useTestDatabase } from './helpers/database';

const db = useTestDatabase();
const MINUTE = 60_000;

describe('a full pass tombstone written by a worker whose clock is behind the database', () => {
  it('is not undone by a page fetched before it and stored after it', async () => {
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key) values ('t', 'demo', 'clock-behind') returning id`);
    const connectionId = rows[0]!.id;
    const where = { connectionId, resourceType: 'items' };
    const hourAgo = new Date(Date.now() - 60 * MINUTE);
    await upsertRecords(db.pool, { ...where, jobId: null, fetchedAt: hourAgo }, [{ externalId: 'a', updatedAt: null, data: { id: 'a', v: 1 } }]);
    // A full pass starts now (the database's clock); its listing does not serve a.
    const { rows: task } = await db.pool.query<{ id: string }>(
      `with j as (insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at)
                  values ($1, 't', 'full', 'api', 'running', now()) returning id)
       insert into sync_tasks (job_id, resource_type, status, started_at) select id, 'items', 'processing', now() from j returning id`,
      [connectionId],
    );
    // An incremental job's request is made (its fetch time read), and served a alive as stored.
    const fetchedAt = await fetchTime(db.pool);
    // Then the pass's deletion step, on a worker whose clock is ten minutes behind, tombstones a
    // (the provider deleted it after the incremental request was answered).
    const changedBefore = new Date(Date.now() - MINUTE);
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() - 10 * MINUTE });
    const deleted = await withTransaction(db.pool, (tx) =>
      tombstoneUnseenRecords(tx, { ...where, taskId: task[0]!.id, changedBefore }, { except: [] })).finally(() => vi.useRealTimers());
    expect(deleted).toBe(1);
    // The incremental page is stored after the tombstone: older news than it.
    await upsertRecords(db.pool, { ...where, jobId: null, fetchedAt }, [{ externalId: 'a', updatedAt: null, data: { id: 'a', v: 1 } }]);
    const feed = (await readChangesPage(db.pool, { connectionId, afterSeq: '0', limit: 100 })).changes;
    expect(feed.map((c) => [c.external_id, c.change])).toEqual([['a', 'delete']]);
  });
});
