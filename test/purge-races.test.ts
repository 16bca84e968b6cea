// Deleting a connection's rows and the retention clean-up, racing other writers, against a real
// Postgres. Temporal is not reached (a start that fails is the reconcile tick's to make).
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActivityDeps } from '../activities/deps';
import { purgeConnectionBatch } from '../activities/purge-connection';
import { deleteOldJobs } from '../activities/delete-old-jobs';
import { createConnection } from '../commands/connections';
import { lockOAuthGrantOf, updateConnection } from '../db/models/connections';
import { deleteConnection } from '../commands/purges';
import { listChanges } from '../commands/records';
import { redeliver } from '../commands/webhooks';
import { completeAuthorization, createOAuthApp, startAuthorization } from '../commands/oauth';
import { CommandRefused } from '../commands/errors';
import { completePurge, deleteConnectionRow, deleteRecordsBatch, deleteWebhookEventsBatch, insertPurge } from '../db/models/purges';
import { purgeTombstonesBatch } from '../db/models/records';
import { deleteOldEventsBatch } from '../db/models/webhooks';
import type { Queryable } from '../db/queryable';
import type { Pool } from '../db/pool';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';
import { eventually } from './helpers/worker';

/** A Temporal client whose every start fails as an unreachable server's would. */
const unreachable = { workflow: { start: () => Promise.reject(new Error('unreachable')) } } as unknown as Client;

