// A sync requested while a job of the same type is active is answered with that job, which then
// runs the request. When that job finishes between the moment the request finds it blocking its
// insert and the moment it reads it, the request must not be answered with the finished job (202
// with status `completed`: nothing would run what it asked for): the insert is tried again and the
// request gets a job of its own. The job's end is made to fall exactly there by a pool that ends
// it just after the insert it refused. Real Postgres; Temporal is the fake client.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requestJob } from '../commands/jobs';
import { findConnection } from '../db/models/connections';
import { syncJobWorkflowId } from '../temporal/ids';
import { useTestDatabase } from './helpers/database';
import { poolWithHook } from './helpers/pool-hooks';
import { testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();

describe('a sync requested while the active job of its type finishes', () => {
  it('gets a job of its own, not the finished job', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', 'race', '{"resource_types":["issues","users"]}') returning id`,
    );
    const connection = (await findConnection(db.pool, rows[0]!.id))!;
    const running = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id, started_at)
       values ($1, $2, 'acme', 'incremental', 'api', 'running', $3, now())`,
      [running, connection.id, syncJobWorkflowId(running)],
    );
    const pool = poolWithHook(db.pool, 'after', 'insert into sync_jobs', async () => {
      await db.pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [running]);
    });
    const temporal = fakeTemporal();
    const answer = await requestJob({ ...testCommandDeps(pool, temporal.client) }, { connection, mode: 'incremental' });

    expect({ status: answer.job.status, created: answer.created }).toEqual({ status: 'queued', created: true });
    expect(answer.job.id).not.toBe(running);
    expect(temporal.started).toEqual([syncJobWorkflowId(answer.job.id)]);
    const { rows: active } = await db.pool.query<{ n: number }>(
      `select count(*)::int as n from sync_jobs where connection_id = $1 and status = 'queued'`,
      [connection.id],
    );
    expect(active[0]!.n).toBe(1);
  });
});
