// A receiver that closes a kept-alive connection just as the next delivery is sent on it (its
// idle timeout ran out then): the delivery activity against a real Postgres and a receiver on
// 127.0.0.1 speaking HTTP/1.1 over raw TCP, so that it can drop a request it took on a reused
// connection without answering, as such a receiver does.
import net, { type AddressInfo, type Socket } from 'node:net';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { deliverWebhook } from '../activities/webhook-deliveries';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

/**
 * A receiver answering 200 to the first request of each connection (with `onlyFirst`, to the
 * first request it takes at all), keeping the connection open, and closing a connection without
 * an answer on any other request. `answered` counts the requests it answered, `dropped` those it
 * closed on, `connections` the connections it accepted.
 */
async function closingReceiver(onlyFirst = false) {
  const counts = { connections: 0, answered: 0, dropped: 0 };
  const sockets = new Set<Socket>();
  const server = net.createServer((socket) => {
    counts.connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let pending = Buffer.alloc(0);
    let taken = 0;
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(pending.subarray(0, end).toString('latin1'))?.[1] ?? 0);
        if (pending.length < end + 4 + length) return;
        pending = pending.subarray(end + 4 + length);
        taken += 1;
        if (taken === 1 && (!onlyFirst || counts.answered === 0)) {
          counts.answered += 1;
          socket.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: keep-alive\r\nkeep-alive: timeout=60\r\n\r\n');
        } else {
          counts.dropped += 1;
          socket.destroy();
          return;
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    counts,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('a receiver closing a kept-alive connection as a delivery is sent on it', () => {
  const db = useTestDatabase();
  const q = <T = any>(sql: string, params: unknown[] = []) => db.pool.query(sql, params).then((r) => r.rows as T[]);

  /** Two deliveries to `url`, one after the other, by the delivery activity: their outcomes and the attempts recorded. */
  async function deliverTwice(url: string) {
    const tenant = `t-${Math.random().toString(36).slice(2)}`;
    const [hook] = await q<{ id: string }>(`insert into webhooks (tenant_id, url, event_types, secret) values ($1, $2, '{connection.disabled}', 'whsec_x') returning id`, [tenant, url]);
    const { deps } = testActivityDeps({ pool: db.pool });
    const outcomes: string[] = [];
    const deliveries: string[] = [];
    for (let i = 0; i < 2; i++) {
      const [event] = await q<{ id: string }>(`insert into webhook_events (tenant_id, event_type, payload) values ($1, 'connection.disabled', '{}') returning id`, [tenant]);
      const [delivery] = await q<{ id: string }>('insert into webhook_deliveries (webhook_id, event_id) values ($1, $2) returning id', [hook!.id, event!.id]);
      deliveries.push(delivery!.id);
      outcomes.push(String(await new MockActivityEnvironment().run(deliverWebhook(deps), { deliveryId: delivery!.id }).catch((err: Error) => `threw: ${err.message}`)));
    }
    const attempts = await q(
      'select d.id, a.attempt, a.status_code, a.error from webhook_delivery_attempts a join webhook_deliveries d on d.id = a.delivery_id where d.id = any ($1::uuid[]) order by d.created_at, a.attempt',
      [deliveries],
    );
    return { outcomes, deliveries, attempts };
  }

  it('the delivery is sent again on a new connection within its attempt: delivered at its first attempt, no failed attempt recorded', async () => {
    const rx = await closingReceiver();
    try {
      const { outcomes, deliveries, attempts } = await deliverTwice(rx.url);
      // The second delivery went out on the first one's connection, which the receiver closed on it.
      expect(rx.counts.dropped).toBe(1);
      expect(outcomes).toEqual(['delivered', 'delivered']);
      expect(rx.counts).toEqual({ connections: 2, answered: 2, dropped: 1 });
      expect(attempts).toEqual(deliveries.map((id) => ({ id, attempt: 1, status_code: 200, error: null })));
    } finally {
      await rx.close();
    }
  });

  it('sent again once only: a receiver that closes the new connection too has not answered that attempt, which is retried on its schedule', async () => {
    const rx = await closingReceiver(true);
    try {
      const { outcomes, deliveries, attempts } = await deliverTwice(rx.url);
      expect(outcomes).toEqual(['delivered', 'threw: no answer: connection reset']);
      expect(rx.counts).toEqual({ connections: 2, answered: 1, dropped: 2 });
      expect(attempts).toEqual([
        { id: deliveries[0], attempt: 1, status_code: 200, error: null },
        { id: deliveries[1], attempt: 1, status_code: null, error: 'connection reset' },
      ]);
    } finally {
      await rx.close();
    }
  });
});
