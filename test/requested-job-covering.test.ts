// Which running job answers a sync request of its mode, rather than a job queued behind it: one
// that syncs every resource type the request asks for. A job naming no types syncs every type; a
// request naming none asks for every type, which only a job naming none syncs (even one naming each
// of the connection's types does not). The
// insert that the running job refuses and the read that answers with it apply the rule alike, so
// each case is answered (never the error of an insert neither inserting nor finding its answer).
// Real Postgres; Temporal is the fake client.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requestJob } from '../commands/jobs';
import { findConnection } from '../db/models/connections';
import { syncJobWorkflowId } from '../temporal/ids';
import { useTestDatabase } from './helpers/database';
import { testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();

/** [the running job's types (none: every type), the request's types (none: every type), whether the running job answers]. */
const CASES: [string[] | undefined, string[] | undefined, boolean][] = [
  [undefined, undefined, true],
  [undefined, ['issues'], true],
  [['issues'], undefined, false],
  [['issues'], ['issues'], true],
  [['issues'], ['users'], false],
  [['issues'], ['issues', 'users'], false],
  [['issues', 'users'], ['users'], true],
  [['users', 'issues'], ['issues', 'users'], true],
  [['issues', 'users'], undefined, false],
  [['issues', 'users'], [], true],
];

describe('a sync requested while a job of its mode runs', () => {
  it.each(CASES)('running job of types %j, request of types %j: answered by the running job: %s', async (running, asked, answers) => {
    const appKey = `covering-${randomUUID().slice(0, 8)}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, '{"resource_types":["issues","users"]}') returning id`,
      [appKey],
    );
    const connection = (await findConnection(db.pool, rows[0]!.id))!;
    const runningId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id, payload, started_at)
       values ($1, $2, 'acme', 'incremental', 'api', 'running', $3, $4, now())`,
      [runningId, connection.id, syncJobWorkflowId(runningId), running ? { resource_types: running } : {}],
    );

    const answer = await requestJob(testCommandDeps(db.pool, fakeTemporal().client), { connection, mode: 'incremental', ...(asked && { resourceTypes: asked }) });

    expect({ answeredByRunning: answer.job.id === runningId, created: answer.created, status: answer.job.status })
      .toEqual(answers ? { answeredByRunning: true, created: false, status: 'running' } : { answeredByRunning: false, created: true, status: 'queued' });
  });
});
