// The one-statement insert of a requested job (POST /sync, backfills) and the one-statement reads
// of what refuses a sync (alone, and with the connection an app key names), against a real,
// freshly migrated Postgres database: what each writes and answers, and that the insert waits for
// a transaction writing its connection's row (a purge's disable) and then writes nothing.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { findConnectionByAppKey, findSyncBlockers, findSyncTargetByAppKey } from '../db/models/connections';
import { findJob, insertRequestedJob, type NewJob } from '../db/models/jobs';
import { syncJobWorkflowId } from '../temporal/ids';
import { useTestDatabase } from './helpers/database';
import { eventually } from './helpers/worker';

const db = useTestDatabase();

async function connection(appKey: string, status = 'active'): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, status, config) values ('acme', 'demo', $1, $2, '{}') returning id`,
    [appKey, status],
  );
  return rows[0]!.id;
}

function apiJob(connectionId: string, more: Partial<NewJob> = {}): NewJob {
  const id = randomUUID();
  return { id, workflowId: syncJobWorkflowId(id), connectionId, tenantId: 'acme', jobType: 'incremental', trigger: 'api', scheduledAt: null, payload: { resource_types: ['a'] }, ...more };
}

describe('insertRequestedJob', () => {
  it('inserts a queued job of an active connection and answers it as findJob reads it', async () => {
    const id = await connection('plain');
    const job = apiJob(id, { idempotencyKey: 'k-1' });
    const answered = await insertRequestedJob(db.pool, job);
    expect(answered).not.toBeNull();
    expect(answered).toEqual(await findJob(db.pool, job.id));
    expect(answered).toMatchObject({
      id: job.id, connection_id: id, tenant_id: 'acme', provider_slug: 'demo', job_type: 'incremental', trigger: 'api', status: 'queued',
      payload: { resource_types: ['a'] }, idempotency_key: 'k-1', workflow_id: syncJobWorkflowId(job.id),
      counts: { added: 0, updated: 0, deleted: 0, unchanged: 0 },
    });
  });

  it('writes nothing while an active job of the same type exists (the unique index), nor for a paused or disabled connection', async () => {
    const id = await connection('busy');
    expect(await insertRequestedJob(db.pool, apiJob(id))).not.toBeNull();
    expect(await insertRequestedJob(db.pool, apiJob(id))).toBeNull();
    for (const status of ['paused', 'disabled']) {
      const other = await connection(`is-${status}`, status);
      expect(await insertRequestedJob(db.pool, apiJob(other))).toBeNull();
      expect(await findSyncBlockers(db.pool, other, new Date())).toEqual({ status, purge_id: null, paused_until: null });
    }
    const { rows } = await db.pool.query<{ n: number }>('select count(*)::int as n from sync_jobs where connection_id = $1', [id]);
    expect(rows[0]!.n).toBe(1);
  });

  it('writes nothing for a connection with an open purge; findSyncBlockers names the purge and a breaker pause in force', async () => {
    const id = await connection('purged');
    const { rows } = await db.pool.query<{ id: string }>(`insert into connection_purges (connection_id, tenant_id) values ($1, 'acme') returning id`, [id]);
    const until = new Date(Date.now() + 3_600_000);
    await db.pool.query(`insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, paused_until) values ($1, 'demo', 5, $2)`, [id, until]);
    expect(await insertRequestedJob(db.pool, apiJob(id))).toBeNull();
    expect(await findSyncBlockers(db.pool, id, new Date())).toEqual({ status: 'active', purge_id: rows[0]!.id, paused_until: until });
    // Read with the connection, in one statement, the same.
    expect(await findSyncTargetByAppKey(db.pool, 'purged', 'acme', new Date())).toEqual({
      connection: await findConnectionByAppKey(db.pool, 'purged', 'acme'),
      blockers: { status: 'active', purge_id: rows[0]!.id, paused_until: until },
    });
    expect(await findSyncTargetByAppKey(db.pool, 'purged', 'other-tenant', new Date())).toBeNull();
    // A pause that has ended is no blocker.
    expect((await findSyncBlockers(db.pool, id, new Date(until.getTime() + 1))).paused_until).toBeNull();
    expect(await findSyncBlockers(db.pool, randomUUID(), new Date())).toEqual({ status: null, purge_id: null, paused_until: null });
  });

  it('waits for a transaction writing the connection disabled (as a purge does) and then writes nothing', async () => {
    const id = await connection('racing');
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query(`update connections set status = 'disabled' where id = $1`, [id]);
      const { rows } = await holder.query<{ pid: number }>('select pg_backend_pid() as pid');
      const inserting = insertRequestedJob(db.pool, apiJob(id));
      // The insert reached the row and waits for the holder.
      await eventually(async () => {
        const { rows: blocked } = await db.pool.query('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [rows[0]!.pid]);
        return blocked.length > 0 ? true : undefined;
      });
      await holder.query('commit');
      expect(await inserting).toBeNull();
    } finally {
      holder.release();
    }
    const { rows } = await db.pool.query('select 1 from sync_jobs where connection_id = $1', [id]);
    expect(rows).toEqual([]);
  });
});
