import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import type { Worker } from '@temporalio/worker';
import { DeliveryShares } from '../../lib/delivery-shares';
import { useServers, type WorkerStack } from './stack';
import { createTestWorker } from './worker';

/** What a file testing webhook delivery rounds on the time-skipping server uses (see useDeliveryRounds). */
export interface DeliveryRounds {
  stack: WorkerStack;
  /** The worker's delivery places: one, which a test holds for a "hog" tenant to defer the others. */
  shares: DeliveryShares;
  /** A pending delivery of a new event to a new webhook of `tenant` at `url`. */
  pendingDelivery(tenant: string, url: string): Promise<string>;
  /** The delivery's status and its count of real attempts. */
  deliveryRow(id: string): Promise<{ status: string; attempts: number }>;
}

/**
 * Starts a time-skipping server, Postgres and a worker on `taskQueue` that delivers webhooks to
 * 127.0.0.1 with one delivery place, for the file's tests.
 */
export function useDeliveryRounds(taskQueue: string): DeliveryRounds {
  const stack = useServers('time-skipping') as WorkerStack;
  const shares = new DeliveryShares(1);
  let worker: Worker;
  let running: Promise<void>;

  beforeAll(async () => {
    const created = await createTestWorker({
      connection: stack.env.nativeConnection,
      client: stack.env.client,
      pool: stack.db.pool,
      taskQueue,
      webhooks: { allowPrivate: true, shares },
    });
    worker = created.worker;
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
  });

  return {
    stack,
    shares,
    async pendingDelivery(tenant, url) {
      const secret = `whsec_${randomBytes(32).toString('base64')}`;
      const { rows: hook } = await stack.db.pool.query<{ id: string }>(
        `insert into webhooks (tenant_id, url, event_types, secret) values ($1, $2, '{connection.disabled}', $3) returning id`,
        [tenant, url, secret],
      );
      const { rows: event } = await stack.db.pool.query<{ id: string }>(
        `insert into webhook_events (tenant_id, event_type, payload) values ($1, 'connection.disabled', '{"connection_id": "c"}') returning id`,
        [tenant],
      );
      const { rows: delivery } = await stack.db.pool.query<{ id: string }>(
        'insert into webhook_deliveries (webhook_id, event_id) values ($1, $2) returning id',
        [hook[0]!.id, event[0]!.id],
      );
      return delivery[0]!.id;
    },
    async deliveryRow(id) {
      const { rows } = await stack.db.pool.query<{ status: string; attempts: number }>('select status, attempts from webhook_deliveries where id = $1', [id]);
      return rows[0]!;
    },
  };
}
