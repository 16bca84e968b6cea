// Fault: kill -9 of the `npm run worker` process after the token endpoint answered a refresh with a
// rotated refresh token and before the worker stored it. The refresh stores access and refresh
// token in one transaction, so the kill leaves the credential it started from, whole. Whether the
// grant survives is then up to the provider: one that keeps a refresh token valid until its
// successor is used (Xero; Okta's and Auth0's rotation grace) lets the next worker refresh again
// and the job completes; one that spends it at once refuses it (`invalid_grant`), and the
// connection says so (needs_reauth with its alert) instead of looping. Both at once, against two
// real OAuth servers on 127.0.0.1, a Temporal dev server, Postgres and real worker processes.
//
// The kill lands exactly in the window: when a refresh reaches the token endpoint, the test takes
// the grant's row lock before the answer goes out, so the worker's storing UPDATE waits on
// it; the worker is killed while it waits (its transaction never commits), then the lock is let go.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertJob } from '../../db/models/jobs';
import type { PoolClient } from 'pg';
import { open, sealCredentials } from '../../lib/credentials';
import { ensureJobWorkflow } from '../../temporal/client';
import { syncJobWorkflowId } from '../../temporal/ids';
import type { TestDatabase } from '../helpers/database';
import { useServers } from '../helpers/stack';
import { TEST_KEYRING } from '../helpers/deps';
import { startFakeOAuth, type FakeOAuth } from '../helpers/fake-oauth';
import { stopAllSynctide, startSynctide, workerEnv } from '../helpers/processes';
import { insertOAuthApp, insertOAuthConnection, storedCredentials } from '../helpers/oauth-grants';
import { eventually } from '../helpers/worker';

const TASK_QUEUE = 'faults-oauth-refresh-crash';

