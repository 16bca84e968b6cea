// Redelivery against a real Postgres: two requests to redeliver one finished delivery at once, and
// a redelivery beside the previous round's run still ending. Temporal is not reached (a start that
// fails is the reconcile tick's to make).
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failWebhookDelivery } from '../activities/webhook-deliveries';
import type { ActivityDeps } from '../activities/deps';
import { redeliver } from '../commands/webhooks';
import { recordDeliveryAttempt } from '../db/models/webhooks';
import { CommandRefused } from '../commands/errors';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { testCommandDeps } from './helpers/deps';
import { eventually } from './helpers/worker';

/** A Temporal client whose every start fails as an unreachable server's would. */
const unreachable = { workflow: { start: () => Promise.reject(new Error('unreachable')) } } as unknown as Client;

describe('redelivery races', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  /**
   * One delivery of a `sync.completed` event to the webhook of a new tenant (`<prefix>-<now>`),
   * in `status` after `attempts` attempts, finished now when `finished`; and its status as stored.
   */
  async function newDelivery(prefix: string, opts: { status: 'pending' | 'failed'; attempts: number; finished?: boolean }) {
    const tenant = `${prefix}-${Date.now()}`;
    const { rows } = await db.pool.query<{ webhook_id: string; delivery_id: string }>(
      `with w as (insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'https://example.com/hook', '{sync.completed}', 'whsec_x') returning id),
            e as (insert into webhook_events (tenant_id, event_type, payload) values ($1, 'sync.completed', '{}') returning id)
       insert into webhook_deliveries (webhook_id, event_id, status, attempts, finished_at)
       select w.id, e.id, $2, $3, case when $4::boolean then now() end from w, e returning webhook_id, id as delivery_id`,
      [tenant, opts.status, opts.attempts, opts.finished ?? false],
    );
    const { webhook_id: webhookId, delivery_id: deliveryId } = rows[0]!;
    const status = async () => (await db.pool.query('select status from webhook_deliveries where id = $1', [deliveryId])).rows[0].status;
    return { tenant, webhookId, deliveryId, status };
  }

  it('two redeliveries of one failed delivery at once: one is accepted and counted, the other is refused as pending', async () => {
    const { tenant, webhookId, deliveryId } = await newDelivery('redeliver', { status: 'failed', attempts: 3, finished: true });
    const deps = testCommandDeps(db.pool, unreachable);

    // Another of the tenant's counted calls holds its limit lock while both requests arrive.
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock($1, hashtext($2))', [0x7e17, tenant]);
      const both = [redeliver(deps, webhookId, deliveryId), redeliver(deps, webhookId, deliveryId)].map((p) =>
        p.then(() => 'accepted', (err: unknown) => (err instanceof CommandRefused ? err.code : String(err))),
      );
      // Both are in: each waits for the tenant's lock (or for the other's claim on the delivery).
      await eventually(async () => {
        const { rows: waiting } = await db.pool.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
        );
        return waiting[0]!.n >= 2 ? true : undefined;
      });
      await holder.query('commit');
      expect((await Promise.all(both)).sort()).toEqual(['accepted', 'delivery_pending']);
    } finally {
      holder.release();
    }
    const { rows: counted } = await db.pool.query<{ n: number }>('select count(*)::int as n from webhook_redeliveries where delivery_id = $1', [deliveryId]);
    expect(counted[0]!.n).toBe(1);
    const { rows: delivery } = await db.pool.query('select status from webhook_deliveries where id = $1', [deliveryId]);
    expect(delivery[0]).toEqual({ status: 'pending' });
  });
  it("a retry of the previous round's failing step (its first run's answer was lost) leaves a delivery redelivered since pending", async () => {
    const { webhookId, deliveryId, status } = await newDelivery('refail', { status: 'pending', attempts: 33 });
    // The round gave up: its run marks the delivery failed, but the activity's completion is lost.
    const fail = failWebhookDelivery({ pool: db.pool } as ActivityDeps);
    const input = { deliveryId, at: Date.now() - 1_000 };
    await fail(input);
    expect(await status()).toBe('failed');
    // The tenant redelivers it (the start finds that run still open, or fails: the tick's to make)…
    await redeliver(testCommandDeps(db.pool, unreachable), webhookId, deliveryId);
    expect(await status()).toBe('pending');
    // …and the same activity, retried by that run, must not end the new round before its first attempt.
    await fail(input);
    expect(await status()).toBe('pending');
    // The new round's own failure, after its real attempts (the first scheduled after the
    // redelivery), is marked failed as ever.
    await recordDeliveryAttempt(db.pool, { deliveryId, statusCode: 500, error: null, durationMs: 1, at: new Date(), delivered: false, scheduledAt: new Date(Date.now() + 1_000) });
    await fail({ deliveryId, at: Date.now() + 2_000 });
    expect(await status()).toBe('failed');
  });
  it("a retry of the previous round's failing step leaves a redelivered delivery pending when the workflow's clock (Temporal's) runs ahead of the API's", async () => {
    const { webhookId, deliveryId, status } = await newDelivery('skew', { status: 'pending', attempts: 33 });
    // The round gave up at what the Temporal server's clock called now; the API's clock is 5 s
    // behind it. The failing step's completion is lost.
    const fail = failWebhookDelivery({ pool: db.pool } as ActivityDeps);
    const input = { deliveryId, at: Date.now() + 5_000 };
    await fail(input);
    expect(await status()).toBe('failed');
    // Redelivered after that (by the API's clock, 5 s behind, a time before it)…
    await redeliver(testCommandDeps(db.pool, unreachable), webhookId, deliveryId);
    expect(await status()).toBe('pending');
    // …the previous round's step, retried, must not end the new round.
    await fail(input);
    expect(await status()).toBe('pending');
    // A new round that never reached the receiver fails at its run's bound, 48 hours on.
    await fail({ deliveryId, at: Date.now() + 5_000 + 48 * 3_600_000 });
    expect(await status()).toBe('failed');
  });
});
