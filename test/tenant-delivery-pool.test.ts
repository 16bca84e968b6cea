// A tenant's webhook delivery attempts take their tenant's turns at the worker's pool, as its sync
// tasks do: however many of them wait (here on their deliveries' rows, which another transaction
// holds, as a deletion of the tenant's webhook with a long history does), they hold at most half of
// the activities' pool, and another tenant's statement runs meanwhile. Real Postgres and a receiver
// on 127.0.0.1; each attempt is run as the scheduled worker runs it (its tenant told by
// activityTenant, set as `workingFor`), inside an activity context (MockActivityEnvironment).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activityTenant } from '../activities/activity-tenant';
import { deliverWebhook } from '../activities/webhook-deliveries';
import { createWebhook } from '../commands/webhooks';
import { createPool, type Pool } from '../db/pool';
import { webhookDeliveryWorkflowId } from '../temporal/ids';
import { tenantTurnsPool, workingFor } from '../workers/tenant-pool';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { useTestDatabase } from './helpers/database';
import { fakeTemporal } from './helpers/fake-temporal';

/** The activities' pool: four connections, so a tenant's share is two. */
const POOL_MAX = 4;

describe("a tenant's webhook delivery attempts on the worker's pool (real Postgres, receiver on 127.0.0.1)", () => {
  const db = useTestDatabase();
  let raw: Pool;
  let receiver: Server;
  let url = '';
  let hits = 0;

  beforeAll(async () => {
    raw = createPool(db.url, POOL_MAX);
    receiver = createServer((req, res) => {
      hits += 1;
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    await new Promise((resolve) => receiver?.close(resolve));
    await raw?.end();
  });

  it("hold at most the tenant's share of the pool while they wait: another tenant's statement runs meanwhile", async () => {
    const pool = tenantTurnsPool(raw);
    const { webhook } = await createWebhook({ ...testCommandDeps(db.pool, fakeTemporal().client), webhookAllowPrivate: true }, { tenantId: 'noisy', url, eventTypes: ['sync.failed'] });
    const { rows } = await db.pool.query<{ id: string }>(
      `with events as (insert into webhook_events (tenant_id, event_type, payload) select 'noisy', 'sync.failed', '{}' from generate_series(1, 4) returning id)
       insert into webhook_deliveries (webhook_id, event_id) select $1, id from events returning id`,
      [webhook.id],
    );
    const ids = rows.map((r) => r.id);
    const { deps } = testActivityDeps({ pool });
    const tenantOf = activityTenant({ pool: db.pool });
    const lockWaits = async () =>
      (await db.pool.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rowCount ?? 0;

    // The deliveries' rows are held (a deletion of the webhook and its history, say).
    const holder = await db.pool.connect();
    let attempts: Promise<unknown[]> | undefined;
    try {
      await holder.query('begin');
      await holder.query('select 1 from webhook_deliveries where id = any($1) for update', [ids]);
      attempts = Promise.all(
        ids.map(async (deliveryId) => {
          const tenant = await tenantOf({ activityType: 'deliverWebhook', workflowId: webhookDeliveryWorkflowId(deliveryId), args: [{ deliveryId }] });
          return workingFor.run(tenant, () => new MockActivityEnvironment({ attempt: 1 }).run(deliverWebhook(deps), { deliveryId }));
        }),
      );
      // Every attempt reached the receiver; those that hold connections wait for their rows (all
      // four without turns; two with them, the other two waiting for the tenant's turn).
      for (let i = 0; i < 1500 && !((await lockWaits()) >= POOL_MAX || ((await lockWaits()) >= POOL_MAX / 2 && hits >= ids.length)); i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect({ inUse: raw.totalCount - raw.idleCount }).toEqual({ inUse: POOL_MAX / 2 });
      // Another tenant's statement finds a free connection.
      const other = await workingFor.run('quiet', () => pool.query<{ one: number }>('select 1 as one'));
      expect(other.rows[0]!.one).toBe(1);
      await holder.query('commit');
      expect(await attempts).toEqual(['delivered', 'delivered', 'delivered', 'delivered']);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
      await attempts?.catch(() => undefined);
    }
  }, 120_000);
});
