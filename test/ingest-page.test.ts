// One page of a job task against a real Postgres (db/models/records.ts `upsertRecords` with a
// seen-set and progress): the page's records, its seen-set ids and the task's and job's progress
// are one statement; a full pass's seen-set holds only the ids the pass did not write itself, and
// its deletion step still tombstones exactly the records it did not see. And the paging loop's
// one-page lookahead (connectors/pages.ts `fetchingAhead`): pages in order, at most one ahead.
import { describe, expect, it } from 'vitest';
import { fetchingAhead } from '../connectors/pages';
import { tombstoneUnseenRecords, upsertRecords } from '../db/models/records';
import { withTransaction } from '../db/transaction';
import { useTestDatabase } from './helpers/database';

describe('a job page in one statement', () => {
  const db = useTestDatabase();

  const record = (externalId: string, v: number) => ({ externalId, data: { v }, updatedAt: null });
  const noMarks = { high: {}, hold: {} };
  /**
   * A connection with a running full job and its processing task, started at `startedAt` (null: the
   * database's now(), as a claim starts it); `before` runs on the connection before the job exists
   * (what earlier syncs stored: a write while a full pass runs beside it is news that pass does not judge).
   */
  async function fullPass(name: string, startedAt: Date | null, before?: (connectionId: string) => Promise<unknown>) {
    const { rows: c } = await db.pool.query(`insert into connections (tenant_id, provider_slug, app_key) values ('t', 'demo', $1) returning id`, [name]);
    const connectionId: string = c[0].id;
    await before?.(connectionId);
    const { rows: t } = await db.pool.query(
      `with j as (insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, scheduled_at)
                  values ($1, 't', 'full', 'api', 'running', now()) returning id)
       insert into sync_tasks (job_id, resource_type, status, started_at, claim) select id, 'issues', 'processing', coalesce($2, now()), gen_random_uuid() from j returning id, job_id, claim`,
      [connectionId, startedAt],
    );
    return { connectionId, taskId: t[0].id as string, jobId: t[0].job_id as string, claim: t[0].claim as string };
  }
  const seenIds = async (taskId: string) =>
    (await db.pool.query('select external_id from sync_seen where task_id = $1 order by external_id', [taskId])).rows.map((r) => r.external_id);
  const liveIds = async (connectionId: string) =>
    (await db.pool.query('select external_id from records where connection_id = $1 and deleted_at is null order by external_id', [connectionId])).rows.map(
      (r) => r.external_id,
    );

  it('stores the records, the ids the pass did not write and the task and job progress together; deletion takes exactly the unseen rest', async () => {
    const earlier = new Date(Date.now() - 3_600_000);
    // Stored by an earlier sync: a, b, c, d.
    const pass = await fullPass('page', null, (connectionId) =>
      upsertRecords(db.pool, { connectionId, resourceType: 'issues', jobId: null, fetchedAt: earlier }, [record('a', 1), record('b', 1), record('c', 1), record('d', 1)]));
    const target = { connectionId: pass.connectionId, resourceType: 'issues', jobId: pass.jobId };

    // The pass's first page: a changed, b unchanged, e new (twice on the page).
    const page = [record('a', 2), record('b', 1), record('e', 1), record('e', 1)];
    const marks = { high: { '': '2026-01-01T00:00:00.000Z' }, hold: {} };
    const result = await upsertRecords(db.pool, { ...target, fetchedAt: new Date(), seenBy: pass.taskId }, page, {
      taskId: pass.taskId, claim: pass.claim, nextPageToken: 'page-2', records: page.length, partitions: marks,
    });
    expect(result).toEqual({ added: 1, updated: 1, unchanged: 1, seen: 1, held: true });
    // Only b needs the seen-set: a and e were written by this pass, after it began.
    expect(await seenIds(pass.taskId)).toEqual(['b']);
    const { rows: task } = await db.pool.query('select * from sync_tasks where id = $1', [pass.taskId]);
    expect(task[0]).toMatchObject({
      page_token: 'page-2', pages_done: 1, entity_count: 4, written_count: 2, added_count: 1, updated_count: 1, unchanged_count: 1, seen_count: 1,
      partition_progress: marks,
    });
    const { rows: job } = await db.pool.query('select processed_entities from sync_jobs where id = $1', [pass.jobId]);
    expect(job[0].processed_entities).toBe('4');

    // The last page, empty: still counted.
    await upsertRecords(db.pool, { ...target, fetchedAt: new Date(), seenBy: pass.taskId }, [], { taskId: pass.taskId, claim: pass.claim, nextPageToken: null, records: 0, partitions: noMarks });
    const { rows: after } = await db.pool.query('select page_token, pages_done, seen_count from sync_tasks where id = $1', [pass.taskId]);
    expect(after[0]).toEqual({ page_token: null, pages_done: 2, seen_count: 1 });

    // The pass saw a, b and e: c and d go, nothing it saw does.
    const deleted = await withTransaction(db.pool, (tx) =>
      tombstoneUnseenRecords(tx, { ...target, taskId: pass.taskId, changedBefore: new Date() }, { except: [] }),
    );
    expect(deleted).toBe(2);
    expect(await liveIds(pass.connectionId)).toEqual(['a', 'b', 'e']);
  });

  it('writes nothing of a page whose run no longer holds the task (another claim token, or the task no longer processing)', async () => {
    const pass = await fullPass('fenced', null);
    const target = { connectionId: pass.connectionId, resourceType: 'issues', jobId: pass.jobId };
    const page = (claim: string) =>
      upsertRecords(db.pool, { ...target, fetchedAt: new Date(), seenBy: pass.taskId }, [record('z', 1)], { taskId: pass.taskId, claim, nextPageToken: 'next', records: 1, partitions: noMarks });
    expect(await page('00000000-0000-4000-8000-000000000000')).toEqual({ added: 0, updated: 0, unchanged: 0, seen: 0, held: false });
    await db.pool.query(`update sync_tasks set status = 'pending' where id = $1`, [pass.taskId]);
    expect(await page(pass.claim)).toMatchObject({ held: false });
    const { rows: task } = await db.pool.query('select page_token, pages_done, entity_count from sync_tasks where id = $1', [pass.taskId]);
    expect(task[0]).toEqual({ page_token: null, pages_done: 0, entity_count: 0 });
    const { rows: job } = await db.pool.query('select processed_entities from sync_jobs where id = $1', [pass.jobId]);
    expect(job[0].processed_entities).toBe('0');
    expect(await liveIds(pass.connectionId)).toEqual([]);
    expect(await seenIds(pass.taskId)).toEqual([]);
  });

  it('puts every id into the seen-set when the statement writes before the task start', async () => {
    const pass = await fullPass('skew', new Date(Date.now() + 60_000));
    const target = { connectionId: pass.connectionId, resourceType: 'issues', jobId: pass.jobId };
    const result = await upsertRecords(db.pool, { ...target, fetchedAt: new Date(), seenBy: pass.taskId }, [record('x', 1), record('y', 1)], {
      taskId: pass.taskId, claim: pass.claim, nextPageToken: null, records: 2, partitions: noMarks,
    });
    expect(result).toEqual({ added: 2, updated: 0, unchanged: 0, seen: 2, held: true });
    expect(await seenIds(pass.taskId)).toEqual(['x', 'y']);
    // Written before the pass's start, x and y are candidates but for the seen-set: nothing goes.
    const deleted = await withTransaction(db.pool, (tx) =>
      tombstoneUnseenRecords(tx, { ...target, taskId: pass.taskId, changedBefore: new Date(Date.now() + 120_000) }, { except: [] }),
    );
    expect(deleted).toBe(0);
  });

  it('never moves synced_at back: a row a worker wrote by its clock running ahead keeps that time; a pass that wrote the row does not delete it', async () => {
    const pass = await fullPass('overlap', null);
    const target = { connectionId: pass.connectionId, resourceType: 'issues', jobId: pass.jobId };
    const syncedAt = async () => (await db.pool.query('select data, synced_at from records where connection_id = $1', [pass.connectionId])).rows[0];
    // (Its page was fetched two hours ago: the overlapping job's below, fetched after it, is newer news.)
    await upsertRecords(db.pool, { ...target, fetchedAt: new Date(Date.now() - 7_200_000), seenBy: pass.taskId }, [record('r', 1)], {
      taskId: pass.taskId, claim: pass.claim, nextPageToken: null, records: 1, partitions: noMarks,
    });
    // Written by the pass after it began (the database's clock): no seen-set row needed.
    expect(await seenIds(pass.taskId)).toEqual([]);
    const first: Date = (await syncedAt()).synced_at;
    // An overlapping job whose page was fetched before the pass began changes r: written later, a later time.
    expect(await upsertRecords(db.pool, { ...target, jobId: null, fetchedAt: new Date(Date.now() - 3_600_000) }, [record('r', 2)])).toMatchObject({ updated: 1 });
    const second = await syncedAt();
    expect(second.data).toEqual({ v: 2 });
    expect(second.synced_at.getTime()).toBeGreaterThanOrEqual(first.getTime());
    // A row written, before writes took the database's clock, by a worker whose clock ran an hour
    // ahead: a later write keeps that time.
    const ahead = new Date(Date.now() + 3_600_000);
    await db.pool.query('update records set synced_at = $2 where connection_id = $1', [pass.connectionId, ahead]);
    expect(await upsertRecords(db.pool, { ...target, jobId: null, fetchedAt: new Date() }, [record('r', 3)])).toMatchObject({ updated: 1 });
    expect(await syncedAt()).toEqual({ data: { v: 3 }, synced_at: ahead });
    const deleted = await withTransaction(db.pool, (tx) =>
      tombstoneUnseenRecords(tx, { ...target, taskId: pass.taskId, changedBefore: new Date() }, { except: [] }),
    );
    expect(deleted).toBe(0);
    expect(await liveIds(pass.connectionId)).toEqual(['r']);
  });
});

