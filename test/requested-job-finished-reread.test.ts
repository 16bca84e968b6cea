// A sync request that finds a queued job of its type not syncing every type it asks for widens
// that job, and reads it again to answer with it as stored. When the job ends (here: is cancelled)
// between the statement that widened it and that second read, the ended job answers no request
// (nothing of it would run what was asked, and the 202 answer's status is an active one): the
// request gets a job of its own. The job's end is made to fall exactly there by a pool that ends
// it just after the statement that widens it. Real Postgres; Temporal is the fake client.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { presentAccepted } from '../api/present';
import { SyncAcceptedSchema } from '../api/schemas/sync';
import { requestJob } from '../commands/jobs';
import { findConnection } from '../db/models/connections';
import { syncJobWorkflowId } from '../temporal/ids';
import { useTestDatabase } from './helpers/database';
import { poolWithHook } from './helpers/pool-hooks';
import { testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();

describe('a sync request whose active job finishes before it is read again', () => {
  it('gets a job of its own, answered with an active status', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', 'reread', '{"resource_types":["issues","users"]}') returning id`,
    );
    const connection = (await findConnection(db.pool, rows[0]!.id))!;
    const queued = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id, payload)
       values ($1, $2, 'acme', 'incremental', 'api', 'queued', $3, '{"resource_types":["issues"]}')`,
      [queued, connection.id, syncJobWorkflowId(queued)],
    );
    let widened = false;
    const pool = poolWithHook(db.pool, 'after', /^update sync_jobs j\s+set payload/, async () => {
      widened = true;
      await db.pool.query(`update sync_jobs set status = 'cancelled', finished_at = now() where id = $1`, [queued]);
    });
    const temporal = fakeTemporal();
    // Every type: more than the queued job syncs.
    const answer = await requestJob({ ...testCommandDeps(pool, temporal.client) }, { connection, mode: 'incremental' });

    expect({ status: answer.job.status, created: answer.created }).toEqual({ status: 'queued', created: true });
    expect(widened).toBe(true);
    expect(answer.job.id).not.toBe(queued);
    expect(answer.resourceTypes).toEqual(['issues', 'users']);
    expect(SyncAcceptedSchema.safeParse(presentAccepted(answer.job, answer.resourceTypes)).success).toBe(true);
    expect(temporal.started).toEqual([syncJobWorkflowId(answer.job.id)]);
  });
});
