// A sync request answered with the connection's requested job of its mode, which its workflow
// claims while the request looks (after the insert found it queued, before the request widened
// its resource types), is answered with that job as stored then: `running`, never the `queued`
// the request read first. Real Postgres; Temporal is the fake client.
import { describe, expect, it } from 'vitest';
import { requestJob } from '../commands/jobs';
import { findConnection } from '../db/models/connections';
import { useTestDatabase } from './helpers/database';
import { poolWithHook } from './helpers/pool-hooks';
import { testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();

describe('a sync request answered with a queued requested job its workflow claims meanwhile', () => {
  it('answers the job running, as stored', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', 'claimed', '{"resource_types":["issues","users"]}') returning id`,
    );
    const row = (await findConnection(db.pool, rows[0]!.id))!;
    const temporal = fakeTemporal();
    const first = await requestJob(testCommandDeps(db.pool, temporal.client), { connection: row, mode: 'incremental', resourceTypes: ['users'] });
    expect(first.job.status).toBe('queued');
    // Its workflow claims it just before the second request widens its types.
    const claim = () => db.pool.query(`update sync_jobs set status = 'running', started_at = now() where id = $1`, [first.job.id]);
    const deps = testCommandDeps(poolWithHook(db.pool, 'before', "set payload = case", claim), temporal.client);
    const second = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['issues'] });
    expect(second.job.id).toBe(first.job.id);
    const { rows: stored } = await db.pool.query<{ status: string }>('select status from sync_jobs where id = $1', [first.job.id]);
    expect(stored[0]!.status).toBe('running');
    expect(second.job.status).toBe('running');
    expect(second.resourceTypes).toEqual(['users']);
  });
});
