// A feed read filtering by `modified_after` on a connection with a long history, against a real
// Postgres and the real API app (in-process, no Temporal behind it: a feed read never reaches
// Temporal): one read examines at most FEED_SCAN_BUDGET changes of its scope after its cursor,
// whatever the history before `modified_after`; when the budget runs out first its page ends
// there with `has_more` and a cursor at the last change it examined, so a reader following the
// cursors reaches the changes written after `modified_after`, each once, in order. A cursor that
// passed changes the filter left out is read only under that filter (or a later one).
// Examined is measured as the rows the statement's scans of `records` touch (EXPLAIN ANALYZE), not as time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueryResult } from 'pg';
import { FEED_SCAN_BUDGET, readChangesPage, type ChangesRead } from '../db/models/records';
import type { Queryable } from '../db/queryable';
import { feedCursors } from '../lib/feed-cursors';
import { apiAppWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING } from './helpers/deps';

/** Changes written two days ago, before `modified_after`: more than twice the budget. */
const HISTORY = 25_000;
/** Changes written now, after `modified_after`. */
const RECENT = 30;

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/** The rows the scans of `records` in `plan` touched over all their loops. */
function recordRows(plan: PlanNode): number {
  const own = plan['Relation Name'] === 'records'
    ? Math.round((plan['Actual Rows'] + (plan['Rows Removed by Filter'] ?? 0) + (plan['Rows Removed by Index Recheck'] ?? 0)) * plan['Actual Loops'])
    : 0;
  return own + (plan.Plans ?? []).reduce((sum, p) => sum + recordRows(p), 0);
}

