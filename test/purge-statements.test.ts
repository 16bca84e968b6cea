// The statements a connection's purge runs, counted against a real Postgres: each table's rows go
// in as few statements as they take, with no query asking what is left.
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActivityDeps } from '../activities/deps';
import { purgeConnectionBatch } from '../activities/purge-connection';
import { insertPurge } from '../db/models/purges';
import { countingPool, createTestDatabase, type TestDatabase } from './helpers/database';

describe("a connection purge's statements", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('a connection with a few rows in each table is purged with one delete per table and no query of what is left', async () => {
    const tenant = `purge-statements-${randomUUID()}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'few', 'disabled') returning id`,
      [tenant],
    );
    const connectionId = rows[0]!.id;
    await db.pool.query(`insert into records (connection_id, resource_type, external_id, data) select $1, 'issues', g::text, '{}' from generate_series(1, 3) g`, [connectionId]);
    const { rows: tasks } = await db.pool.query<{ id: string }>(
      `with j as (insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status) values ($1, $2, 'full', 'manual', 'completed') returning id)
       insert into sync_tasks (job_id, resource_type, status) select id, 'issues', 'completed' from j returning id`,
      [connectionId, tenant],
    );
    await db.pool.query(`insert into sync_seen (task_id, external_id) select $1, g::text from generate_series(1, 3) g`, [tasks[0]!.id]);
    await db.pool.query(
      `insert into webhook_events (tenant_id, connection_id, event_type, payload) select $1, $2, 'sync.completed', '{}' from generate_series(1, 3)`,
      [tenant, connectionId],
    );
    const purge = (await insertPurge(db.pool, connectionId, tenant))!;
    const counting = countingPool(db.pool);
    const outcome = await new MockActivityEnvironment({ attempt: 1 }).run(purgeConnectionBatch({ pool: counting.pool } as ActivityDeps), { purgeId: purge.id, connectionId });
    const count = (pattern: RegExp) => counting.statements.filter((s) => pattern.test(s)).length;
    expect({
      outcome,
      deletes: {
        records: count(/delete from records\b/),
        seen: count(/delete from sync_seen\b/),
        jobs: count(/delete from sync_jobs\b/),
        events: count(/delete from webhook_events\b/),
      },
      exists: count(/\bexists \(select 1 from (records|sync_seen|sync_jobs|webhook_events)\b/),
    }).toEqual({
      // 3 records, 3 seen rows, 1 job, 3 events and the connection row.
      outcome: { deleted: 11, done: true },
      deletes: { records: 1, seen: 1, jobs: 1, events: 1 },
      exists: 0,
    });
  });
});
