// A request repeated with the same Idempotency-Key answers the job the first one created (202, the
// same id, nothing inserted) whatever became of the connection since: a client that retries after
// a lost answer must learn that its backfill exists, not be told it was refused. Against the real
// API app and Postgres (the jobs answered here are finished, so no workflow is started).
import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { syncJobWorkflowId } from '../temporal/ids';
import { TEST_API_KEY, useApiWithoutTemporal } from './helpers/api';

describe('a repeated Idempotency-Key answers the earlier job (real API app, real Postgres)', () => {
  const api = useApiWithoutTemporal('idempotent-replay');
  const tenant = 'replay-tenant';
  const window = { start: '2025-01-01T00:00:00.000Z', end: '2025-01-02T00:00:00.000Z' };
  let connectionId: string;
  let jobId: string;

  beforeEach(async () => {
    const { rows } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', $2, 'active') returning id`,
      [tenant, `app-${randomUUID().slice(0, 8)}`],
    );
    connectionId = rows[0]!.id;
    // What an earlier POST /jobs/schedule with key `k-replay` wrote; the backfill has since ended.
    jobId = randomUUID();
    await api.db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, priority, scheduled_at, window_start, window_end,
                              payload, idempotency_key, workflow_id, finished_at)
       values ($1, $2, $3, 'incremental', 'backfill', 'failed', 0, now(), $4, $5, '{"reason":"replay"}', $6, $7, now())`,
      [jobId, connectionId, tenant, window.start, window.end, `k-${connectionId}`, syncJobWorkflowId(jobId)],
    );
  });

  async function repeat(): Promise<{ status: number; body: any }> {
    const res = await api.app.request('/jobs/schedule', {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json', 'idempotency-key': `k-${connectionId}` },
      body: JSON.stringify({ pairId: connectionId, window, payload: { reason: 'replay' } }),
    });
    return { status: res.status, body: await res.json() };
  }

  const jobCount = async () =>
    (await api.db.pool.query<{ n: number }>('select count(*)::int as n from sync_jobs where connection_id = $1', [connectionId])).rows[0]!.n;

  it('after the connection was paused', async () => {
    await api.db.pool.query(`update connections set status = 'paused' where id = $1`, [connectionId]);
    const answer = await repeat();
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    expect(answer.body).toMatchObject({ id: jobId, status: 'failed', trigger: 'backfill' });
    expect(await jobCount()).toBe(1);
  });

  it('after its circuit breaker opened (the backfill itself may have opened it)', async () => {
    await api.db.pool.query(
      `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, last_failure_at, paused_until)
       values ($1, 'demo', 5, now(), now() + interval '30 minutes')`,
      [connectionId],
    );
    const answer = await repeat();
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    expect(answer.body).toMatchObject({ id: jobId, status: 'failed' });
    expect(await jobCount()).toBe(1);
  });

  it("after the connection's config stopped selecting a resource type the backfill named", async () => {
    const key = `k-types-${connectionId}`;
    const typed = randomUUID();
    await api.db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, priority, scheduled_at, window_start, window_end,
                              payload, idempotency_key, workflow_id, finished_at)
       values ($1, $2, $3, 'incremental', 'backfill', 'completed', 0, now(), $4, $5, '{"resource_types":["users"]}', $6, $7, now())`,
      [typed, connectionId, tenant, window.start, window.end, key, syncJobWorkflowId(typed)],
    );
    await api.db.pool.query(`update connections set config = '{"resource_types":["issues"]}' where id = $1`, [connectionId]);
    const res = await api.app.request('/jobs/schedule', {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ pairId: connectionId, window, payload: { resource_types: ['users'] } }),
    });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(202);
    expect(body).toMatchObject({ id: typed, status: 'completed' });
    expect(await jobCount()).toBe(2);
  });

  it('refuses the key reused for a backfill of other resource types than its job backfills (fewer of them, or some where the job backfills every type), and answers the same types in any order', async () => {
    const backfill = async (key: string, payload: Record<string, unknown>) => {
      const id = randomUUID();
      await api.db.pool.query(
        `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, priority, scheduled_at, window_start, window_end,
                                payload, idempotency_key, workflow_id, finished_at)
         values ($1, $2, $3, 'incremental', 'backfill', 'completed', 0, now(), $4, $5, $6, $7, $8, now())`,
        [id, connectionId, tenant, window.start, window.end, JSON.stringify(payload), key, syncJobWorkflowId(id)],
      );
      return id;
    };
    const send = async (key: string, payload: Record<string, unknown>) => {
      const res = await api.app.request('/jobs/schedule', {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ pairId: connectionId, window, payload }),
      });
      const body = (await res.json()) as any;
      return { status: res.status, code: body.error?.code, id: body.id ?? body.error?.job_id };
    };
    const two = await backfill(`k-two-${connectionId}`, { resource_types: ['users', 'issues'] });
    const every = await backfill(`k-every-${connectionId}`, {});
    const before = await jobCount();
    expect(await send(`k-two-${connectionId}`, { resource_types: ['users'] })).toEqual({ status: 409, code: 'idempotency_key_reused', id: two });
    expect(await send(`k-every-${connectionId}`, { resource_types: ['users'] })).toEqual({ status: 409, code: 'idempotency_key_reused', id: every });
    expect(await send(`k-two-${connectionId}`, { resource_types: ['issues', 'users', 'users'] })).toEqual({ status: 202, code: undefined, id: two });
    expect(await send(`k-every-${connectionId}`, {})).toEqual({ status: 202, code: undefined, id: every });
    expect(await jobCount()).toBe(before);
  });

  it('still refuses the key reused for another request, and a new key on the paused connection', async () => {
    await api.db.pool.query(`update connections set status = 'paused' where id = $1`, [connectionId]);
    const other = await api.app.request('/jobs/schedule', {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json', 'idempotency-key': `k-${connectionId}` },
      body: JSON.stringify({ pairId: connectionId, window, payload: { reason: 'another' } }),
    });
    expect(other.status).toBe(409);
    expect(((await other.json()) as any).error.code).toBe('idempotency_key_reused');
    const fresh = await api.app.request('/jobs/schedule', {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json', 'idempotency-key': 'a-new-key' },
      body: JSON.stringify({ pairId: connectionId, window, payload: { reason: 'replay' } }),
    });
    expect(fresh.status).toBe(409);
    expect(((await fresh.json()) as any).error.code).toBe('connection_paused');
    expect(await jobCount()).toBe(1);
  });
});