describe('records feed: a read filtering by modified_after on a long history', () => {
  let db: TestDatabase;
  /** HISTORY old changes of `items`, then RECENT new ones (`new-1`…). */
  let longHistory: string;
  /** HISTORY changes of `items`, old but for a few spread across more than one budget. */
  let scattered: string;
  /** The ids of `scattered`'s recent changes, in feed order. */
  let scatteredRecent: string[];
  const DAY_AGO = new Date(Date.now() - 86_400_000).toISOString();
  const cursors = feedCursors(TEST_KEYRING);

  /** A connection row of its own tenant (no workflow: the test writes its records). */
  async function feedConnection(): Promise<string> {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('scan-' || gen_random_uuid(), 'demo', 'feed', 'paused') returning id`,
    );
    return rows[0]!.id;
  }

  /** Writes `count` changes of `type` named `prefix-1`… at the next feed positions, written now. */
  async function write(connectionId: string, type: string, prefix: string, count: number): Promise<void> {
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, synced_at)
       select $1, $2, $3 || '-' || n, jsonb_build_object('n', n), now() from generate_series(1, $4::int) n`,
      [connectionId, type, prefix, count],
    );
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    longHistory = await feedConnection();
    await write(longHistory, 'items', 'old', HISTORY);
    await db.pool.query(`update records set synced_at = now() - interval '2 days' where connection_id = $1`, [longHistory]);
    await write(longHistory, 'items', 'new', RECENT);

    scattered = await feedConnection();
    await write(scattered, 'items', 'r', HISTORY);
    // Every 3,001st change stays recent: some in every budget's stretch, none at its edges.
    const { rows } = await db.pool.query<{ external_id: string }>(
      `with ranked as (select external_id, change_seq, row_number() over (order by change_seq) as n from records where connection_id = $1)
       update records r set synced_at = now() - interval '2 days' from ranked k
        where r.connection_id = $1 and r.external_id = k.external_id and k.n % 3001 <> 0
       returning r.external_id`,
      [scattered],
    );
    expect(rows.length).toBe(HISTORY - Math.floor(HISTORY / 3001));
    scatteredRecent = (await db.pool.query<{ external_id: string }>(
      `select external_id from records where connection_id = $1 and synced_at > now() - interval '1 day' order by change_seq`,
      [scattered],
    )).rows.map((r) => r.external_id);
    await db.pool.query('analyze records');
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** The rows of `records` the statement `readChangesPage` runs for `query` touches, run under EXPLAIN ANALYZE. */
  async function rowsExamined(connectionId: string, query: Omit<ChangesRead, 'connectionId'>): Promise<number> {
    let plan: PlanNode | undefined;
    const explaining: Queryable = {
      async query(text: string, values?: unknown[]) {
        const { rows } = await db.pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`explain (analyze, format json) ${text}`, values);
        plan = rows[0]!['QUERY PLAN'][0].Plan;
        return { rows: [] } as unknown as QueryResult<never>;
      },
    };
    await readChangesPage(explaining, { connectionId, ...query });
    return recordRows(plan!);
  }

  async function get(path: string, overrides: Record<string, unknown> = {}): Promise<{ status: number; body: any }> {
    const app = apiAppWithoutTemporal(db.pool, 'records-feed-scan-budget', overrides);
    const res = await app.request(path, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    return { status: res.status, body: await res.json() };
  }

  /** Follows `next_cursor` while `has_more`; answers the ids read, the requests made and the last cursor. */
  async function follow(connectionId: string, query: string, cursor?: string) {
    const read: string[] = [];
    for (let requests = 1; requests <= 20; requests++) {
      const answer = await get(`/connections/${connectionId}/records?${query}${cursor ? `&cursor=${cursor}` : ''}`);
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      read.push(...answer.body.items.map((i: { external_id: string }) => i.external_id));
      cursor = answer.body.next_cursor as string;
      if (!answer.body.has_more) return { read, requests, cursor };
    }
    throw new Error('the feed never ended');
  }

  it('a first read of the changes since a recent time examines at most the budget of the history before it, of every type and of one', async () => {
    expect(FEED_SCAN_BUDGET).toBeLessThan(HISTORY / 2);
    const modifiedAfter = new Date(DAY_AGO);
    for (const query of [
      { afterSeq: '0', limit: 100, modifiedAfter },
      { afterSeq: '0', limit: 100, modifiedAfter, resourceType: 'items' },
    ]) {
      const rows = await rowsExamined(longHistory, query);
      expect.soft(rows, JSON.stringify(query)).toBeLessThanOrEqual(FEED_SCAN_BUDGET + 10);
    }
  });

  it('a reader following next_cursor while has_more reaches the changes written after modified_after, each once, in order', async () => {
    const expected = Array.from({ length: RECENT }, (_, n) => `new-${n + 1}`);
    for (const query of [`modified_after=${DAY_AGO}&limit=100`, `modified_after=${DAY_AGO}&limit=7&resource_type=items`]) {
      const { read, requests } = await follow(longHistory, query);
      expect(read, query).toEqual(expected);
      // The history passes in budget-long stretches; then the recent changes, a page at a time.
      expect(requests, query).toBeLessThanOrEqual(Math.ceil(HISTORY / FEED_SCAN_BUDGET) + Math.ceil(RECENT / 7) + 1);
    }
    for (const query of [`modified_after=${DAY_AGO}&limit=100`, `modified_after=${DAY_AGO}&limit=2`]) {
      const { read } = await follow(scattered, query);
      expect(read, query).toEqual(scatteredRecent);
    }
  });

  it('an empty page that ran out of its budget says has_more and moves its cursor past what it examined', async () => {
    const first = await get(`/connections/${longHistory}/records?modified_after=${DAY_AGO}`);
    expect(first.status).toBe(200);
    expect(first.body.items).toEqual([]);
    expect(first.body.has_more).toBe(true);
    const position = cursors.decode(first.body.next_cursor);
    const { rows } = await db.pool.query<{ seq: string }>(
      `select change_seq::text as seq from records where connection_id = $1 order by change_seq offset $2 limit 1`,
      [longHistory, FEED_SCAN_BUDGET - 1],
    );
    expect(position?.seq).toBe(rows[0]!.seq);
  });

  it('a read without modified_after is as before: its page, and its cursor at the last change it holds', async () => {
    const page = await get(`/connections/${longHistory}/records?limit=5`);
    expect(page.body.items.map((i: { external_id: string }) => i.external_id)).toEqual(['old-1', 'old-2', 'old-3', 'old-4', 'old-5']);
    expect(page.body.has_more).toBe(true);
    const { rows } = await db.pool.query<{ seq: string }>(
      `select change_seq::text as seq from records where connection_id = $1 and external_id = 'old-5'`,
      [longHistory],
    );
    expect(cursors.decode(page.body.next_cursor)).toEqual({ seq: rows[0]!.seq, epoch: '0', connection: longHistory.toLowerCase() });
  });

  it('a cursor issued under modified_after is refused (400) with an earlier one; the same time, a later one, none (its own goes on), or a cursor issued before cursors carried it, reads on', async () => {
    const first = await get(`/connections/${longHistory}/records?modified_after=${DAY_AGO}`);
    const cursor = first.body.next_cursor as string;
    const earlier = new Date(Date.parse(DAY_AGO) - 1).toISOString();
    for (const query of [`&modified_after=${earlier}`, '&modified_after=2000-01-01T00:00:00Z']) {
      const answer = await get(`/connections/${longHistory}/records?cursor=${cursor}${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.body.error.message, query).toMatch(/modified_after/);
    }
    const later = new Date(Date.parse(DAY_AGO) + 1).toISOString();
    // The same time spelled otherwise is the same time.
    const sameOtherwise = DAY_AGO.replace('Z', '+00:00').replace('+', '%2B');
    for (const query of [`&modified_after=${DAY_AGO}`, `&modified_after=${sameOtherwise}`, `&modified_after=${later}`]) {
      const answer = await get(`/connections/${longHistory}/records?cursor=${cursor}${query}`);
      expect(answer.status, `${query}: ${JSON.stringify(answer.body)}`).toBe(200);
    }
    // Read without modified_after, the cursor goes on under its own: a reader that gave the time on
    // its first read only reads the changes written after it, and none of those written before.
    const { read: onward } = await follow(longHistory, '', cursor);
    expect(onward).toEqual(Array.from({ length: RECENT }, (_, n) => `new-${n + 1}`));
    // A cursor of every change, as issued before cursors carried modified_after, serves a filtered read.
    const plain = cursors.encode({ seq: '0', epoch: '0', connection: longHistory.toLowerCase() });
    const { read } = await follow(longHistory, `modified_after=${DAY_AGO}`, plain);
    expect(read).toEqual(Array.from({ length: RECENT }, (_, n) => `new-${n + 1}`));
  });

  it('the byte budget still cuts a filtered page, after the changes the filter left out; the next page goes on after the last change held', async () => {
    const id = await feedConnection();
    await write(id, 'items', 'old', 50);
    await db.pool.query(`update records set synced_at = now() - interval '2 days' where connection_id = $1`, [id]);
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, synced_at)
       select $1, 'items', 'big-' || n, jsonb_build_object('blob', repeat('x', 300 * 1024)), now() from generate_series(1, 3) n`,
      [id],
    );
    const budget = { feedPageMaxBytes: 700 * 1024 };
    const first = await get(`/connections/${id}/records?modified_after=${DAY_AGO}`, budget);
    expect(first.body.items.map((i: { external_id: string }) => i.external_id)).toEqual(['big-1', 'big-2']);
    expect(first.body.has_more).toBe(true);
    const second = await get(`/connections/${id}/records?modified_after=${DAY_AGO}&cursor=${first.body.next_cursor}`, budget);
    expect(second.body.items.map((i: { external_id: string }) => i.external_id)).toEqual(['big-3']);
    expect(second.body.has_more).toBe(false);
  });
});
