// Fault: a webhook delivery attempt lost with its worker (it never reports back within its 30 s,
// as when the worker dies mid-way) after many turns deferred for want of a place is tried again
// within minutes, not an hour later: the retry policy's own delay, the only one such an attempt
// gets, counts the deferred turns as attempts, so it is bounded (DEFERRED_MAX_SECONDS). The lost
// attempt takes real time (time does not skip while an activity runs), so this lives with the
// fault tests. Time-skipping server, real worker, Postgres, a receiver on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { startWebhookDeliveries } from '../../temporal/client';
import { webhookDeliveryWorkflowId } from '../../temporal/ids';
import { useDeliveryRounds } from '../helpers/delivery-rounds';
import { receiver as fakeReceiver } from '../helpers/fake-server';
import { eventually } from '../helpers/worker';

const TASK_QUEUE = 'faults-delivery-lost-attempt';

describe('a webhook delivery attempt lost with its worker', () => {
  const { stack, shares, pendingDelivery, deliveryRow } = useDeliveryRounds(TASK_QUEUE);

  it("an attempt lost with its worker (it outlives its 30 s) after many deferred turns is tried again within minutes, not an hour later: the turns are not counted as attempts", async () => {
    const rx = await fakeReceiver(() => 500);
    const hog = shares.take('hog');
    expect(hog).not.toBeNull();
    const deliveryId = await pendingDelivery('lost', rx.url);
    const handle = stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId));
    // Its first real attempt never reports back in time, as one whose worker died mid-way: it is
    // held in recording itself for longer than the activity's 30 s.
    await stack.db.pool.query(`
      create or replace function test_lose_attempt() returns trigger language plpgsql as $$
      begin
        if new.delivery_id = '${deliveryId}' and new.attempt = 1 then perform pg_sleep(35); end if;
        return new;
      end $$`);
    await stack.db.pool.query('create trigger test_lose_attempt before insert on webhook_delivery_attempts for each row execute function test_lose_attempt()');
    try {
      expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [deliveryId])).toEqual([deliveryId]);
      // Deferred for ten minutes (a dozen turns or more) while another tenant holds the place.
      await stack.env.sleep('10 minutes');
      expect(rx.received).toHaveLength(0);
      hog!();
      // The lost attempt reaches the receiver, times out on the server, and gives its place back
      // once its recording ends (real time: time does not skip while an activity runs).
      // The freed place is taken at the delivery's next deferred turn (up to 90 s, in real time
      // here, as nothing skips it), then the lost attempt holds it 35 s: up to 4 minutes under load.
      await eventually(async () => (await deliveryRow(deliveryId)).attempts >= 1 || undefined, { timeoutMs: 240_000 });
      // The next attempt comes within a minute or so of the lost one, not an hour later.
      await stack.env.sleep('5 minutes');
      expect(rx.received.length, `${rx.received.length} real attempts in the 5 minutes after the lost one`).toBeGreaterThanOrEqual(2);
    } finally {
      hog?.();
      await stack.db.pool.query('drop trigger if exists test_lose_attempt on webhook_delivery_attempts');
      await handle.terminate('test done').catch(() => undefined);
      await rx.close();
    }
  }, 420_000);
});
