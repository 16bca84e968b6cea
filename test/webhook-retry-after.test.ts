// A receiver answering 429 or 503 with `Retry-After` (delay-seconds or an HTTP-date, counted from
// its answer's Date) gets its next attempt no sooner than it asked, at most an hour later (the
// schedule's largest delay), and a delivery is still given up 25 hours after its round's first
// real attempt. Time-skipping server (TimeSkipping: in the timing-sensitive group), real worker,
// Postgres, receivers on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { startWebhookDeliveries } from '../temporal/client';
import { webhookDeliveryWorkflowId } from '../temporal/ids';
import { useDeliveryRounds } from './helpers/delivery-rounds';
import { serve, type FakeServer } from './helpers/fake-server';

const TASK_QUEUE = 'delivery-retry-after';

/** A receiver answering the n-th request (0 first) with `answer(n)`'s status and headers. */
async function receiver(answer: (n: number) => { status: number; headers?: Record<string, string> }): Promise<FakeServer & { hook: string }> {
  let n = 0;
  const server = await serve((req, res) => {
    req.resume();
    req.on('end', () => {
      const { status, headers } = answer(n++);
      res.writeHead(status, headers ?? {}).end();
    });
  });
  return Object.assign(server, { hook: `${server.url}/hook` });
}

describe('Retry-After of a receiver on the time-skipping server', () => {
  const { stack, pendingDelivery, deliveryRow } = useDeliveryRounds(TASK_QUEUE);

  async function start(deliveryId: string) {
    expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [deliveryId])).toEqual([deliveryId]);
    return stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId));
  }

  it('503 with Retry-After: 600 (seconds): no attempt in the next 5 minutes (the schedule alone would make 4), then the next one delivers', async () => {
    const rx = await receiver((n) => (n === 0 ? { status: 503, headers: { 'retry-after': '600' } } : { status: 200 }));
    const deliveryId = await pendingDelivery('seconds', rx.hook);
    const handle = await start(deliveryId);
    try {
      await stack.env.sleep('5 minutes');
      expect(rx.requests.length, `${rx.requests.length} attempts in the 5 minutes after a Retry-After of 600 s`).toBe(1);
      expect(await handle.result()).toBe('delivered');
      expect(rx.requests).toHaveLength(2);
      expect(await deliveryRow(deliveryId)).toEqual({ status: 'delivered', attempts: 2 });
    } finally {
      await handle.terminate('test done').catch(() => undefined);
      await rx.close();
    }
  });

  it("429 with Retry-After as an HTTP-date 20 minutes after the answer's own Date: no attempt 15 minutes on, whatever the worker's clock", async () => {
    // The receiver's clock is years ahead of the worker's: the wait is counted from its Date.
    const date = new Date('2031-03-04T05:06:07Z');
    const rx = await receiver((n) =>
      n === 0
        ? { status: 429, headers: { date: date.toUTCString(), 'retry-after': new Date(date.getTime() + 20 * 60_000).toUTCString() } }
        : { status: 200 },
    );
    const deliveryId = await pendingDelivery('http-date', rx.hook);
    const handle = await start(deliveryId);
    try {
      await stack.env.sleep('15 minutes');
      expect(rx.requests.length, `${rx.requests.length} attempts in the 15 minutes after a Retry-After 20 minutes ahead`).toBe(1);
      expect(await handle.result()).toBe('delivered');
      expect(rx.requests).toHaveLength(2);
    } finally {
      await handle.terminate('test done').catch(() => undefined);
      await rx.close();
    }
  });

  it('a Retry-After of a day is capped at an hour: no attempt 30 minutes on, the next within the hour after', async () => {
    const rx = await receiver((n) => (n === 0 ? { status: 503, headers: { 'retry-after': '86400' } } : { status: 200 }));
    const deliveryId = await pendingDelivery('capped', rx.hook);
    const handle = await start(deliveryId);
    try {
      await stack.env.sleep('30 minutes');
      expect(rx.requests.length, `${rx.requests.length} attempts in the 30 minutes after a Retry-After of a day`).toBe(1);
      await stack.env.sleep('31 minutes');
      expect(rx.requests.length, `${rx.requests.length} attempts in the 61 minutes after a Retry-After of a day`).toBe(2);
      expect(await handle.result()).toBe('delivered');
    } finally {
      await handle.terminate('test done').catch(() => undefined);
      await rx.close();
    }
  });

  it('Retry-After is ignored on other statuses (a 500 keeps the schedule: 10 s first)', async () => {
    const rx = await receiver((n) => (n === 0 ? { status: 500, headers: { 'retry-after': '3600' } } : { status: 200 }));
    const deliveryId = await pendingDelivery('other-status', rx.hook);
    const handle = await start(deliveryId);
    try {
      await stack.env.sleep('5 minutes');
      expect(rx.requests).toHaveLength(2);
      expect(await handle.result()).toBe('delivered');
    } finally {
      await handle.terminate('test done').catch(() => undefined);
      await rx.close();
    }
  });

  it('a receiver answering 503 with Retry-After: 3600 every time is still given up 25 hours after the first attempt (hourly: 25 or 26 attempts, not 33)', async () => {
    const rx = await receiver(() => ({ status: 503, headers: { 'retry-after': '3600' } }));
    const deliveryId = await pendingDelivery('given-up', rx.hook);
    const handle = await start(deliveryId);
    try {
      expect(await handle.result()).toBe('failed');
      // Hourly from the first, while the next comes within 25 hours of it (the schedule alone
      // would have made some 33): 25 or 26, as the 25-hour mark falls.
      const row = await deliveryRow(deliveryId);
      expect(row.status).toBe('failed');
      expect(row.attempts).toBeGreaterThanOrEqual(25);
      expect(row.attempts).toBeLessThanOrEqual(26);
    } finally {
      await handle.terminate('test done').catch(() => undefined);
      await rx.close();
    }
  });
});