describe('fetchingAhead', () => {
  /** A source of `n` pages that logs when each is asked for and when the consumer takes it; page `failAt` fails. */
  function source(n: number, log: string[], failAt?: number) {
    return (async function* () {
      for (let i = 1; i <= n; i++) {
        log.push(`fetch ${i}`);
        await new Promise((r) => setTimeout(r, 5));
        log.push(`fetched ${i}`);
        if (i === failAt) throw new Error(`page ${i} failed`);
        yield i;
      }
    })();
  }

  it('hands out every page in order, asking for the next while the consumer works on one, never two ahead', async () => {
    const log: string[] = [];
    const got: number[] = [];
    for await (const page of fetchingAhead(source(3, log))) {
      log.push(`store ${page} begins`);
      await new Promise((r) => setTimeout(r, 20));
      log.push(`store ${page} ends`);
      got.push(page);
    }
    expect(got).toEqual([1, 2, 3]);
    expect(log).toEqual([
      'fetch 1', 'fetched 1', 'store 1 begins', 'fetch 2', 'fetched 2', 'store 1 ends',
      'store 2 begins', 'fetch 3', 'fetched 3', 'store 2 ends', 'store 3 begins', 'store 3 ends',
    ]);
  });

  it("lets the consumer's synchronous start on a page (sending its statement) run before the next fetch's own work", async () => {
    const log: string[] = [];
    for await (const page of fetchingAhead(source(3, log))) {
      // What a store does before its first wait: here, everything up to the statement's send.
      log.push(`statement ${page} sent`);
      await Promise.resolve();
      log.push(`statement ${page} queued behind nothing`);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(log.indexOf('statement 1 queued behind nothing')).toBeLessThan(log.indexOf('fetch 2'));
    expect(log.indexOf('statement 2 queued behind nothing')).toBeLessThan(log.indexOf('fetch 3'));
  });

  it('gives a failed fetch only after every earlier page', async () => {
    const got: number[] = [];
    const run = async () => {
      for await (const page of fetchingAhead(source(5, [], 3))) {
        await new Promise((r) => setTimeout(r, 20));
        got.push(page);
      }
    };
    await expect(run()).rejects.toThrow('page 3 failed');
    expect(got).toEqual([1, 2]);
  });

  it('lets no fetch outlive a consumer that stops: none begins after it, the one in flight ends before the loop does', async () => {
    const log: string[] = [];
    const run = async () => {
      for await (const page of fetchingAhead(source(5, log))) {
        if (page === 2) throw new Error('store failed');
      }
    };
    await expect(run()).rejects.toThrow('store failed');
    log.push('loop ended');
    await new Promise((r) => setTimeout(r, 30));
    // The fetch of page 3 was not yet begun when the consumer stopped at page 2: it never begins.
    expect(log).toEqual(['fetch 1', 'fetched 1', 'fetch 2', 'fetched 2', 'loop ended']);
  });
});
