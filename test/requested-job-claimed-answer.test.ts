// A sync request that finds the connection's requested job of its mode queued, which its workflow
// claims while the request looks (after the insert found it queued, before the request widened
// its resource types), is not answered with that job: running, it no longer takes the types the
// request asks for. The request gets a job queued behind it, syncing those types. Real Postgres;
// Temporal is the fake client.
import { describe, expect, it } from 'vitest';
import { requestJob } from '../commands/jobs';
import { findConnection } from '../db/models/connections';
import { useTestDatabase } from './helpers/database';
import { poolWithHook } from './helpers/pool-hooks';
import { testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();

describe('a sync request finding a queued requested job its workflow claims meanwhile', () => {
  it('gets a job queued behind it, which syncs the types asked for', async () => {
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
    expect(second.job.id).not.toBe(first.job.id);
    expect(second).toMatchObject({ created: true, resourceTypes: ['issues'], job: { status: 'queued' } });
    const { rows: stored } = await db.pool.query<{ status: string; payload: { resource_types?: string[] } }>('select status, payload from sync_jobs where id = $1', [first.job.id]);
    expect(stored[0]).toEqual({ status: 'running', payload: { resource_types: ['users'] } });
  });
});
