// The `connection.disabled` event is announced once per change of status, also when two commands
// disable one connection at once (two disables, or a disable and a delete): each decides from the
// status it reads under the row's lock, not from the row it read before. Against a real Postgres;
// Temporal is a stub that finds nothing running (these commands only stop workflows).
import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { disableConnection } from '../commands/connections';
import type { CommandDeps } from '../commands/deps';
import { deleteConnection } from '../commands/purges';
import { useTestDatabase } from './helpers/database';
import { TEST_KEYRING, testActivityDeps } from './helpers/deps';
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

describe('connection.disabled, announced once', () => {
  const db = useTestDatabase();

  function deps(): CommandDeps {
    const { deps: activity } = testActivityDeps({ pool: db.pool });
    return { pool: db.pool, temporal: stubTemporal, taskQueue: 'nobody', credentials: TEST_KEYRING, metrics: activity.metrics, maxIntervalSeconds: 86_400, immediateSyncTimeoutMs: 60_000 };
  }

  async function activeConnectionWithWebhook(): Promise<string> {
    const tenant = `t-${Math.random().toString(36).slice(2)}`;
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'x', 'active') returning id`, [tenant]);
    await db.pool.query(`insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'https://example.com/hook', '{connection.disabled}', 'whsec_x')`, [tenant]);
    return rows[0]!.id;
  }

  /**
   * Runs `calls` while another session holds the connection's row: each has read the row (still
   * active) and waits for the lock when it is let go (pg_stat_activity shows them waiting).
   */
  async function atOnce(id: string, calls: (() => Promise<unknown>)[]): Promise<PromiseSettledResult<unknown>[]> {
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from connections where id = $1 for update', [id]);
      const running = calls.map((call) => call());
      await eventually(async () => {
        const { rows } = await db.pool.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`);
        return rows.length >= calls.length ? true : undefined;
      });
      await holder.query('commit');
      return await Promise.allSettled(running);
    } finally {
      holder.release();
    }
  }

  const disabledEvents = async (id: string) =>
    (await db.pool.query<{ n: number }>(`select count(*)::int as n from webhook_events where connection_id = $1 and event_type = 'connection.disabled'`, [id])).rows[0]!.n;

  it('two disables at once announce it once', async () => {
    const id = await activeConnectionWithWebhook();
    const settled = await atOnce(id, [() => disableConnection(deps(), id), () => disableConnection(deps(), id)]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(await disabledEvents(id)).toBe(1);
  });

  it('a disable and a delete at once announce it once', async () => {
    const id = await activeConnectionWithWebhook();
    await atOnce(id, [() => disableConnection(deps(), id), () => deleteConnection(deps(), id)]);
    expect(await disabledEvents(id)).toBe(1);
  });

  it('one after the other, the second announces nothing', async () => {
    const id = await activeConnectionWithWebhook();
    await disableConnection(deps(), id);
    await disableConnection(deps(), id);
    expect(await disabledEvents(id)).toBe(1);
  });
});
