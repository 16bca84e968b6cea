// A full pass's deletion candidates against a page another job stores while the pass runs, a page
// whose fetch time is before the pass's start (fetched before the pass began, or, before fetch
// times were the database's clock, by a worker whose clock was behind it): a record that page
// wrote (a new one, or a new version) or served unchanged was stored after the pass began, so the
// pass never tombstones it on its listing's word, whatever the page's fetch time says. Records
// without change times, which the pass's changed-before bound cannot protect. Real Postgres, the
// record statements called directly.
import { describe, expect, it } from 'vitest';
import { readChangesPage, tombstoneUnseenRecords, upsertRecords } from '../db/models/records';
import { withTransaction } from '../db/transaction';
import { useTestDatabase } from './helpers/database';

const db = useTestDatabase();
const MINUTE = 60_000;

describe('a page stored during a full pass with a fetch time before the pass began', () => {
  it('makes none of its records deletion candidates of that pass', async () => {
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key) values ('t', 'demo', 'clock') returning id`);
    const connectionId = rows[0]!.id;
    const where = { connectionId, resourceType: 'items' };
    // Stored an hour ago, without change times: a, b and c.
    const hourAgo = new Date(Date.now() - 60 * MINUTE);
    await upsertRecords(db.pool, { ...where, jobId: null, fetchedAt: hourAgo }, ['a', 'b', 'c'].map((id) => ({ externalId: id, updatedAt: null, data: { id, v: 1 } })));
    // A full pass starts now (the database's clock) and its listing serves nothing of them.
    const { rows: task } = await db.pool.query<{ id: string }>(
      `with j as (insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at)
                  values ($1, 't', 'full', 'api', 'running', now()) returning id)
       insert into sync_tasks (job_id, resource_type, status, started_at) select id, 'items', 'processing', now() from j returning id`,
      [connectionId],
    );
    const taskId = task[0]!.id;
    // Then an incremental job's page, stored after that start with a fetch time 30 seconds before
    // it: b in a new version, c unchanged, d new.
    const behind = new Date(Date.now() - 30_000);
    await upsertRecords(db.pool, { ...where, jobId: null, fetchedAt: behind }, [
      { externalId: 'b', updatedAt: null, data: { id: 'b', v: 2 } },
      { externalId: 'c', updatedAt: null, data: { id: 'c', v: 1 } },
      { externalId: 'd', updatedAt: null, data: { id: 'd', v: 1 } },
    ]);
    // The pass's deletion step (a consistent listing: every candidate goes) tombstones a alone.
    const deleted = await withTransaction(db.pool, (tx) =>
      tombstoneUnseenRecords(tx, { ...where, taskId, changedBefore: new Date(Date.now() - MINUTE) }, { except: [] }));
    const feed = (await readChangesPage(db.pool, { connectionId, afterSeq: '0', limit: 100 })).changes;
    expect(feed.filter((c) => c.change === 'delete').map((c) => c.external_id)).toEqual(['a']);
    expect(deleted).toBe(1);
  });
});