describe('purge and retention races', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** Sessions of this database waiting for a lock. */
  async function lockWaiters(): Promise<number> {
    const { rows } = await db.pool.query<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
    );
    return rows[0]!.n;
  }

  /** A webhook with one event (of connection `connectionId`, written 40 days ago) and its failed delivery. */
  async function failedDelivery(tenant: string, connectionId: string | null): Promise<{ webhookId: string; deliveryId: string }> {
    const { rows } = await db.pool.query<{ webhook_id: string; delivery_id: string }>(
      `with w as (insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'https://example.com/hook', '{sync.completed}', 'whsec_x') returning id),
            e as (insert into webhook_events (tenant_id, connection_id, event_type, payload, created_at)
                  values ($1, $2, 'sync.completed', '{}', now() - interval '40 days') returning id)
       insert into webhook_deliveries (webhook_id, event_id, status, attempts, finished_at)
       select w.id, e.id, 'failed', 3, now() from w, e returning webhook_id, id as delivery_id`,
      [tenant, connectionId],
    );
    return { webhookId: rows[0]!.webhook_id, deliveryId: rows[0]!.delivery_id };
  }

  /**
   * Runs a redelivery of `deliveryId` and `remove` (a delete of events) so that the redelivery has
   * claimed the delivery but not yet committed when `remove` reaches it; answers the redelivery's
   * outcome and the delivery's status afterwards (null: gone).
   */
  async function raceRedelivery(tenant: string, webhookId: string, deliveryId: string, remove: () => Promise<number>) {
    const deps = testCommandDeps(db.pool, unreachable);
    // Another of the tenant's counted calls holds its limit lock: the redelivery locks the delivery, then waits for it.
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock($1, hashtext($2))', [0x7e17, tenant]);
      const before = await lockWaiters();
      const redelivery = redeliver(deps, webhookId, deliveryId).then(
        () => 'accepted',
        (err: unknown) => (err instanceof CommandRefused ? err.code : String(err)),
      );
      await eventually(async () => ((await lockWaiters()) > before ? true : undefined));
      const removal = remove();
      // The delete reached the delivery the redelivery holds.
      await eventually(async () => ((await lockWaiters()) > before + 1 ? true : undefined));
      await holder.query('commit');
      const [outcome] = await Promise.all([redelivery, removal]);
      const { rows } = await db.pool.query<{ status: string }>('select status from webhook_deliveries where id = $1', [deliveryId]);
      return { outcome, status: rows[0]?.status ?? null };
    } finally {
      holder.release();
    }
  }

  it('the retention clean-up never deletes an event whose redelivery it raced and that was accepted', async () => {
    const tenant = `retention-redeliver-${randomUUID()}`;
    const { webhookId, deliveryId } = await failedDelivery(tenant, null);
    const result = await raceRedelivery(tenant, webhookId, deliveryId, () => deleteOldEventsBatch(db.pool, new Date(Date.now() - 30 * 86_400_000), 100));
    // Accepted (202) means a delivery that is pending and will be attempted again.
    expect(result).toEqual({ outcome: 'accepted', status: 'pending' });
    const { rows } = await db.pool.query('select 1 from webhook_deliveries d join webhook_events e on e.id = d.event_id where d.id = $1', [deliveryId]);
    expect(rows).toHaveLength(1);
  });

  it("a purge's delete of the connection's events never deletes one whose redelivery it raced and that was accepted", async () => {
    const tenant = `purge-redeliver-${randomUUID()}`;
    const connectionId = randomUUID();
    const { webhookId, deliveryId } = await failedDelivery(tenant, connectionId);
    const result = await raceRedelivery(tenant, webhookId, deliveryId, async () => (await deleteWebhookEventsBatch(db.pool, connectionId, 100)).deleted);
    expect(result).toEqual({ outcome: 'accepted', status: 'pending' });
  });

  it("a connection's purge and the retention clean-up deleting the same events (their deliveries gone with their webhook) both complete, never deadlocked", async () => {
    const tenant = `purge-retention-deadlock-${randomUUID()}`;
    const connectionId = randomUUID();
    // Three old events of the connection, in heap order p, h, q and in id order q, h, p.
    const [q, h, p] = ['00000000-0000-4000-8000-00000000d001', '00000000-0000-4000-8000-00000000d002', '00000000-0000-4000-8000-00000000d003'];
    const { rows: hooks } = await db.pool.query<{ id: string }>(
      `insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'https://example.com/hook', '{sync.completed}', 'whsec_x') returning id`,
      [tenant],
    );
    await db.pool.query(
      `insert into webhook_events (id, tenant_id, connection_id, event_type, payload, created_at)
       select id, $1, $2, 'sync.completed', '{}', now() - interval '40 days' from unnest($3::uuid[]) id`,
      [tenant, connectionId, [p, h, q]],
    );
    await db.pool.query(`insert into webhook_deliveries (webhook_id, event_id, status, attempts, finished_at) select $1, id, 'delivered', 1, now() from unnest($2::uuid[]) id`, [hooks[0]!.id, [p, h, q]]);
    // The webhook is deleted: its deliveries go with it, its events stay until they are cleaned up.
    await db.pool.query('delete from webhooks where id = $1', [hooks[0]!.id]);
    /**
     * Runs `remove` in its own transaction with the planner settings `plan` (on large tables the
     * purge and the clean-up reach their events by different plans, so in different orders; here,
     * on three rows, the purge scans the heap (p, h, q) and the clean-up the primary key (q, h, p)).
     */
    const inTransaction = async (plan: string, remove: (client: Queryable) => Promise<number>) => {
      const client = await db.pool.connect();
      try {
        await client.query('begin');
        await client.query(plan);
        const n = await remove(client);
        await client.query('commit');
        return `deleted ${n}`;
      } catch (err) {
        await client.query('rollback');
        return String(err);
      } finally {
        client.release();
      }
    };
    const holder = await db.pool.connect();
    let purged: Promise<string>;
    let cleaned: Promise<string>;
    try {
      // Another transaction holds h: the purge, having taken p, waits for it, and so does the clean-up, having taken q.
      await holder.query('begin');
      await holder.query('select 1 from webhook_events where id = $1 for update', [h]);
      const before = await lockWaiters();
      purged = inTransaction('set local enable_indexscan = off; set local enable_bitmapscan = off', async (client) => (await deleteWebhookEventsBatch(client, connectionId, 100)).deleted);
      await eventually(async () => ((await lockWaiters()) > before ? true : undefined));
      cleaned = inTransaction('set local enable_seqscan = off; set local enable_hashjoin = off; set local enable_nestloop = off', (client) =>
        deleteOldEventsBatch(client, new Date(Date.now() - 30 * 86_400_000), 100));
      await eventually(async () => ((await lockWaiters()) > before + 1 ? true : undefined));
      await holder.query('commit');
    } finally {
      holder.release();
    }
    const outcomes = [await purged, await cleaned];
    const { rows: left } = await db.pool.query('select id from webhook_events where connection_id = $1', [connectionId]);
    // Between them they delete the three events, each once, neither killed by Postgres.
    expect({ outcomes: outcomes.sort(), left }).toEqual({ outcomes: ['deleted 0', 'deleted 3'], left: [] });
  });

  it("a feed reader never gets a page without the records a connection's purge is deleting: refused (409 purge_in_progress) once the purge is open", async () => {
    const tenant = `purge-feed-${randomUUID()}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key) values ($1, 'github', 'feed') returning id`,
      [tenant],
    );
    const connectionId = rows[0]!.id;
    for (const n of ['1', '2', '3']) {
      await db.pool.query(`insert into records (connection_id, resource_type, external_id, data) values ($1, 'issues', $2, '{}')`, [connectionId, n]);
    }
    const deps = testCommandDeps(db.pool, unreachable);
    const first = await listChanges(deps, connectionId, { limit: 1 });
    expect(first.changes.map((c) => c.external_id)).toEqual(['1']);
    // The connection is deleted: its purge is recorded, and its first batch deletes some of its records (no tombstones).
    const purge = await insertPurge(db.pool, connectionId, tenant);
    await deleteRecordsBatch(db.pool, connectionId, 2);
    const refusal = (after?: typeof first.next) =>
      listChanges(deps, connectionId, { after, limit: 10 }).then(
        (page) => ({ answered: page.changes.map((c) => c.external_id) }),
        (err: unknown) => (err instanceof CommandRefused ? { code: err.code, details: err.details } : { error: String(err) }),
      );
    // Neither the reader following its cursor nor one starting again is told a partial feed is the whole of it.
    expect(await refusal(first.next)).toEqual({ code: 'purge_in_progress', details: { purge_id: purge!.id } });
    expect(await refusal()).toEqual({ code: 'purge_in_progress', details: { purge_id: purge!.id } });
  });

  it("creating a connection with the app key of one being deleted is refused as purge_in_progress (with the purge's id), not as a taken app key", async () => {
    const { request, purge } = await deletedConnection(`purge-app-key-${randomUUID()}`);
    const again = await createConnection(testCommandDeps(db.pool, fakeTemporal().client), request).then(
      (row) => ({ created: row.id }),
      (err: unknown) => (err instanceof CommandRefused ? { code: err.code, details: err.details } : { error: String(err) }),
    );
    expect(again).toEqual({ code: 'purge_in_progress', details: { purge_id: purge.id } });
  });

  /**
   * `pool`, but each time a connection's insert finds its (tenant, app key) taken (its statement
   * answered no row), `hook` runs before the insert's caller hears so.
   */
  function onTakenAppKey(pool: Pool, hook: () => Promise<void>): Pool {
    const watched = <T extends object>(target: T, connect?: () => Promise<pg.PoolClient>): T =>
      new Proxy(target, {
        get(t, key) {
          if (key === 'connect' && connect) return async () => watched(await connect());
          const value: unknown = Reflect.get(t, key, t);
          if (typeof value !== 'function') return value;
          if (key !== 'query') return value.bind(t);
          return async (...args: unknown[]) => {
            const result = (await (value as (...a: unknown[]) => Promise<pg.QueryResult>).apply(t, args)) as pg.QueryResult;
            const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text;
            if (/^\s*insert into connections\b/.test(text) && result.rowCount === 0) await hook();
            return result;
          };
        },
      });
    return watched(pool, () => pool.connect());
  }

  /** A connection created and then deleted (its purge recorded, not yet run), and the request that created it. */
  async function deletedConnection(tenant: string) {
    const deps = testCommandDeps(db.pool, fakeTemporal().client);
    const request = {
      tenantId: tenant, appKey: 'crm', provider: 'demo', config: { records_per_resource: 20, page_size: 10 },
      credentials: null, schedule: null, status: 'paused' as const,
    };
    const old = await createConnection(deps, request);
    const purge = await deleteConnection(deps, old.id);
    return { request, old, purge };
  }

  const created = (work: Promise<{ id: string; app_key: string }>) =>
    work.then(
      (row) => ({ created: row.app_key }),
      (err: unknown) => (err instanceof CommandRefused ? { code: err.code, details: err.details } : { error: String(err) }),
    );

  it("creating a connection with the app key of one whose purge completes just after the create found the key taken creates it: the key is free, never answered as taken", async () => {
    const { request, old, purge } = await deletedConnection(`purge-app-key-freed-${randomUUID()}`);
    // The purge's last transaction (the connection row deleted, the purge completed) commits
    // between the create's insert and its reading of who holds the key.
    const deps = testCommandDeps(
      onTakenAppKey(db.pool, async () => {
        const tx = await db.pool.connect();
        try {
          await tx.query('begin');
          await deleteConnectionRow(tx, old.id);
          await completePurge(tx, purge.id, new Date());
          await tx.query('commit');
        } finally {
          tx.release();
        }
      }),
      fakeTemporal().client,
    );
    expect(await created(createConnection(deps, request))).toEqual({ created: 'crm' });
  });

  it("creating a connection with the app key of one whose purge's last transaction is under way waits for it, then creates it: never a purge named that has completed", async () => {
    const { request, old, purge } = await deletedConnection(`purge-app-key-ending-${randomUUID()}`);
    // The purge's last transaction has deleted the connection row and completed the purge, not yet
    // committed, when the create's insert has found the key taken.
    const holder = await db.pool.connect();
    let outcome: Promise<unknown>;
    try {
      let before = 0;
      let conflicted!: () => void;
      const conflict = new Promise<void>((resolve) => (conflicted = resolve));
      const deps = testCommandDeps(
        onTakenAppKey(db.pool, async () => {
          await holder.query('begin');
          await deleteConnectionRow(holder, old.id);
          await completePurge(holder, purge.id, new Date());
          before = await lockWaiters();
          conflicted();
        }),
        fakeTemporal().client,
      );
      let settled = false;
      outcome = created(createConnection(deps, request)).finally(() => (settled = true));
      await conflict;
      // The create has answered, or waits for the purge's transaction.
      await eventually(async () => (settled || (await lockWaiters()) > before ? true : undefined));
      await holder.query('commit');
    } finally {
      holder.release();
    }
    const { rows } = await db.pool.query('select status from connection_purges where id = $1', [purge.id]);
    expect({ outcome: await outcome, purge: rows[0] }).toEqual({ outcome: { created: 'crm' }, purge: { status: 'completed' } });
  });

  it('a DELETE that read the connection just before its purge deleted it answers 404, never a second purge of a connection that is gone', async () => {
    const tenant = `purge-twice-${randomUUID()}`;
    const temporal = fakeTemporal();
    const deps = testCommandDeps(db.pool, temporal.client);
    const conn = await createConnection(deps, {
      tenantId: tenant, appKey: 'crm', provider: 'demo', config: { records_per_resource: 20, page_size: 10 },
      credentials: null, schedule: null, status: 'paused',
    });
    const first = await deleteConnection(deps, conn.id);
    // The second DELETE has read the connection and waits for the purge lock (held here) while the
    // first's purge deletes the connection row and completes, as its last step does.
    const holder = await db.pool.connect();
    let second: Promise<unknown>;
    try {
      await holder.query('begin');
      await holder.query(`select pg_advisory_xact_lock(hashtextextended('synctide:connection-purge:' || $1::text, 0))`, [conn.id]);
      const before = await lockWaiters();
      second = deleteConnection(deps, conn.id).then(
        (purge) => ({ purge: purge.id }),
        (err: unknown) => (err instanceof CommandRefused ? { code: err.code } : { error: String(err) }),
      );
      await eventually(async () => ((await lockWaiters()) > before ? true : undefined));
      await deleteConnectionRow(db.pool, conn.id);
      await completePurge(db.pool, first.id, new Date());
      await holder.query('commit');
    } finally {
      holder.release();
    }
    expect(await second).toEqual({ code: 'not_found' });
    const { rows } = await db.pool.query('select id, status from connection_purges where connection_id = $1', [conn.id]);
    expect(rows).toEqual([{ id: first.id, status: 'completed' }]);
  });

  it("a purge run cut off mid-way (its database session killed) and run again counts every row it deleted", async () => {
    const tenant = `purge-resume-${randomUUID()}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'github', 'resume', 'disabled') returning id`,
      [tenant],
    );
    const connectionId = rows[0]!.id;
    for (const n of ['1', '2', '3']) {
      await db.pool.query(`insert into records (connection_id, resource_type, external_id, data) values ($1, 'issues', $2, '{}')`, [connectionId, n]);
    }
    const purge = (await insertPurge(db.pool, connectionId, tenant))!;
    const run = () => new MockActivityEnvironment({ attempt: 1 }).run(purgeConnectionBatch({ pool: db.pool } as ActivityDeps), { purgeId: purge.id, connectionId });
    // The first run's session is killed once it has deleted the records, before it counted them
    // (the count waits for the purge row, held here), as a worker that dies there leaves it.
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from connection_purges where id = $1 for update', [purge.id]);
      const first = run().then(() => 'completed', () => 'cut off');
      const pid = await eventually(async () => {
        const { rows: waiting } = await db.pool.query<{ pid: number }>(
          `select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%deleted_rows%'`,
        );
        return waiting[0]?.pid;
      });
      await db.pool.query('select pg_terminate_backend($1)', [pid]);
      expect(await first).toBe('cut off');
      await holder.query('commit');
    } finally {
      holder.release();
    }
    // The workflow's retry runs it again.
    expect(await run()).toMatchObject({ done: true });
    const done = await db.pool.query('select status, deleted_rows from connection_purges where id = $1', [purge.id]);
    // Three records and the connection row.
    expect(done.rows[0]).toEqual({ status: 'completed', deleted_rows: '4' });
  });

  /** Two disabled connections of tenant `tenant` sharing one OAuth grant, each with an open purge. */
  async function sharedGrant(tenant: string): Promise<{ grantId: string; purgesOf: { purgeId: string; connectionId: string }[] }> {
    const { rows: apps } = await db.pool.query<{ id: string }>(
      `insert into oauth_apps (tenant_id, name, client_id, client_secret, authorize_url, token_url, redirect_uri)
       values ($1, 'app', 'client', 'sealed-secret', 'https://example.com/a', 'https://example.com/t', 'https://example.com/cb') returning id`,
      [tenant],
    );
    const appId = apps[0]!.id;
    const { rows: grants } = await db.pool.query<{ id: string }>(
      `insert into oauth_grants (tenant_id, oauth_app_id, credentials) values ($1, $2, to_jsonb('sealed-tokens'::text)) returning id`,
      [tenant, appId],
    );
    const grantId = grants[0]!.id;
    const purgesOf: { purgeId: string; connectionId: string }[] = [];
    for (const key of ['a', 'b']) {
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status, credential_kind, oauth_app_id, oauth_grant_id)
         values ($1, 'github', $2, 'disabled', 'oauth2', $3, $4) returning id`,
        [tenant, key, appId, grantId],
      );
      const purge = (await insertPurge(db.pool, rows[0]!.id, tenant))!;
      purgesOf.push({ purgeId: purge.id, connectionId: rows[0]!.id });
    }
    return { grantId, purgesOf };
  }

  const runPurge = (input: { purgeId: string; connectionId: string }) =>
    new MockActivityEnvironment({ attempt: 1 }).run(purgeConnectionBatch({ pool: db.pool } as ActivityDeps), input);

  it('two connections sharing an OAuth grant, purged at once: the grant and its tokens go with the last of them', async () => {
    const tenant = `purge-grant-${randomUUID()}`;
    const { grantId, purgesOf } = await sharedGrant(tenant);
    // The first purge's last transaction has deleted its connection row and waits (for its purge
    // row, held here) before it commits, while the second purge runs.
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from connection_purges where id = $1 for update', [purgesOf[0]!.purgeId]);
      const before = await lockWaiters();
      const first = runPurge(purgesOf[0]!);
      await eventually(async () => ((await lockWaiters()) > before ? true : undefined));
      let secondDone = false;
      const second = runPurge(purgesOf[1]!).finally(() => {
        secondDone = true;
      });
      // The second has finished, or waits for the first.
      await eventually(async () => (secondDone || (await lockWaiters()) > before + 1 ? true : undefined));
      await holder.query('commit');
      await Promise.all([first, second]);
    } finally {
      holder.release();
    }
    const { rows: left } = await db.pool.query('select id from oauth_grants where id = $1', [grantId]);
    expect(left).toEqual([]);
  });

  it("a connection leaving its OAuth grant (new credentials) while the grant's other connection is purged: the grant goes with the last of them", async () => {
    const tenant = `leave-grant-${randomUUID()}`;
    const { grantId, purgesOf } = await sharedGrant(tenant);
    const [gone, leaving] = purgesOf as [{ purgeId: string; connectionId: string }, { purgeId: string; connectionId: string }];
    await db.pool.query('delete from connection_purges where id = $1', [leaving.purgeId]);
    // A PATCH gives one connection token credentials (in its transaction, not yet committed)
    // while the other's purge runs to its end.
    const patch = await db.pool.connect();
    try {
      await patch.query('begin');
      await updateConnection(patch, leaving.connectionId, { sealedCredentials: 'sealed-token' });
      const before = await lockWaiters();
      let purged = false;
      const purge = runPurge(gone).finally(() => {
        purged = true;
      });
      // The purge has finished, or waits for the PATCH.
      await eventually(async () => (purged || (await lockWaiters()) > before ? true : undefined));
      await patch.query('commit');
      await purge;
    } finally {
      patch.release();
    }
    const { rows: left } = await db.pool.query('select id from oauth_grants where id = $1', [grantId]);
    expect(left).toEqual([]);
  });

  it("the retention's tombstone purge and a connection's deletion, deleting the connection's tombstones at once, both complete", async () => {
    const tenant = `purge-tombstones-${randomUUID()}`;
    const connection = async (appKey: string) =>
      (await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', $2, 'disabled') returning id`, [tenant, appKey])).rows[0]!.id;
    const gone = await connection('gone');
    const other = await connection('other');
    // Live records enough that the purge finds tombstones by their index (oldest first) while the
    // deletion takes its connection's records in key order: opposite orders on the deleted one's.
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, change) select $1, 'items', 'live-' || g, '{}', now(), 'insert' from generate_series(1, 5000) g`,
      [other],
    );
    const tombstone = (connectionId: string, externalId: string, days: number) =>
      db.pool.query(
        `insert into records (connection_id, resource_type, external_id, data, synced_at, deleted_at, change) values ($1, 'issues', $2, '{}', now(), now() - make_interval(days => $3), 'delete')`,
        [connectionId, externalId, days],
      );
    await tombstone(gone, 'b', 60);
    await tombstone(other, 'm', 50);
    await tombstone(gone, 'a', 40);
    await db.pool.query('analyze records');
    const purge = await insertPurge(db.pool, gone, tenant);
    const outcome = (work: Promise<unknown>) => work.then(() => 'done', (err: unknown) => String(err));
    // Another transaction holds the other connection's tombstone: the purge, having taken the
    // deleted connection's oldest, waits for it (or passes it by) while the deletion starts.
    const holder = await db.pool.connect();
    let purged: Promise<string>;
    let deleted: Promise<string>;
    try {
      await holder.query('begin');
      await holder.query(`select 1 from records where connection_id = $1 and external_id = 'm' for update`, [other]);
      const before = await lockWaiters();
      let purgeDone = false;
      purged = outcome(purgeTombstonesBatch(db.pool, new Date(Date.now() - 30 * 86_400_000), 1000)).finally(() => {
        purgeDone = true;
      });
      await eventually(async () => (purgeDone || (await lockWaiters()) > before ? true : undefined));
      let deletionDone = false;
      deleted = outcome(runPurge({ purgeId: purge!.id, connectionId: gone })).finally(() => {
        deletionDone = true;
      });
      // The deletion has finished, or waits for the purge.
      await eventually(async () => (deletionDone || (await lockWaiters()) > before + 1 ? true : undefined));
      await holder.query('commit');
    } finally {
      holder.release();
    }
    expect({ purge: await purged, deletion: await deleted }).toEqual({ purge: 'done', deletion: 'done' });
    const { rows } = await db.pool.query('select c.id from connections c where c.id = $1 union all select r.connection_id from records r where r.connection_id = $1', [gone]);
    expect(rows).toEqual([]);
  });
  it("a connection's deletion whose full batches lose rows to the retention clean-up still deletes (and counts) every record and event of it", async () => {
    const tenant = `purge-short-batch-${randomUUID()}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'short', 'disabled') returning id`,
      [tenant],
    );
    const connectionId = rows[0]!.id;
    // 1,500 tombstones and 1,500 finished events, 400 days old, oldest first (in key, position and heap order).
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, deleted_at, change)
       select $1, 'issues', lpad(g::text, 5, '0'), '{}', now(), now() - interval '400 days' + make_interval(secs => g), 'delete' from generate_series(1, 1500) g`,
      [connectionId],
    );
    await db.pool.query(
      `insert into webhook_events (tenant_id, connection_id, event_type, payload, created_at)
       select $1, $2, 'sync.completed', '{}', now() - interval '400 days' + make_interval(secs => g) from generate_series(1, 1500) g`,
      [tenant, connectionId],
    );
    const purge = (await insertPurge(db.pool, connectionId, tenant))!;
    // The retention clean-up deletes the 10 oldest of each, in transactions not yet committed, which
    // the deletion's first batch of each (1,000 rows) takes too.
    const cutoff = new Date(Date.now() - 400 * 86_400_000 + 10_500);
    const tombstones = await db.pool.connect();
    const events = await db.pool.connect();
    let run: Promise<unknown>;
    try {
      await tombstones.query('begin');
      expect(await purgeTombstonesBatch(tombstones, cutoff, 1000)).toBe(10);
      await events.query('begin');
      expect(await deleteOldEventsBatch(events, cutoff, 1000)).toBe(10);
      const before = await lockWaiters();
      run = runPurge({ purgeId: purge.id, connectionId });
      // The deletion's batch of records waits for the clean-up's tombstones, then its batch of events for its events.
      await eventually(async () => ((await lockWaiters()) > before ? true : undefined));
      await tombstones.query('commit');
      await eventually(async () => ((await lockWaiters()) > before ? true : undefined));
      await events.query('commit');
      await run;
    } finally {
      tombstones.release();
      events.release();
    }
    const left = await db.pool.query<{ records: number; events: number }>(
      `select (select count(*)::int from records where connection_id = $1) as records,
              (select count(*)::int from webhook_events where connection_id = $1) as events`,
      [connectionId],
    );
    const done = await db.pool.query('select status, deleted_rows from connection_purges where id = $1', [purge.id]);
    // 1,490 records, 1,490 events and the connection row, each counted.
    expect({ left: left.rows[0], purge: done.rows[0] }).toEqual({ left: { records: 0, events: 0 }, purge: { status: 'completed', deleted_rows: '2981' } });
  });
  it('an OAuth connect flow completing while its connection is deleted (the purge deleting the row) leaves no grant with tokens behind', async () => {
    const tenant = `purge-oauth-${randomUUID()}`;
    // A token endpoint that answers the code exchange once released.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let exchanged = false;
    const server = createServer((req, res) => {
      exchanged = true;
      req.resume();
      void gate.then(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ access_token: 'access-secret', refresh_token: 'refresh-secret', token_type: 'bearer', expires_in: 3600 }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const holder = await db.pool.connect();
    try {
      const deps = testCommandDeps(db.pool, unreachable);
      const app = await createOAuthApp(deps, {
        tenantId: tenant, name: 'idp', clientId: 'client', clientSecret: 'client-secret',
        authorizeUrl: `${base}/authorize`, tokenUrl: `${base}/token`, redirectUri: 'https://client.example/cb', scopes: [],
      });
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'http', 'flow', 'needs_reauth') returning id`,
        [tenant],
      );
      const connectionId = rows[0]!.id;
      const start = await startAuthorization(deps, connectionId, { appId: app.id });
      const state = new URL(start.authorization_url).searchParams.get('state')!;
      // The callback has consumed its state and waits for the code exchange ...
      const callback = completeAuthorization(deps, { state, code: 'the-code' }).then(
        (done) => ({ done }),
        (err: unknown) => (err instanceof CommandRefused ? { code: err.code } : { error: String(err) }),
      );
      await eventually(async () => (exchanged ? true : undefined));
      // ... while the purge's last transaction deletes the connection row (not yet committed).
      await holder.query('begin');
      await deleteConnectionRow(holder, connectionId);
      const before = await lockWaiters();
      release();
      // The callback has answered, or waits for the deletion.
      let answered = false;
      void callback.finally(() => (answered = true));
      await eventually(async () => (answered || (await lockWaiters()) > before ? true : undefined));
      await holder.query('commit');
      expect(await callback).toEqual({ code: 'not_found' });
      const { rows: grants } = await db.pool.query('select id from oauth_grants where tenant_id = $1', [tenant]);
      expect(grants).toEqual([]);
    } finally {
      holder.release();
      await new Promise((resolve) => server.close(resolve));
    }
  });
  it("a connection created to share the grant of one whose purge is deleting it is refused 409 purge_in_progress, not a 500", async () => {
    const tenant = `purge-share-${randomUUID()}`;
    const { purgesOf } = await sharedGrant(tenant);
    const [source, other] = purgesOf as [{ purgeId: string; connectionId: string }, { purgeId: string; connectionId: string }];
    // Only the source is being deleted: the other connection leaves the grant to it alone.
    await db.pool.query('delete from connection_purges where id = $1', [other.purgeId]);
    await db.pool.query('delete from connections where id = $1', [other.connectionId]);
    const deps = testCommandDeps(db.pool, fakeTemporal().client);
    const holder = await db.pool.connect();
    let created: Promise<unknown>;
    try {
      // The purge's last transaction has deleted the source row (and with it its grant), not yet committed.
      await holder.query('begin');
      await lockOAuthGrantOf(holder, source.connectionId);
      await deleteConnectionRow(holder, source.connectionId);
      const before = await lockWaiters();
      let settled = false;
      created = createConnection(deps, {
        tenantId: tenant, appKey: 'sharer', provider: 'http',
        config: { base_url: 'http://127.0.0.1:9', auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } },
        credentials: { kind: 'oauth2', grant_from_connection: source.connectionId }, schedule: null, status: 'paused',
      }).then(
        (row) => ({ created: row.id }),
        (err: unknown) => (err instanceof CommandRefused ? { code: err.code, details: err.details } : { error: String(err) }),
      ).finally(() => (settled = true));
      // The creation has answered, or waits for the deletion.
      await eventually(async () => (settled || (await lockWaiters()) > before ? true : undefined));
      await holder.query('commit');
    } finally {
      holder.release();
    }
    expect(await created).toEqual({ code: 'purge_in_progress', details: { purge_id: source.purgeId } });
  });
  it("an OAuth connect flow completing after its connection's deletion began is refused 409 purge_in_progress: no code exchanged, no grant stored", async () => {
    const tenant = `purge-callback-${randomUUID()}`;
    let exchanged = 0;
    const server = createServer((req, res) => {
      exchanged += 1;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: 'access-secret', refresh_token: 'refresh-secret', token_type: 'bearer', expires_in: 3600 }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const deps = testCommandDeps(db.pool, fakeTemporal().client);
      const app = await createOAuthApp(deps, {
        tenantId: tenant, name: 'idp', clientId: 'client', clientSecret: 'client-secret',
        authorizeUrl: `${base}/authorize`, tokenUrl: `${base}/token`, redirectUri: 'https://client.example/cb', scopes: [],
      });
      const conn = await createConnection(deps, {
        tenantId: tenant, appKey: 'flow', provider: 'http',
        config: { base_url: 'http://127.0.0.1:9', auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } },
        credentials: null, schedule: null, status: 'paused',
      });
      // A person starts the connect flow, then the connection is deleted before they come back.
      const start = await startAuthorization(deps, conn.id, { appId: app.id });
      const purge = await deleteConnection(deps, conn.id);
      const state = new URL(start.authorization_url).searchParams.get('state')!;
      const outcome = await completeAuthorization(deps, { state, code: 'the-code' }).then(
        (done) => ({ done }),
        (err: unknown) => (err instanceof CommandRefused ? { code: err.code, details: err.details } : { error: String(err) }),
      );
      const { rows: grants } = await db.pool.query('select id from oauth_grants where tenant_id = $1', [tenant]);
      expect({ outcome, exchanged, grants }).toEqual({ outcome: { code: 'purge_in_progress', details: { purge_id: purge.id } }, exchanged: 0, grants: [] });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
  it('two connections sharing a rate budget, purged at once: the budget goes with the last of them', async () => {
    const tenant = `purge-budget-${randomUUID()}`;
    const fingerprint = `fp-${randomUUID()}`;
    await db.pool.query(`insert into rate_budgets (fingerprint, provider, tenant_id) values ($1, 'github', $2)`, [fingerprint, tenant]);
    const purgesOf: { purgeId: string; connectionId: string }[] = [];
    for (const key of ['a', 'b']) {
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'github', $2, 'disabled') returning id`,
        [tenant, key],
      );
      await db.pool.query('insert into rate_budget_connections (connection_id, fingerprint) values ($1, $2)', [rows[0]!.id, fingerprint]);
      purgesOf.push({ purgeId: (await insertPurge(db.pool, rows[0]!.id, tenant))!.id, connectionId: rows[0]!.id });
    }
    // The first purge's last transaction has deleted its connection row and waits (for its purge
    // row, held here) before it commits, while the second purge runs.
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from connection_purges where id = $1 for update', [purgesOf[0]!.purgeId]);
      const before = await lockWaiters();
      const first = runPurge(purgesOf[0]!);
      await eventually(async () => ((await lockWaiters()) > before ? true : undefined));
      let secondDone = false;
      const second = runPurge(purgesOf[1]!).finally(() => {
        secondDone = true;
      });
      // The second has finished, or waits for the first.
      await eventually(async () => (secondDone || (await lockWaiters()) > before + 1 ? true : undefined));
      await holder.query('commit');
      await Promise.all([first, second]);
    } finally {
      holder.release();
    }
    const { rows: left } = await db.pool.query('select fingerprint from rate_budgets where tenant_id = $1', [tenant]);
    expect(left).toEqual([]);
  });
  it("the retention clean-up whose full batch of events loses some to a connection's deletion still deletes every old event", async () => {
    const tenant = `retention-short-batch-${randomUUID()}`;
    const connectionId = randomUUID();
    // 1,500 finished events of a connection, 300 days old, oldest first (in index and heap order).
    await db.pool.query(
      `insert into webhook_events (tenant_id, connection_id, event_type, payload, created_at)
       select $1, $2, 'sync.completed', '{}', now() - interval '300 days' + make_interval(secs => g) from generate_series(1, 1500) g`,
      [tenant, connectionId],
    );
    // The connection's deletion deletes its 10 oldest, in a transaction not yet committed, which
    // the clean-up's first batch of events (1,000) takes too.
    const holder = await db.pool.connect();
    let cleanup: Promise<unknown>;
    try {
      await holder.query('begin');
      await holder.query(
        `delete from webhook_events where id in (select id from webhook_events where connection_id = $1 order by created_at limit 10)`,
        [connectionId],
      );
      const before = await lockWaiters();
      cleanup = deleteOldJobs(testActivityDeps({ pool: db.pool }).deps)({ at: Date.now(), retentionDays: 7 });
      await eventually(async () => ((await lockWaiters()) > before ? true : undefined));
      await holder.query('commit');
      await cleanup;
    } finally {
      holder.release();
    }
    const { rows } = await db.pool.query<{ n: number }>('select count(*)::int as n from webhook_events where connection_id = $1', [connectionId]);
    expect(rows[0]!.n).toBe(0);
  });
});
