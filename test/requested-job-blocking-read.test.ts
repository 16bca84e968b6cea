// A sync request whose insert an active job of its type refuses reads the jobs that block it, as
// the API shows them, in one statement: the number of statements a request makes does not grow
// with the number of active jobs it finds (a running one that does not sync the types asked for,
// then the queued one that answers). Real Postgres, statements counted; Temporal is the fake client.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requestJob } from '../commands/jobs';
import { findConnection, type ConnectionRow } from '../db/models/connections';
import { syncJobWorkflowId } from '../temporal/ids';
import { countingPool, useTestDatabase } from './helpers/database';
import { testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();

async function connection(name: string): Promise<ConnectionRow> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, '{"resource_types":["issues","users"]}') returning id`,
    [name],
  );
  return (await findConnection(db.pool, rows[0]!.id))!;
}

async function apiJob(connectionId: string, status: 'queued' | 'running', payload: Record<string, unknown>): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id, payload, started_at)
     values ($1, $2, 'acme', 'incremental', 'api', $3, $4, $5, case when $3 = 'running' then now() end)`,
    [id, connectionId, status, syncJobWorkflowId(id), payload],
  );
  return id;
}

/** The statements of a request for `users` of `connection`, and the job that answered it. */
async function request(connection: ConnectionRow) {
  const counted = countingPool(db.pool);
  const answer = await requestJob(testCommandDeps(counted.pool, fakeTemporal().client), { connection, mode: 'incremental', resourceTypes: ['users'] });
  return { statements: counted.statements.length, job: answer.job.id, created: answer.created };
}

describe('a sync request refused by active jobs of its type', () => {
  it('reads them in one statement, however many there are', async () => {
    const alone = await connection('queued-alone');
    const queuedAlone = await apiJob(alone.id, 'queued', {});
    const behind = await connection('queued-behind-running');
    await apiJob(behind.id, 'running', { resource_types: ['issues'] });
    const queuedBehind = await apiJob(behind.id, 'queued', {});

    const one = await request(alone);
    const two = await request(behind);

    expect([one.job, one.created, two.job, two.created]).toEqual([queuedAlone, false, queuedBehind, false]);
    expect(two.statements).toBe(one.statements);
  });
});