describe('kill -9 between the token answer and storing the rotated refresh token', () => {
  const servers = useServers();
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  const fakes: FakeOAuth[] = [];
  beforeAll(async () => {
    ({ env, db } = servers);
    fakes.push(await startFakeOAuth(), await startFakeOAuth());
  });
  afterAll(async () => {
    await stopAllSynctide();
    for (const fake of fakes) await fake.close();
  });

  /** An http connection of `fake`'s app whose grant is inside its refresh margin (refreshed at the first page). */
  async function connection(fake: FakeOAuth, name: string) {
    const appId = await insertOAuthApp(db.pool, { tenantId: 'acme', name, clientId: fake.clientId, clientSecret: fake.clientSecret, origin: fake.url });
    const id = randomUUID();
    const grant = fake.grant();
    const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + 10_000).toISOString(), scopes: ['read'] };
    const config = {
      base_url: fake.url,
      auth: { type: 'bearer' },
      pagination: { type: 'page_number', param: 'page', max_reads: 1 },
      resources: { pages: { path: '/pages', id: 'id', updated_at: 'updated_at' } },
    };
    await insertOAuthConnection(db.pool, {
      id, tenantId: 'acme', appKey: name, config, appId, metadata: { sync: { interval_seconds: 3600 } }, sealed: sealCredentials(TEST_KEYRING, id, secret)!,
    });
    return { id, grant };
  }

  async function stored(connectionId: string) {
    const row = (await storedCredentials(db.pool, connectionId))!;
    const secret = JSON.parse(open(TEST_KEYRING, { table: 'connections', id: row.boundTo }, row.credentials as string)) as Record<string, string>;
    return { secret, status: row.status };
  }

  it('keeps the credential whole: a provider with rotation grace lets the next worker recover, a strict one ends in needs_reauth', async () => {
    const [graceful, strict] = fakes as [FakeOAuth, FakeOAuth];
    graceful.rotation = 'until_successor_used';
    strict.rotation = 'strict';
    const servers = { databaseUrl: db.url, temporalAddress: env.address, taskQueue: TASK_QUEUE };
    const startWorker = async () => startSynctide('worker', await workerEnv(servers, { SCHEDULER_TICK_SECONDS: '3600', PROVIDER_ALLOW_PRIVATE: 'true' }));
    const first = await startWorker();
    let worker = first;

    const conns = [await connection(graceful, 'graceful'), await connection(strict, 'strict')];
    // Each refresh's answer waits until the test holds its grant's row (released after the kill).
    const held: PoolClient[] = [];
    conns.forEach((conn, i) => {
      fakes[i]!.beforeRefreshAnswer = async () => {
        const client = await db.pool.connect();
        await client.query('begin');
        await client.query('select 1 from oauth_grants where id = $1 for update', [conn.id]);
        held.push(client);
      };
    });

    const jobs = [];
    for (const conn of conns) {
      const jobId = randomUUID();
      expect(await insertJob(db.pool, { id: jobId, connectionId: conn.id, tenantId: 'acme', jobType: 'full', trigger: 'api', scheduledAt: null, workflowId: syncJobWorkflowId(jobId) })).toBe(true);
      jobs.push({ jobId, handle: await ensureJobWorkflow(env.client, TASK_QUEUE, { id: jobId, connection: { id: conn.id, tenantId: 'acme', providerSlug: 'http' } }) });
    }

    // Both workers' storing UPDATEs wait on the rows the test holds: the answers were received.
    await eventually(async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike 'update oauth_grants set credentials%'`,
      );
      return rows[0]!.n === 2 ? true : undefined;
    }, { timeoutMs: 120_000, describe: async () => fakes.map((f) => f.counts) });
    expect(fakes.map((f) => f.counts.refresh)).toEqual([1, 1]);
    worker.kill('SIGKILL');
    expect((await worker.exit).signal).toBe('SIGKILL');
    for (const client of held) {
      await client.query('rollback');
      client.release();
    }
    for (const fake of fakes) fake.beforeRefreshAnswer = null;

    // Nothing of the lost answer was stored: each connection still holds the grant it started from, active.
    for (const conn of conns) {
      await eventually(async () => {
        const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'update oauth_grants set credentials%' and state <> 'idle'`);
        return rows[0]!.n === 0 ? true : undefined;
      });
      expect(await stored(conn.id)).toMatchObject({ status: 'active', secret: { refresh_token: conn.grant.refresh, access_token: conn.grant.access } });
    }

    // The killed attempts time out (heartbeat) and are retried on a new worker.
    worker = await startWorker();
    const results = await Promise.all(jobs.map((j) => j.handle.result()));
    console.log(
      `[oauth-refresh-crash] graceful: job ${results[0]!.status}, refreshes ${graceful.counts.refresh}; ` +
        `strict: job ${results[1]!.status}, refreshes ${strict.counts.refresh}`,
    );

    // Rotation grace: the next worker refreshed with the stored token again; the grant lives on.
    expect(results[0]!.status).toBe('completed');
    expect(graceful.counts.refresh).toBe(2);
    const after = await stored(conns[0]!.id);
    expect(after.status).toBe('active');
    expect(after.secret.refresh_token).not.toBe(conns[0]!.grant.refresh);
    expect(graceful.refreshTokens.has(after.secret.refresh_token!)).toBe(true);
    const { rows: records } = await db.pool.query<{ n: number }>('select count(*)::int as n from records where connection_id = $1 and deleted_at is null', [conns[0]!.id]);
    expect(records[0]!.n).toBe(graceful.pageCount * graceful.pageSize);
    const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid'`, [conns[0]!.id]);
    expect(alerts.rowCount).toBe(0);

    // Strict rotation: the stored refresh token was spent by the lost answer; the connection needs
    // reauthorization (with its alert), and the token endpoint was asked once more, not in a loop.
    expect(results[1]!.status).toBe('failed');
    expect(strict.counts.refresh).toBe(2);
    expect((await stored(conns[1]!.id)).status).toBe('needs_reauth');
    const strictAlerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [conns[1]!.id]);
    expect(strictAlerts.rowCount).toBe(1);

    // No token or client secret in any line either worker printed.
    const printed = JSON.stringify([first.lines, worker.lines, first.otherOutput(), worker.otherOutput()]);
    for (const fake of fakes) for (const s of [...fake.issued, fake.clientSecret]) expect(printed).not.toContain(s);
  });
});
