// A sync requested while the connection's requested job of that mode is still queued (waiting to
// be claimed, e.g. while its tenant runs its limit of jobs) is answered with that job: the job then
// syncs what both requests asked for, so a request for other resource types is not answered 202
// with a job that never syncs them. A running job is never widened: a request of types it does not
// sync gets a job queued behind it. Real Postgres; Temporal is the fake client.
import { describe, expect, it } from 'vitest';
import { requestJob } from '../commands/jobs';
import { findConnection } from '../db/models/connections';
import { useTestDatabase } from './helpers/database';
import { testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();

async function connection(appKey: string) {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, '{"resource_types":["issues","users","labels"]}') returning id`,
    [appKey],
  );
  return (await findConnection(db.pool, rows[0]!.id))!;
}

describe('a sync requested while a queued requested job of its mode waits', () => {
  it('answers that job, which now syncs the types of both requests', async () => {
    const row = await connection('merge-types');
    const deps = testCommandDeps(db.pool, fakeTemporal().client);
    const first = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['users'] });
    const second = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['issues'] });
    expect(second.job.id).toBe(first.job.id);
    expect([...second.resourceTypes].sort()).toEqual(['issues', 'users']);
    const { rows } = await db.pool.query<{ payload: { resource_types?: string[] } }>('select payload from sync_jobs where id = $1', [first.job.id]);
    expect([...(rows[0]!.payload.resource_types ?? [])].sort()).toEqual(['issues', 'users']);
  });

  it('answers that job, which now syncs every type, when the later request names none', async () => {
    const row = await connection('merge-all');
    const deps = testCommandDeps(db.pool, fakeTemporal().client);
    const first = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['users'] });
    const second = await requestJob(deps, { connection: row, mode: 'incremental' });
    expect(second.job.id).toBe(first.job.id);
    expect(second.resourceTypes).toEqual(['issues', 'users', 'labels']);
    const { rows } = await db.pool.query<{ payload: Record<string, unknown> }>('select payload from sync_jobs where id = $1', [first.job.id]);
    expect(rows[0]!.payload).not.toHaveProperty('resource_types');
  });

  it('still answers a repeat of the first request, with its Idempotency-Key, once a later request widened its job', async () => {
    const row = await connection('merge-key');
    const deps = testCommandDeps(db.pool, fakeTemporal().client);
    const first = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['users'], idempotencyKey: 'merge-key-1' });
    await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['issues'] });
    const repeat = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['users'], idempotencyKey: 'merge-key-1' }).catch((e: Error) => e);
    expect(repeat instanceof Error ? repeat.message : repeat.job.id).toBe(first.job.id);
    await requestJob(deps, { connection: row, mode: 'incremental' });
    const again = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['users'], idempotencyKey: 'merge-key-1' }).catch((e: Error) => e);
    expect(again instanceof Error ? again.message : again.job.id).toBe(first.job.id);
    // A request of types the job does not sync is still another request.
    const other = await requestJob(deps, { connection: row, mode: 'full', resourceTypes: ['users'], idempotencyKey: 'merge-key-1' }).catch((e: Error) => e);
    expect(other instanceof Error ? other.message : other.job.id).toMatch(/Idempotency-Key was already used/);
  });

  it('leaves a job that is already running as it is: a request of types it does not sync gets a job queued behind it, one of types it syncs is answered with it', async () => {
    const row = await connection('merge-running');
    const deps = testCommandDeps(db.pool, fakeTemporal().client);
    const first = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['users'] });
    await db.pool.query(`update sync_jobs set status = 'running', started_at = now() where id = $1`, [first.job.id]);
    const second = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['issues'] });
    expect(second).toMatchObject({ created: true, resourceTypes: ['issues'], job: { status: 'queued' } });
    expect(second.job.id).not.toBe(first.job.id);
    const covered = await requestJob(deps, { connection: row, mode: 'incremental', resourceTypes: ['users'] });
    expect({ id: covered.job.id, created: covered.created, resourceTypes: covered.resourceTypes }).toEqual({ id: first.job.id, created: false, resourceTypes: ['users'] });
    const { rows } = await db.pool.query<{ payload: { resource_types?: string[] } }>('select payload from sync_jobs where id = $1', [first.job.id]);
    expect(rows[0]!.payload.resource_types).toEqual(['users']);
  });
});
