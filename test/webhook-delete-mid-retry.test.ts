// A webhook deleted while one of its deliveries is being retried: the next attempt calls no one
// and ends the delivery's run ('dropped'). The delivery activity against a real Postgres and a
// receiver on 127.0.0.1; the webhook is deleted through its command.
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { deliverWebhook } from '../activities/webhook-deliveries';
import { deleteWebhook } from '../commands/webhooks';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { receiver as fakeReceiver, serve } from './helpers/fake-server';

describe('a webhook deleted mid-retry', () => {
  const db = useTestDatabase();
  const q = <T = any>(sql: string, params: unknown[] = []) => db.pool.query(sql, params).then((r) => r.rows as T[]);

  it('the attempt after the deletion calls no one and drops the delivery', async () => {
    const rx = await fakeReceiver(() => 500);
    try {
      const tenant = `t-${Math.random().toString(36).slice(2)}`;
      const [hook] = await q<{ id: string }>(`insert into webhooks (tenant_id, url, event_types, secret) values ($1, $2, '{connection.disabled}', 'whsec_x') returning id`, [tenant, rx.url]);
      const [event] = await q<{ id: string }>(`insert into webhook_events (tenant_id, event_type, payload) values ($1, 'connection.disabled', '{}') returning id`, [tenant]);
      const [delivery] = await q<{ id: string }>('insert into webhook_deliveries (webhook_id, event_id) values ($1, $2) returning id', [hook!.id, event!.id]);
      const { deps } = testActivityDeps({ pool: db.pool });
      const first = await new MockActivityEnvironment().run(deliverWebhook(deps), { deliveryId: delivery!.id }).catch((err: unknown) => err);
      expect(first).toBeInstanceOf(ApplicationFailure);
      expect(first).toMatchObject({ message: 'the receiver answered 500', type: 'WebhookNotDelivered', nonRetryable: false });
      expect(rx.received).toHaveLength(1);

      await deleteWebhook(testCommandDeps(db.pool, undefined as unknown as Client), hook!.id);
      expect(await new MockActivityEnvironment().run(deliverWebhook(deps), { deliveryId: delivery!.id })).toBe('dropped');
      expect(rx.received).toHaveLength(1);
      expect(await q('select id from webhook_deliveries where id = $1', [delivery!.id])).toEqual([]);
    } finally {
      await rx.close();
    }
  });

  it('a webhook deleted while an attempt is in flight: the attempt ends the run (dropped) whatever the receiver answered, rather than being retried', async () => {
    // The receiver holds its answer (500) until the webhook's deletion has committed.
    let hookId = '';
    const rx = await serve((req, res) => {
      req.resume();
      req.on('end', () => void deleteWebhook(testCommandDeps(db.pool, undefined as unknown as Client), hookId).then(() => res.writeHead(500).end()));
    });
    try {
      const tenant = `t-${Math.random().toString(36).slice(2)}`;
      const [hook] = await q<{ id: string }>(`insert into webhooks (tenant_id, url, event_types, secret) values ($1, $2, '{connection.disabled}', 'whsec_x') returning id`, [tenant, rx.url]);
      hookId = hook!.id;
      const [event] = await q<{ id: string }>(`insert into webhook_events (tenant_id, event_type, payload) values ($1, 'connection.disabled', '{}') returning id`, [tenant]);
      const [delivery] = await q<{ id: string }>('insert into webhook_deliveries (webhook_id, event_id) values ($1, $2) returning id', [hook!.id, event!.id]);
      const { deps } = testActivityDeps({ pool: db.pool });
      const outcome = await new MockActivityEnvironment().run(deliverWebhook(deps), { deliveryId: delivery!.id }).catch((err: Error) => `threw: ${err.message}`);
      expect(outcome).toBe('dropped');
      expect(rx.requests).toHaveLength(1);
      expect(await q('select id from webhook_deliveries where id = $1', [delivery!.id])).toEqual([]);
    } finally {
      await rx.close();
    }
  });
});
