// What one poll of the change feed reads of `records`, against a real Postgres: a reader of one
// resource type reads that type's changes after its cursor, never the connection's other types'
// changes in between. A reader of a quiet type of a busy connection polls at a cursor that never
// moves while the type is quiet, so anything it walked past would be walked again on every poll.
// Measured as the rows the statement's scans of `records` touch (EXPLAIN ANALYZE), not as time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueryResult } from 'pg';
import { readChangesPage, type ChangesRead } from '../db/models/records';
import type { Queryable } from '../db/queryable';
import { createTestDatabase, type TestDatabase } from './helpers/database';

/**
 * The connection's changes in feed order: `c`, the type of most of its changes, quiet since; a few
 * of the rare type `b`; then `a`, busy now.
 */
const HISTORY = 20_000;
const FEW = 10;
const BUSY = 10_000;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/** The scans of `records` in `plan`, each with the rows it touched over all its loops. */
function recordScans(plan: PlanNode): { node: string; index: string | undefined; rows: number }[] {
  const own = plan['Relation Name'] === 'records'
    ? [{
        node: plan['Node Type'],
        index: plan['Index Name'],
        // Per loop, averaged: times the loops, the rows the scan returned and those it read and dropped.
        rows: Math.round((plan['Actual Rows'] + (plan['Rows Removed by Filter'] ?? 0) + (plan['Rows Removed by Index Recheck'] ?? 0)) * plan['Actual Loops']),
      }]
    : [];
  return [...own, ...(plan.Plans ?? []).flatMap(recordScans)];
}

describe('records feed: a reader of a quiet type of a busy connection', () => {
  let db: TestDatabase;
  let connectionId: string;
  /** The last change of `c`, of `b`, and the change of `a` halfway through its run. */
  let lastC: string;
  let lastB: string;
  let midBusy: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('quiet-' || gen_random_uuid(), 'demo', 'feed', 'paused') returning id`,
    );
    connectionId = rows[0]!.id;
    const write = async (type: string, count: number) => (await db.pool.query<{ last: string }>(
      `with written as (
         insert into records (connection_id, resource_type, external_id, data, synced_at)
         select $1, $2, $2 || '-' || n, jsonb_build_object('n', n), now() from generate_series(1, $3::int) n
         returning change_seq)
       select max(change_seq)::text as last from written`,
      [connectionId, type, count],
    )).rows[0]!.last;
    lastC = await write('c', HISTORY);
    lastB = await write('b', FEW);
    const lastA = await write('a', BUSY);
    midBusy = (BigInt(lastA) - BigInt(BUSY / 2)).toString();
    // The statistics a running database has of a table this size (autovacuum's analyze).
    await db.pool.query('analyze records');
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** The scans of `records` of the statement `readChangesPage` runs for `query`, run under EXPLAIN ANALYZE. */
  async function scansOf(query: Omit<ChangesRead, 'connectionId'>) {
    let plan: PlanNode | undefined;
    const explaining: Queryable = {
      async query(text: string, values?: unknown[]) {
        const { rows } = await db.pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`explain (analyze, buffers, format json) ${text}`, values);
        plan = rows[0]!['QUERY PLAN'][0].Plan;
        return { rows: [] } as unknown as QueryResult<never>;
      },
    };
    await readChangesPage(explaining, { connectionId, ...query });
    const scans = recordScans(plan!);
    return { scans, rows: scans.reduce((sum, s) => sum + s.rows, 0) };
  }

  const DAY_AGO = new Date(Date.now() - 86_400_000);

  it('a poll past its type\'s last change reads none of the other types\' changes after it: a rare type, and the type of most changes', async () => {
    for (const query of [
      { afterSeq: lastB, limit: 100, resourceType: 'b' },
      { afterSeq: lastB, limit: 100, resourceType: 'b', modifiedAfter: DAY_AGO },
      { afterSeq: lastC, limit: 100, resourceType: 'c' },
      { afterSeq: lastC, limit: 100, resourceType: 'c', modifiedAfter: DAY_AGO },
    ]) {
      const poll = await scansOf(query);
      expect.soft(poll.rows, `${JSON.stringify(query)}: ${JSON.stringify(poll.scans)}`).toBeLessThan(100);
    }
  });

  it('a full page, of one type or of every type, reads about the page and one change more (whether more follow), wherever it starts', async () => {
    for (const query of [
      { afterSeq: '0', limit: 50 },
      { afterSeq: midBusy, limit: 50 },
      { afterSeq: midBusy, limit: 50, modifiedAfter: DAY_AGO },
      { afterSeq: '0', limit: 50, resourceType: 'c' },
      { afterSeq: '0', limit: 50, resourceType: 'a' },
      { afterSeq: midBusy, limit: 50, resourceType: 'a' },
      { afterSeq: midBusy, limit: 50, resourceType: 'a', modifiedAfter: DAY_AGO },
    ]) {
      const page = await scansOf(query);
      expect.soft(page.rows, `${JSON.stringify(query)}: ${JSON.stringify(page.scans)}`).toBeLessThan(100);
    }
  });
});
