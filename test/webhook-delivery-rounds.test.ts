// The delivery schedule of real attempts, whatever was deferred: a delivery is given up 25 hours
// after its round's first real attempt (turns deferred for want of a place do not count), its
// retries back off 10 s, 20 s, 40 s, … by the attempts of its round (a redelivery starts a new
// one), counted without comparing the worker's clock to the server's, and an attempt that fails
// on this side (the database) does not inherit the deferred turns as attempts. Time-skipping
// server (TimeSkipping: in the timing-sensitive group), real worker, Postgres, receivers on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { reopenDelivery } from '../db/models/webhooks';
import { startWebhookDeliveries } from '../temporal/client';
import { webhookDeliveryWorkflowId } from '../temporal/ids';
import { useDeliveryRounds } from './helpers/delivery-rounds';
import { receiver as fakeReceiver } from './helpers/fake-server';

const TASK_QUEUE = 'delivery-rounds';

describe('webhook delivery on the time-skipping server', () => {
  const { stack, shares, pendingDelivery, deliveryRow } = useDeliveryRounds(TASK_QUEUE);

  it('a delivery deferred (no place) for longer than 25 hours is not given up without a single attempt: its 25 hours count from its first real attempt', async () => {
    const rx = await fakeReceiver(() => 200);
    // Another tenant holds the worker's one place (its receiver hangs, say) for all of 26 hours.
    const hog = shares.take('hog');
    expect(hog).not.toBeNull();
    try {
      const deliveryId = await pendingDelivery('victim', rx.url);
      expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [deliveryId])).toEqual([deliveryId]);
      await stack.env.sleep('26 hours');
      // Never attempted: the receiver was never called...
      expect(rx.received).toHaveLength(0);
      // ...so the delivery must still be waiting for its turn, not failed with 0 attempts.
      expect(await deliveryRow(deliveryId)).toEqual({ status: 'pending', attempts: 0 });
      hog!();
      expect(await stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId)).result()).toBe('delivered');
      expect(rx.received).toHaveLength(1);
    } finally {
      hog?.();
      await rx.close();
    }
  });

  it('deferred turns do not stretch the backoff of a real attempt that fails without its own delay (recording the attempt failed): retried within minutes, not an hour', async () => {
    const rx = await fakeReceiver(() => 500);
    const hog = shares.take('hog');
    expect(hog).not.toBeNull();
    const deliveryId = await pendingDelivery('stretched', rx.url);
    const handle = stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId));
    // Recording this delivery's attempts fails (a database fail-over, say): the attempt throws a plain error.
    await stack.db.pool.query(`
      create or replace function test_fail_attempt() returns trigger language plpgsql as $$
      begin
        if new.delivery_id = '${deliveryId}' then raise exception 'database went away'; end if;
        return new;
      end $$`);
    await stack.db.pool.query('create trigger test_fail_attempt before insert on webhook_delivery_attempts for each row execute function test_fail_attempt()');
    try {
      expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [deliveryId])).toEqual([deliveryId]);
      // Deferred for ten minutes (a dozen turns or more) while another tenant holds the place.
      await stack.env.sleep('10 minutes');
      expect(rx.received).toHaveLength(0);
      hog!();
      // Its first real attempt comes within 90 s; it fails, and the next comes 10 s later (one real attempt so far).
      await stack.env.sleep('5 minutes');
      expect(rx.received.length, `${rx.received.length} real attempts in the 5 minutes after the place was freed`).toBeGreaterThanOrEqual(2);
    } finally {
      hog?.();
      await stack.db.pool.query('drop trigger if exists test_fail_attempt on webhook_delivery_attempts');
      await handle.terminate('test done').catch(() => undefined);
      await rx.close();
    }
  });

  it('real failures back off 10 s, 20 s, 40 s, … whatever the worker clock says: at most 9 attempts in the first hour of a failing delivery', async () => {
    // The server's clock is ahead of the worker's (time skipped before this delivery was scheduled,
    // as in any time-skipping test after its first; or a worker host whose clock is behind).
    await stack.env.sleep('2 hours');
    const rx = await fakeReceiver(() => 500);
    const deliveryId = await pendingDelivery('clock', rx.url);
    const handle = stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId));
    try {
      expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [deliveryId])).toEqual([deliveryId]);
      // 0, 10, 30, 70, 150, 310, 630, 1270, 2550 s: 9 attempts in the first hour (the 10th at 5110 s).
      await stack.env.sleep('1 hour');
      const attempts = rx.received.length;
      expect(attempts, `${attempts} attempts in one hour`).toBeLessThanOrEqual(10);
    } finally {
      await handle.terminate('test done').catch(() => undefined);
      await rx.close();
    }
  });

  it("gives up a delivery 25 hours after its first real attempt (about 33 attempts, not at the run's 48-hour bound), and a redelivery starts a new round backing off from 10 s", async () => {
    const rx = await fakeReceiver(() => 500);
    const deliveryId = await pendingDelivery('given-up', rx.url);
    const handle = stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId));
    try {
      expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [deliveryId])).toEqual([deliveryId]);
      expect(await handle.result()).toBe('failed');
      // 0, 10, 30, … 2550, 5110 s, then hourly while the next comes within 25 hours of the first:
      // about 33 attempts (the run's 48-hour bound alone would allow some 57).
      const { rows } = await stack.db.pool.query<{ n: number }>('select count(*)::int as n from webhook_delivery_attempts where delivery_id = $1', [deliveryId]);
      expect(rows[0]!.n).toBeGreaterThanOrEqual(31);
      expect(rows[0]!.n).toBeLessThanOrEqual(34);
      expect(await deliveryRow(deliveryId)).toEqual({ status: 'failed', attempts: rows[0]!.n });

      // Redelivered: a new round, whose delays start again at 10 s (not an hour, as after 33 attempts).
      const before = rx.received.length;
      await reopenDelivery(stack.db.pool, deliveryId, new Date());
      expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [deliveryId])).toEqual([deliveryId]);
      await stack.env.sleep('1 hour');
      const inRound = rx.received.length - before;
      expect(inRound, `${inRound} attempts in the new round's first hour`).toBeGreaterThanOrEqual(8);
      expect(inRound).toBeLessThanOrEqual(10);
    } finally {
      await handle.terminate('test done').catch(() => undefined);
      await rx.close();
    }
  });
});
