// Webhook delivery attempts cannot take the worker from other tenants: a tenant whose receivers
// hang holds at most WEBHOOK_DELIVERY_SLOTS of the worker's activity slots, so another tenant's
// sync runs meanwhile; and the tenants with deliveries to make share those places equally.
// Dev server, real API, worker, Postgres and receivers on 127.0.0.1.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Worker } from '@temporalio/worker';
import { findPendingDeliveries } from '../db/models/webhooks';
import { DeliveryShares } from '../lib/delivery-shares';
import { deferredDeliverySeconds, deliveryRetrySeconds, DEFERRED_WAITING_MS } from '../policy/delivery-shares';
import { startTestApi, type TestApi } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { serve, type FakeServer } from './helpers/fake-server';
import { useServers, type WorkerStack } from './helpers/stack';
import { createTestWorker, eventually } from './helpers/worker';

const TASK_QUEUE = 'delivery-shares';

describe('pending deliveries the reconcile tick starts (real Postgres)', () => {
  const db = useTestDatabase();

  it("takes each tenant's oldest in turn, so one tenant's backlog of unstarted deliveries does not hold another's back for ticks", async () => {
    /** `n` pending deliveries of a webhook of `tenant`, created `minutesAgo` minutes ago (a minute apart, oldest first). */
    const backlog = async (tenant: string, n: number, minutesAgo: number) => {
      const { rows } = await db.pool.query<{ id: string }>(
        `with hook as (insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'https://example.com/hook', '{sync.failed}', 'x') returning id),
              events as (insert into webhook_events (tenant_id, event_type, payload, created_at)
                         select $1, 'sync.failed', '{}', now() - make_interval(mins => $3 - k) from generate_series(0, $2 - 1) k returning id, created_at)
         insert into webhook_deliveries (webhook_id, event_id, created_at) select hook.id, events.id, events.created_at from hook, events
         returning id`,
        [tenant, n, minutesAgo],
      );
      return rows.map((r) => r.id);
    };
    // A tenant's thousand deliveries whose workflows never started (a Temporal outage), older than the other tenant's two.
    const noisy = await backlog('noisy', 1000, 2000);
    const quiet = await backlog('quiet', 2, 10);
    const picked = await findPendingDeliveries(db.pool, new Date(), [], 4);
    expect(picked.filter((id) => quiet.includes(id))).toHaveLength(2);
    expect(picked.filter((id) => noisy.includes(id))).toHaveLength(2);
    // Deliveries the tick found running are left out before the turns are counted.
    const next = await findPendingDeliveries(db.pool, new Date(), [...quiet, ...noisy.slice(0, 2)], 4);
    expect(next).toHaveLength(4);
    expect(next.every((id) => noisy.includes(id) && !noisy.slice(0, 2).includes(id))).toBe(true);
  });
});

describe('delivery places of one process (DeliveryShares)', () => {
  it('caps attempts at its slots and gives each tenant with work an equal share', () => {
    const now = 1_000_000;
    const shares = new DeliveryShares(4, () => now);
    // Alone, a tenant may take every place.
    const noisy = [shares.take('noisy'), shares.take('noisy'), shares.take('noisy'), shares.take('noisy')];
    expect(noisy.every((r) => r !== null)).toBe(true);
    expect(shares.take('noisy')).toBeNull();
    // Another tenant finds none free: refused, it now counts as waiting.
    expect(shares.take('quiet')).toBeNull();
    // The next place freed goes to the waiting tenant, not to the one over its share (4 / 2 = 2).
    noisy[0]!();
    expect(shares.take('noisy')).toBeNull();
    const quiet = shares.take('quiet');
    expect(quiet).not.toBeNull();
    noisy[1]!();
    noisy[2]!();
    // noisy runs 1 of its 2, quiet 1 of its 2: each may take one more.
    expect(shares.take('noisy')).not.toBeNull();
    expect(shares.take('quiet')).not.toBeNull();
    expect(shares.take('quiet')).toBeNull();
    // Giving a place back twice frees it once.
    quiet!();
    quiet!();
    expect(shares.take('quiet')).not.toBeNull();
    expect(shares.take('quiet')).toBeNull();
  });

  it('forgets a waiting tenant that stopped asking, and gives each tenant one place at least', () => {
    let now = 0;
    const shares = new DeliveryShares(2, () => now);
    const a = [shares.take('a'), shares.take('a')];
    expect(shares.take('b')).toBeNull(); // full: b waits
    a[0]!();
    // b waits: a's share is 1 of the 2, and a runs 1.
    expect(shares.take('a')).toBeNull();
    now += DEFERRED_WAITING_MS + 1;
    // b stopped asking long ago: a's share is both places again.
    expect(shares.take('a')).not.toBeNull();
    // With more tenants than places, each still gets one when a place is free.
    const many = new DeliveryShares(1, () => now);
    expect(many.take('x')).not.toBeNull();
    expect(many.take('y')).toBeNull();
    expect(many.take('z')).toBeNull();
  });

  it('forgets a waiting tenant DEFERRED_WAITING_MS after it stopped asking, however the wall clock is set meanwhile (an NTP step back): it times itself on a monotonic clock', () => {
    vi.useFakeTimers({ toFake: ['Date', 'performance'] });
    try {
      const shares = new DeliveryShares(2);
      const a = shares.take('a');
      expect(shares.take('a')).not.toBeNull();
      expect(shares.take('b')).toBeNull(); // full: b waits
      a!();
      // The wall clock goes back an hour; b stops asking; DEFERRED_WAITING_MS pass.
      vi.setSystemTime(Date.now() - 3_600_000);
      vi.advanceTimersByTime(DEFERRED_WAITING_MS + 1);
      // b is forgotten: a's share is both places again.
      expect(shares.take('a')).not.toBeNull();
    } finally {
      vi.useRealTimers();
    }
  });

  it('leaves no place idle while tenants with deliveries wait: 11 tenants with backlogs use all 20 places', () => {
    const now = 1_000_000;
    const shares = new DeliveryShares(20, () => now);
    const tenants = Array.from({ length: 11 }, (_, i) => `t${i}`);
    let taken = 0;
    // Every tenant has many deliveries: each asks again and again, round after round.
    for (let round = 0; round < 5; round++) {
      for (const t of tenants) if (shares.take(t) !== null) taken++;
    }
    // Every tenant got at least one place (fair)...
    // ...and the worker runs its 20 attempts, not 11 with 9 places idle and deliveries deferred.
    expect(taken).toBe(20);
  });

  it('defers growing by half a turn, within 1–1.5 × the base, up to a minute; real attempts keep 10 s doubling to an hour', () => {
    expect(deferredDeliverySeconds(1, 0)).toBe(2);
    expect(deferredDeliverySeconds(2, 0)).toBe(3);
    expect(deferredDeliverySeconds(1, 0.999)).toBeCloseTo(2.999, 3);
    expect(deferredDeliverySeconds(100, 0)).toBe(60);
    expect(deferredDeliverySeconds(100, 1)).toBe(90);
    expect([1, 2, 3, 4].map(deliveryRetrySeconds)).toEqual([10, 20, 40, 80]);
    expect(deliveryRetrySeconds(0)).toBe(10);
    expect(deliveryRetrySeconds(30)).toBe(3600);
  });
});

