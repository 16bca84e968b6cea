// Per-tenant limits whose check races another request of the same tenant, through the real API
// app and Postgres (no Temporal: the requests are answered before any start, which the reconcile
// tick would retry): requests that queue behind the tenant's limit lock each see what the one
// before them wrote.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { createApp } from '../api/app';
import { lockTenant } from '../db/models/tenant-limits';
import { apiAppWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { eventually } from './helpers/worker';

describe('per-tenant limits under concurrent requests (real API app, real Postgres)', () => {
  let db: TestDatabase;
  let app: ReturnType<typeof createApp>;

  beforeAll(async () => {
    db = await createTestDatabase();
    app = apiAppWithoutTemporal(db.pool, 'tenant-limits-races', { webhookAllowPrivate: true });
  });
  afterAll(async () => {
    await db?.drop();
  });

  const q = <T = any>(sql: string, params: unknown[] = []) => db.pool.query(sql, params).then((r) => r.rows as T[]);
  const call = async (method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${TEST_API_KEY}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await app.request(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  /** Runs `during` while another transaction holds `tenant`'s limit lock, released once `waiters` wait for it. */
  async function withTenantLockHeld<T>(tenant: string, waiters: number, during: () => Promise<T>[]): Promise<T[]> {
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await lockTenant(holder, tenant);
      const pending = during();
      await eventually(async () => {
        const [row] = await q<{ n: number }>(`select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted and database = (select oid from pg_database where datname = current_database())`);
        return row!.n >= waiters ? true : undefined;
      }, { timeoutMs: 10_000 });
      await holder.query('commit');
      return await Promise.all(pending);
    } finally {
      holder.release();
    }
  }

  it('two redeliveries of one finished delivery at once: one is made and counted, the other is refused as pending (409), not counted', async () => {
    const tenant = 'race-redeliver';
    const hook = await call('POST', '/webhooks', { tenant_id: tenant, url: 'http://127.0.0.1:9/hook', event_types: ['sync.failed'] });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const [event] = await q<{ id: string }>(`insert into webhook_events (tenant_id, event_type, payload) values ($1, 'sync.failed', '{}') returning id`, [tenant]);
    const [delivery] = await q<{ id: string }>(
      `insert into webhook_deliveries (webhook_id, event_id, status, finished_at, workflow_started_at) values ($1, $2, 'failed', now(), now()) returning id`,
      [hook.body.id, event!.id],
    );
    const path = `/webhooks/${hook.body.id}/deliveries/${delivery!.id}/redeliver`;
    const answers = await withTenantLockHeld(tenant, 2, () => [call('POST', path), call('POST', path)]);
    expect(answers.map((a) => a.status).sort(), JSON.stringify(answers)).toEqual([202, 409]);
    expect(answers.find((a) => a.status === 409)!.body.error.code).toBe('delivery_pending');
    expect(await q(`select count(*)::int as n from webhook_redeliveries where tenant_id = $1`, [tenant])).toEqual([{ n: 1 }]);
    expect((await q(`select status from webhook_deliveries where id = $1`, [delivery!.id]))[0].status).toBe('pending');
  });
});
