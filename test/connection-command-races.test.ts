// Connection commands racing a write of the same row (a disable, a purge's delete, another update):
// a pause, resume or update decides from the row as it is when it writes, never from a read taken
// before the other write committed. Real Postgres; Temporal is an in-memory stand-in that records
// the workflows started (a signal-with-start to a stopped workflow would start it again). Each case
// holds the other write's transaction open until the command is seen waiting for the row's lock
// (pg_blocking_pids over pg_stat_activity), then commits it.
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { PoolClient } from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { reconcileConnections } from '../activities/reconcile-connections';
import { pauseConnection, resumeConnection, updateConnection, writeDisabled } from '../commands/connections';
import type { CommandDeps } from '../commands/deps';
import * as connections from '../db/models/connections';
import { sealCredentials } from '../lib/credentials';
import { connectionWorkflowId } from '../temporal/ids';
import { useTestDatabase } from './helpers/database';
import { feedCursors } from '../lib/feed-cursors';
import { TEST_KEYRING, sealedTestCredentials, testActivityDeps, testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();
beforeEach(async () => {
  await db.pool.query('truncate connections cascade');
});

const commandDeps = (temporal: Client): CommandDeps => testCommandDeps(db.pool, temporal);

async function connection(opts: { provider?: string; config?: Record<string, unknown>; credentials?: Record<string, unknown> } = {}): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials, metadata)
     values ($1, 'acme', $2, $3, $4, $5, '{"sync": {"interval_seconds": 900}}')`,
    [id, opts.provider ?? 'demo', `app_${id.slice(0, 8)}`, opts.config ?? { resource_types: ['issues'] }, sealedTestCredentials(id, opts.credentials ?? null)],
  );
  return id;
}

/**
 * Runs `write` in a transaction, starts `command` while it is open, waits until the command waits
 * for a lock that transaction holds, commits, and answers how the command ended.
 */
async function racing<T>(write: (tx: PoolClient) => Promise<unknown>, command: () => Promise<T>): Promise<{ value: T } | { error: unknown }> {
  const holder = await db.pool.connect();
  try {
    await holder.query('begin');
    await write(holder);
    const { rows: [me] } = await holder.query<{ pid: number }>('select pg_backend_pid() as pid');
    const running = command().then((value) => ({ value }), (error: unknown) => ({ error }));
    for (let i = 0; ; i++) {
      const { rows } = await db.pool.query('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [me!.pid]);
      if (rows.length > 0) break;
      if (i > 500) throw new Error('the command never waited for the row');
      await new Promise((r) => setTimeout(r, 20));
    }
    await holder.query('commit');
    return await running;
  } finally {
    holder.release();
  }
}

async function stored(id: string) {
  const { rows } = await db.pool.query<{ status: string; interval: number | null; has_credentials: boolean }>(
    `select status, (metadata -> 'sync' ->> 'interval_seconds')::int as interval, credentials is not null as has_credentials from connections where id = $1`,
    [id],
  );
  return rows[0];
}

describe('a pause racing a disable', () => {
  it('never leaves a connection that was just disabled paused (alive again) instead of disabled', async () => {
    const conn = await connection();
    const temporal = fakeTemporal(new Set([connectionWorkflowId(conn)]));
    const row = (await connections.findConnection(db.pool, conn))!;
    // A disable (POST /connections/:id/disable, or a DELETE's purge transaction) is writing the row
    // while POST /connections/:id/pause, having read it active, writes it paused.
    const paused = await racing((tx) => writeDisabled(tx, row, feedCursors(TEST_KEYRING)), () => pauseConnection(commandDeps(temporal.client), conn));
    expect(paused).toMatchObject({ error: { code: 'connection_disabled' } });
    // The disable's stop step (after its commit) cancels the connection's workflow; the next
    // reconcile tick must not start it again.
    temporal.running.delete(connectionWorkflowId(conn));
    temporal.started.length = 0;
    await reconcileConnections(testActivityDeps({ pool: db.pool, temporal: temporal.client }).deps)({ at: Date.now() });
    expect({ status: (await stored(conn))!.status, restarted: temporal.started.includes(connectionWorkflowId(conn)) }).toEqual({ status: 'disabled', restarted: false });
  });
});

describe('a schedule change racing a disable', () => {
  it('is refused as for a disabled connection: it neither stores the schedule nor starts the stopped workflow', async () => {
    const conn = await connection();
    const temporal = fakeTemporal();
    const row = (await connections.findConnection(db.pool, conn))!;
    const changed = await racing((tx) => writeDisabled(tx, row, feedCursors(TEST_KEYRING)), () => updateConnection(commandDeps(temporal.client), conn, { schedule: { interval_seconds: 3600 } }));
    expect(changed).toMatchObject({ error: { code: 'connection_disabled' } });
    expect(await stored(conn)).toMatchObject({ status: 'disabled', interval: 900 });
    expect(temporal.started).toEqual([]);
  });
});

describe('a config change racing another update that moved the provider origin with new credentials', () => {
  it('clears those credentials when it moves the origin back: a token is never kept for a host it was not given for', async () => {
    const config = { base_url: 'https://api.github.com', repositories: ['acme/app'] };
    const conn = await connection({ provider: 'github', config, credentials: { token: 'ghp_for_github_com_0000000000' } });
    const temporal = fakeTemporal();
    // Another PATCH moves the connection to GitHub Enterprise with a token for it, while this one,
    // having read the connection on api.github.com, changes per_page there.
    const enterprise = { ...config, base_url: 'https://ghe.example.com/api/v3' };
    const changed = await racing(
      (tx) => connections.updateConnection(tx, conn, { config: enterprise, sealedCredentials: sealCredentials(TEST_KEYRING, conn, { token: 'ghp_for_enterprise_00000000000' }) }),
      () => updateConnection(commandDeps(temporal.client), conn, { config: { ...config, per_page: 50 } }),
    );
    expect(changed).toMatchObject({ value: { has_credentials: false, config: { base_url: 'https://api.github.com' } } });
    expect(await stored(conn)).toMatchObject({ has_credentials: false });
  });
});

describe('a resume racing the deletion of the connection row (the purge\'s last step)', () => {
  it('answers not found and starts no workflow for the deleted connection', async () => {
    const conn = await connection();
    const temporal = fakeTemporal();
    const resumed = await racing((tx) => tx.query('delete from connections where id = $1', [conn]), () => resumeConnection(commandDeps(temporal.client), conn));
    expect(resumed).toMatchObject({ error: { code: 'not_found' } });
    expect(temporal.started).toEqual([]);
  });
});
