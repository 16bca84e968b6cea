// A webhook disabled by its receiver's 410 Gone, as the API shows it, and enabled again by its
// tenant (`PATCH /webhooks/{id}` with `enabled: true`): the real API on 127.0.0.1 and Postgres, the
// delivery activity POSTing to a real receiver on 127.0.0.1 (no Temporal: the activity is run by
// hand, as the delivery workflow would run it).
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliverWebhook, failWebhookDelivery } from '../activities/webhook-deliveries';
import { listen, type HttpServer } from '../lib/http';
import { apiAppWithoutTemporal, callApi, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { receiver as fakeReceiver, type FakeReceiver } from './helpers/fake-server';

describe('a disabled webhook through the API', () => {
  const db = useTestDatabase();
  let api: HttpServer;
  let rx: FakeReceiver;
  let tenantKey: string;

  beforeAll(async () => {
    api = await listen(apiAppWithoutTemporal(db.pool, 'webhook-disabled-api', { webhookAllowPrivate: true }), '127.0.0.1', 0);
    // 410 to the receiver's first request, 200 to any later one.
    rx = await fakeReceiver((_request, before) => (before.length === 0 ? 410 : 200));
    const key = await callApi(api.url, TEST_API_KEY, 'POST', '/tenants/acme/api-keys', {});
    expect(key.status, key.text).toBe(201);
    tenantKey = key.body.secret;
  });
  afterAll(async () => {
    await api?.close();
    await rx?.close();
  });

  const call = (method: string, path: string, body?: unknown) => callApi(api.url, tenantKey, method, path, body);
  const q = <T = any>(sql: string, params: unknown[] = []) => db.pool.query(sql, params).then((r) => r.rows as T[]);

  /** Runs one delivery attempt as the workflow would: its outcome, or the failed delivery marked failed. */
  async function attempt(deliveryId: string): Promise<string> {
    const { deps } = testActivityDeps({ pool: db.pool });
    try {
      return await new MockActivityEnvironment().run(deliverWebhook(deps), { deliveryId });
    } catch (err) {
      await new MockActivityEnvironment().run(failWebhookDelivery(deps), { deliveryId, at: Date.now() });
      return `failed: ${(err as Error).message}`;
    }
  }

  it('shows disabled_at and disabled_reason after a 410 (null before), refuses a redelivery while disabled, and a tenant enables it again: both cleared, then a failed delivery is redelivered', async () => {
    const created = await call('POST', '/webhooks', { tenant_id: 'acme', url: rx.url, event_types: ['connection.disabled'] });
    expect(created.status, created.text).toBe(201);
    const id: string = created.body.id;
    expect(created.body).toMatchObject({ disabled_at: null, disabled_reason: null });

    const [event] = await q<{ id: string }>(`insert into webhook_events (tenant_id, event_type, payload) values ('acme', 'connection.disabled', '{"connection_id": "c"}') returning id`);
    const [delivery] = await q<{ id: string }>('insert into webhook_deliveries (webhook_id, event_id) values ($1, $2) returning id', [id, event!.id]);
    expect(await attempt(delivery!.id)).toMatch(/^failed: .*410 Gone/);
    expect(rx.received.map((r) => r.answered)).toEqual([410]);

    // One webhook and the list both show it disabled, saying why and when.
    const shown = await call('GET', `/webhooks/${id}`);
    expect(shown.status, shown.text).toBe(200);
    expect(shown.body.disabled_at).toEqual(expect.any(String));
    expect(shown.body.disabled_reason).toBe(`the receiver answered 410 Gone at ${shown.body.disabled_at}`);
    const listed = await call('GET', '/webhooks');
    expect(listed.body.items).toEqual([shown.body]);

    // Redelivering its failed delivery now would end it unsent: refused until it is enabled.
    const early = await call('POST', `/webhooks/${id}/deliveries/${delivery!.id}/redeliver`);
    expect([early.status, early.body.error?.code]).toEqual([409, 'webhook_disabled']);

    // Not a boolean, or another key: refused.
    for (const body of [{ enabled: 'yes' }, { enabled: true, url: 'https://example.com' }, {}]) {
      expect((await call('PATCH', `/webhooks/${id}`, body)).status, JSON.stringify(body)).toBe(400);
    }
    expect((await call('PATCH', '/webhooks/00000000-0000-4000-8000-000000000000', { enabled: true })).status).toBe(404);

    const enabled = await call('PATCH', `/webhooks/${id}`, { enabled: true });
    expect(enabled.status, enabled.text).toBe(200);
    expect(enabled.body).toEqual({ ...shown.body, disabled_at: null, disabled_reason: null });
    expect((await call('GET', `/webhooks/${id}`)).body).toEqual(enabled.body);

    // The failed delivery is redelivered, and sent.
    const again = await call('POST', `/webhooks/${id}/deliveries/${delivery!.id}/redeliver`);
    expect(again.status, again.text).toBe(202);
    expect(await attempt(delivery!.id)).toBe('delivered');
    expect(rx.received.map((r) => r.answered)).toEqual([410, 200]);

    // Disabled through the API, it says so; enabled again, cleared.
    const off = await call('PATCH', `/webhooks/${id}`, { enabled: false });
    expect(off.status, off.text).toBe(200);
    expect(off.body.disabled_reason).toBe(`disabled through the API at ${off.body.disabled_at}`);
    // Disabled again, it keeps when and why it was first disabled; an unknown id is still 404.
    const offAgain = await call('PATCH', `/webhooks/${id}`, { enabled: false });
    expect([offAgain.status, offAgain.body]).toEqual([200, off.body]);
    expect((await call('PATCH', '/webhooks/00000000-0000-4000-8000-000000000000', { enabled: false })).status).toBe(404);
    expect((await call('PATCH', `/webhooks/${id}`, { enabled: true })).body).toMatchObject({ disabled_at: null, disabled_reason: null });
  });
});
