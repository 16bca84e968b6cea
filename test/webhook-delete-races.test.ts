// A webhook deleted while an event of its tenant is being written: the event's transaction (a
// disable, a job's end) goes through, with deliveries to the webhooks that remain, never failing
// on the one just deleted. Against a real Postgres; Temporal is a stub that finds nothing running.
import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { disableConnection } from '../commands/connections';
import { deleteWebhook } from '../commands/webhooks';
import { useTestDatabase } from './helpers/database';
import { testCommandDeps } from './helpers/deps';
import { eventually } from './helpers/worker';

/** Finds every workflow closed and starts none (a start would be made again by the reconcile tick). */
const stubTemporal = {
  workflow: {
    getHandle: () => ({ describe: async () => ({ status: { name: 'COMPLETED' } }), cancel: async () => undefined }),
    start: async () => {
      throw new Error('no Temporal in this test');
    },
  },
} as unknown as Client;

describe('a webhook deleted while an event is written', () => {
  const db = useTestDatabase();

  async function lockWaiters(): Promise<number> {
    const { rows } = await db.pool.query<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
    );
    return rows[0]!.n;
  }

  it('a disable racing the deletion of one of the tenant\'s webhooks succeeds, announced to the webhook that remains', async () => {
    const tenant = `t-${Math.random().toString(36).slice(2)}`;
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'x', 'active') returning id`, [tenant]);
    const id = rows[0]!.id;
    const hook = async () =>
      (await db.pool.query<{ id: string }>(
        `insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'https://example.com/hook', '{connection.disabled}', 'whsec_x') returning id`,
        [tenant],
      )).rows[0]!.id;
    const going = await hook();
    const staying = await hook();
    const deps = testCommandDeps(db.pool, stubTemporal);
    // The webhook's deletion is under way (its row deleted, not yet committed) when the disable writes its event.
    const deleter = await db.pool.connect();
    try {
      await deleter.query('begin');
      await deleter.query('delete from webhooks where id = $1', [going]);
      const before = await lockWaiters();
      const disable = disableConnection(deps, id).then(() => 'disabled', (err: unknown) => String(err));
      await eventually(async () => ((await lockWaiters()) > before ? true : undefined));
      await deleter.query('commit');
      expect(await disable).toBe('disabled');
    } finally {
      deleter.release();
    }
    const { rows: deliveries } = await db.pool.query<{ webhook_id: string }>(
      `select d.webhook_id from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.connection_id = $1 and e.event_type = 'connection.disabled'`,
      [id],
    );
    expect(deliveries.map((d) => d.webhook_id)).toEqual([staying]);
    // And the deletion, answered before, stands: the webhook is gone.
    await expect(deleteWebhook(deps, going)).rejects.toMatchObject({ code: 'not_found' });
  });
});
