// The reconcile tick's batch statement (`lockReconcileBatch`) against real Postgres: what it says
// of each connection is a boolean for every row, never SQL's unknown, whatever the connection's
// history (a connection whose schedule was never changed has no `schedule_changed_at`).
import { describe, expect, it } from 'vitest';
import { lockReconcileBatch } from '../db/models/connections';
import { useTestDatabase } from './helpers/database';

const db = useTestDatabase();

describe('lockReconcileBatch', () => {
  it('flags an unheard re-plan with true or false, never null', async () => {
    const insert = async (appKey: string, status: string, changed: string | null, planned: string | null) => {
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status, schedule_changed_at, schedule_planned_at)
         values ('acme', 'demo', $1, $2, now() - $3::interval, now() - $4::interval) returning id`,
        [appKey, status, changed, planned],
      );
      const id = rows[0]!.id;
      await db.pool.query(`insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status) values ($1, 'acme', 'incremental', 'schedule', 'queued')`, [id]);
      return id;
    };
    const never = await insert('never-changed', 'active', null, '5 minutes');
    const unheard = await insert('unheard', 'active', '2 minutes', '3 minutes');
    const heard = await insert('heard', 'active', '3 minutes', '2 minutes');
    const paused = await insert('paused', 'paused', '2 minutes', '3 minutes');
    const client = await db.pool.connect();
    try {
      await client.query('begin');
      const rows = await lockReconcileBatch(client, '00000000-0000-0000-0000-000000000000', 100, new Date(Date.now() - 60_000));
      await client.query('rollback');
      const flags = new Map(rows.map((row) => [row.id, row.replan_unheard]));
      expect([never, unheard, heard, paused].map((id) => flags.get(id))).toEqual([false, true, false, false]);
    } finally {
      client.release();
    }
  });
});