describe('a tenant whose receivers hang', () => {
  const stack = useServers('dev-server') as WorkerStack;
  let worker: Worker;
  let running: Promise<void>;
  let api: TestApi;
  let blackHole: FakeServer;

  beforeAll(async () => {
    // Accepts every delivery and never answers (the worker's timeout is set far beyond the test).
    blackHole = await serve((req) => void req.resume());
    const created = await createTestWorker({
      connection: stack.env.nativeConnection,
      client: stack.env.client,
      pool: stack.db.pool,
      taskQueue: TASK_QUEUE,
      // Three activity slots, two of which deliveries may take.
      activitySlots: 3,
      webhooks: { allowPrivate: true, shares: new DeliveryShares(2), timeoutMs: 600_000 },
    });
    worker = created.worker;
    Object.assign(stack, { worker, lines: created.lines, registry: created.registry, metrics: created.metrics });
    running = worker.run();
    api = await startTestApi(stack, TASK_QUEUE, { webhookAllowPrivate: true });
  });
  afterAll(async () => {
    await api?.server.close();
    await blackHole?.close();
    worker?.shutdown();
    await running;
  });

  const demo = (tenant: string, key: string) => ({
    tenant_id: tenant,
    app_key: key,
    provider: 'demo',
    config: { resource_types: ['items'], records_per_resource: 20, page_size: 10 },
    schedule: { interval_seconds: 86_400 },
  });

  async function deferred(): Promise<number> {
    const metric = await stack.registry.getSingleMetric('synctide_webhook_deliveries_deferred_total')?.get();
    return metric?.values[0]?.value ?? 0;
  }

  it("never take the activity slots another tenant's sync needs", async () => {
    for (let i = 0; i < 6; i++) {
      const hook = await api.call('POST', '/webhooks', { tenant_id: 'noisy', url: `${blackHole.url}/hook-${i}`, event_types: ['sync.completed'] });
      expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    }
    // The noisy tenant's first sync ends with one event: six deliveries, each of which would hang.
    expect((await api.call('POST', '/connections', demo('noisy', 'noisy-app'))).status).toBe(201);
    // Deliveries have taken every place they may (or every slot, without places) and the rest wait.
    await eventually(async () => (blackHole.requests.length >= 3 || (blackHole.requests.length >= 2 && (await deferred()) > 0) ? true : undefined), {
      describe: async () => ({ received: blackHole.requests.length, deferred: await deferred() }),
    });

    // Another tenant's connection syncs while those deliveries still hang.
    const quiet = await api.call('POST', '/connections', demo('quiet', 'quiet-app'));
    expect(quiet.status).toBe(201);
    const job = await eventually(
      async () => {
        const { rows } = await stack.db.pool.query<{ status: string }>('select status from sync_jobs where connection_id = $1', [quiet.body.id]);
        return rows[0]?.status === 'completed' ? rows[0] : undefined;
      },
      { timeoutMs: 90_000, describe: async () => ({ received: blackHole.requests.length, abandoned: blackHole.abandoned }) },
    );
    expect(job.status).toBe('completed');
    // Not one hanging delivery was let go for it, and no more than the two places were taken.
    expect(blackHole.abandoned).toBe(0);
    expect(blackHole.requests.length).toBe(2);
    expect(await deferred()).toBeGreaterThan(0);
  });
});
