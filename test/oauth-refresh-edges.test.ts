// OAuth 2 refresh at its edges, through real sync jobs: a real OAuth server and resource on
// 127.0.0.1 (test/helpers/fake-oauth.ts), real Postgres, a Temporal dev server and two real
// workers (two Worker instances, each with its own Temporal connection and Postgres pool, polling
// one task queue). An access token that expires at the provider in the middle of a multi-page sync
// is refreshed once and the job completes with every record; 20 jobs running at once on the two
// workers refresh each grant exactly once, in worker pools of 5 (a refresh holds no pool connection
// while the token endpoint answers: a lease, not a transaction, keeps it single), also when two jobs
// of one connection hold its grant at the same time, and when 20 connections share one grant (one
// refresh for all); a revoked grant fails its job into needs_reauth with the alert and the webhook
// delivered, and the breaker counts nothing; a revoked shared grant does so for every connection
// of the grant.
import { randomUUID } from 'node:crypto';
import { NativeConnection, type Worker } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { updateConnection } from '../commands/connections';
import { createWebhook } from '../commands/webhooks';
import type { CommandDeps } from '../commands/deps';
import { insertJob } from '../db/models/jobs';
import { createPool, type Pool } from '../db/pool';
import { open, sealCredentials } from '../lib/credentials';
import { ensureJobWorkflow } from '../temporal/client';
import { syncJobWorkflowId } from '../temporal/ids';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING, TEST_PROVIDER_POLICY } from './helpers/deps';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { receiver } from './helpers/fake-server';
import { insertOAuthApp, insertOAuthConnection, storedCredentials } from './helpers/oauth-grants';
import { createDevServerEnv } from './helpers/temporal';
import { createTestWorker, eventually, type LogLines } from './helpers/worker';

const TASK_QUEUE = 'oauth-refresh-edges';

describe('oauth2 refresh during real sync jobs on two workers', () => {
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let oauth: FakeOAuth;
  const pools: Pool[] = [];
  const connections: NativeConnection[] = [];
  const workers: Worker[] = [];
  const running: Promise<void>[] = [];
  const lines: LogLines[] = [];
  let appId: string;

  beforeAll(async () => {
    [env, db, oauth] = await Promise.all([createDevServerEnv(), createTestDatabase(), startFakeOAuth()]);
    for (let i = 0; i < 2; i++) {
      // Small pools: a refresh holds no pool connection while the token endpoint answers, so 20
      // refreshes held in flight at once fit in pools of 5.
      const pool = createPool(db.url, 5);
      const connection = await NativeConnection.connect({ address: env.address });
      // A provider timeout of two minutes makes the renewal lease (the timeout and 10 s) outlast
      // every test's held refresh answers: with the default 30 s, a lease could expire while a slow
      // machine was still starting the jobs that must be seen waiting on it, and the waiting job
      // then took it over and refreshed a second time (seen once under a full `npm test`).
      const made = await createTestWorker({ connection, client: env.client, pool, taskQueue: TASK_QUEUE, providers: { ...TEST_PROVIDER_POLICY, timeoutMs: 120_000 } });
      pools.push(pool);
      connections.push(connection);
      workers.push(made.worker);
      lines.push(made.lines);
      running.push(made.worker.run());
    }
    appId = await insertOAuthApp(db.pool, { tenantId: 'acme', name: 'edges', clientId: oauth.clientId, clientSecret: oauth.clientSecret, origin: oauth.url });
  });
  afterAll(async () => {
    for (const worker of workers) worker.shutdown();
    await Promise.all(running);
    for (const connection of connections) await connection.close();
    for (const pool of pools) await pool.end();
    await oauth?.close();
    await env?.teardown();
    await db?.drop();
  });

  /**
   * An http connection paging `/pages` with its own grant whose access token expires in
   * `expiresInSeconds` (by the stored expiry), or sharing the grant `shareGrantOf` (a connection's id).
   */
  async function oauthConnection(expiresInSeconds: number, resources = ['pages'], shareGrantOf?: string) {
    const id = randomUUID();
    const grant = oauth.grant();
    const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + expiresInSeconds * 1000).toISOString(), scopes: ['read'] };
    const config = {
      base_url: oauth.url,
      auth: { type: 'bearer' },
      // One read of the listing per task (position paging reads again until two reads agree).
      pagination: { type: 'page_number', param: 'page', max_reads: 1 },
      resources: Object.fromEntries(resources.map((r) => [r, { path: '/pages', params: { of: r }, id: 'id', updated_at: 'updated_at' }])),
    };
    if (shareGrantOf) {
      // As PATCH /connections/:id {"credentials": {"kind": "oauth2", "grant_from_connection": …}} does it.
      await db.pool.query(
        `insert into connections (id, tenant_id, provider_slug, app_key, config, metadata) values ($1, 'acme', 'http', $2, $3, '{"sync": {"interval_seconds": 3600}}')`,
        [id, `edges-${id.slice(0, 8)}`, config],
      );
      const commandDeps = { pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 } as unknown as CommandDeps;
      const row = await updateConnection(commandDeps, id, { credentials: { kind: 'oauth2', grant_from_connection: shareGrantOf } });
      expect([row.credential_kind, row.has_credentials, row.oauth_grant_id]).toEqual(['oauth2', true, shareGrantOf]);
    } else {
      await insertOAuthConnection(db.pool, {
        id, tenantId: 'acme', appKey: `edges-${id.slice(0, 8)}`, config, appId, metadata: { sync: { interval_seconds: 3600 } }, sealed: sealCredentials(TEST_KEYRING, id, secret)!,
      });
    }
    return { id, grant };
  }

  /** What POST /sync does: the job row, then its workflow. */
  async function startJob(connectionId: string, jobType: 'full' | 'incremental' = 'full') {
    const jobId = randomUUID();
    expect(await insertJob(db.pool, { id: jobId, connectionId, tenantId: 'acme', jobType, trigger: 'api', scheduledAt: null, workflowId: syncJobWorkflowId(jobId) })).toBe(true);
    const handle = await ensureJobWorkflow(env.client, TASK_QUEUE, { id: jobId, connection: { id: connectionId, tenantId: 'acme', providerSlug: 'http' } });
    return { jobId, handle };
  }

  async function storedSecret(connectionId: string): Promise<Record<string, unknown>> {
    const stored = (await storedCredentials(db.pool, connectionId))!;
    return JSON.parse(open(TEST_KEYRING, { table: 'connections', id: stored.boundTo }, stored.credentials as string)) as Record<string, unknown>;
  }

  async function recordCount(connectionId: string): Promise<number> {
    const { rows } = await db.pool.query<{ n: number }>('select count(*)::int as n from records where connection_id = $1 and deleted_at is null', [connectionId]);
    return rows[0]!.n;
  }

  const jobRow = async (jobId: string) =>
    (await db.pool.query<{ status: string; processed: number; failed_tasks: number }>(
      'select status, processed_entities::int as processed, failed_tasks from sync_jobs where id = $1', [jobId])).rows[0]!;

  it('an access token that expires at the provider between pages is refreshed once, and the job completes with every record', async () => {
    oauth.pageCount = 5;
    oauth.pageSize = 10;
    // The stored expiry is an hour away (no refresh before use); the provider ends the token after
    // it served two pages, so page 3 meets a 401 in the middle of the task.
    const conn = await oauthConnection(3600);
    oauth.expireAfterUses.set(conn.grant.access, 2);
    const before = { ...oauth.counts };
    const { jobId, handle } = await startJob(conn.id);
    const result = await handle.result();

    expect(result.status).toBe('completed');
    expect(oauth.counts.refresh - before.refresh).toBe(1);
    expect(oauth.counts.unauthorized - before.unauthorized).toBe(1);
    // Pages 1–5 and the empty page that ends the listing, plus page 3 refused once.
    expect(oauth.counts.items - before.items).toBe(oauth.pageCount + 2);
    expect(await recordCount(conn.id)).toBe(oauth.pageCount * oauth.pageSize);
    expect(await jobRow(jobId)).toMatchObject({ status: 'completed', processed: oauth.pageCount * oauth.pageSize, failed_tasks: 0 });
    const stored = await storedSecret(conn.id);
    expect(stored.refresh_token).not.toBe(conn.grant.refresh);
    expect(oauth.refreshTokens.has(stored.refresh_token as string)).toBe(true);
    expect(oauth.accessTokens.has(stored.access_token as string)).toBe(true);
    const status = await db.pool.query<{ status: string }>('select status from connections where id = $1', [conn.id]);
    expect(status.rows[0]!.status).toBe('active');
    const logged = JSON.stringify(lines);
    for (const s of [conn.grant.access, conn.grant.refresh, stored.access_token as string, stored.refresh_token as string, oauth.clientSecret]) expect(logged).not.toContain(s);
  });

  it('20 jobs at once on two workers, each with a grant inside its refresh margin and two tasks: exactly one refresh per grant, every refresh in flight at once', async () => {
    oauth.pageCount = 2;
    oauth.pageSize = 5;
    const conns = [];
    for (let i = 0; i < 20; i++) conns.push(await oauthConnection(10, ['a', 'b'])); // within the 300 s margin
    const before = { ...oauth.counts };
    // Hold every refresh answer until all 20 are in flight: both workers refresh at the same time.
    let release!: () => void;
    oauth.refreshGate = new Promise<void>((resolve) => (release = resolve));
    const jobs = await Promise.all(conns.map((c) => startJob(c.id)));
    await eventually(async () => (oauth.counts.refresh - before.refresh >= 20 ? true : undefined), { timeoutMs: 45_000 });
    release();
    const results = await Promise.all(jobs.map((j) => j.handle.result()));
    oauth.refreshGate = null;

    expect(results.map((r) => r.status), JSON.stringify(results.filter((r) => r.status !== 'completed').slice(0, 2))).toEqual(Array(20).fill('completed'));
    expect(oauth.counts.refresh - before.refresh).toBe(20);
    for (const c of conns) {
      expect(await recordCount(c.id)).toBe(2 * oauth.pageCount * oauth.pageSize);
      const stored = await storedSecret(c.id);
      expect(oauth.refreshTokens.has(stored.refresh_token as string)).toBe(true);
      expect(oauth.refreshTokens.has(c.grant.refresh)).toBe(false);
    }
    const refused = await db.pool.query(`select 1 from connections where id = any($1) and status <> 'active'`, [conns.map((c) => c.id)]);
    expect(refused.rowCount).toBe(0);
    // Both workers ran sync tasks of these jobs.
    const ran = lines.map((l) => l.filter((line) => jobs.some((j) => line.job_id === j.jobId)).length);
    expect(ran.every((n) => n > 0)).toBe(true);
  });

  it('20 jobs at once on two workers, a full and an incremental job of each of 10 connections: each grant, held by two jobs at once, is refreshed exactly once', async () => {
    oauth.pageCount = 2;
    oauth.pageSize = 5;
    const conns: { id: string }[] = [];
    for (let i = 0; i < 10; i++) conns.push(await oauthConnection(10)); // within the 300 s margin
    const before = { ...oauth.counts };
    // Hold the refresh answers until every grant's second job waits for the renewal lease its first
    // holds (each worker logs once that it waits), with no database connection held meanwhile.
    let release!: () => void;
    oauth.refreshGate = new Promise<void>((resolve) => (release = resolve));
    const jobs = await Promise.all(conns.flatMap((c) => [startJob(c.id, 'full'), startJob(c.id, 'incremental')]));
    const waitingFor = () => new Set(lines.flat().filter((l) => l.msg === 'waiting for the credential renewal of another worker').map((l) => l.connection_id));
    const waiting = await eventually(async () => {
      const n = conns.filter((c) => waitingFor().has(c.id)).length;
      return n >= 10 && oauth.counts.refresh - before.refresh >= 10 ? n : undefined;
    }, { timeoutMs: 45_000, describe: async () => ({ refreshes: oauth.counts.refresh - before.refresh, waiting: waitingFor().size }) });
    const leases = await db.pool.query<{ n: number }>('select count(*)::int as n from oauth_grants where id = any($1) and credential_lease_until > now()', [conns.map((c) => c.id)]);
    release();
    const results = await Promise.all(jobs.map((j) => j.handle.result()));
    oauth.refreshGate = null;

    expect(waiting).toBe(10);
    // Ten refreshes under way: ten leases held across the token requests.
    expect(leases.rows[0]!.n).toBe(10);
    expect(results.map((r) => r.status), JSON.stringify(results.filter((r) => r.status !== 'completed').slice(0, 2))).toEqual(Array(20).fill('completed'));
    expect(oauth.counts.refresh - before.refresh).toBe(10);
    expect(oauth.counts.unauthorized - before.unauthorized).toBe(0);
    for (const c of conns) {
      expect(await recordCount(c.id)).toBe(oauth.pageCount * oauth.pageSize);
      const stored = await storedSecret(c.id);
      expect(oauth.refreshTokens.has(stored.refresh_token as string)).toBe(true);
    }
    const refused = await db.pool.query(
      `select 1 from connections c join oauth_grants g on g.id = c.oauth_grant_id where c.id = any($1) and (c.status <> 'active' or g.credential_lease_token is not null)`,
      [conns.map((c) => c.id)],
    );
    expect(refused.rowCount).toBe(0);
    const ran = lines.map((l) => l.filter((line) => jobs.some((j) => line.job_id === j.jobId)).length);
    expect(ran.every((n) => n > 0)).toBe(true);
  });

  it('a revoked grant: the job fails once, the connection needs reauthorization, the alert opens, the webhook is delivered, and no breaker failure is counted', async () => {
    const hook = await receiver(() => 200);
    try {
      const commandDeps = { pool: db.pool, credentials: TEST_KEYRING, webhookAllowPrivate: true } as unknown as CommandDeps;
      await createWebhook(commandDeps, { tenantId: 'acme', url: hook.url, eventTypes: ['connection.credentials_invalid'] });
      const conn = await oauthConnection(10); // due: refreshed before the first page
      oauth.refreshTokens.delete(conn.grant.refresh); // revoked at the provider
      const before = { ...oauth.counts };
      const { jobId, handle } = await startJob(conn.id);
      const result = await handle.result();

      expect(result.status).toBe('failed');
      expect(result.error).toMatch(/invalid_grant/);
      // One refresh refused, no resource request, and no retry that asked again.
      expect(oauth.counts.refresh - before.refresh).toBe(1);
      expect(oauth.counts.items - before.items).toBe(0);
      expect((await jobRow(jobId)).status).toBe('failed');
      const status = await db.pool.query<{ status: string }>('select status from connections where id = $1', [conn.id]);
      expect(status.rows[0]!.status).toBe('needs_reauth');
      const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [conn.id]);
      expect(alerts.rowCount).toBe(1);
      const breaker = await db.pool.query<{ n: number }>('select coalesce(sum(consecutive_failures), 0)::int as n from connector_failure_stats where connection_id = $1', [conn.id]);
      expect(breaker.rows[0]!.n).toBe(0);
      // The event reached the receiver, without a token or the client secret in it.
      const delivered = await eventually(async () => hook.received.find((r) => (JSON.parse(r.body) as { type: string; data: { connection_id: string } }).data.connection_id === conn.id));
      const event = JSON.parse(delivered.body) as { type: string; data: Record<string, unknown> };
      expect(event.type).toBe('connection.credentials_invalid');
      expect(event.data).toMatchObject({ connection_id: conn.id, provider_slug: 'http' });
      for (const s of [conn.grant.access, conn.grant.refresh, oauth.clientSecret]) expect(delivered.body).not.toContain(s);
    } finally {
      await hook.close();
    }
  });
  it('20 connections sharing one grant, a job of each at once on two workers: exactly one refresh, every job completes, every connection active', async () => {
    oauth.pageCount = 2;
    oauth.pageSize = 5;
    const owner = await oauthConnection(10); // within the 300 s margin
    const conns = [owner];
    for (let i = 0; i < 19; i++) conns.push(await oauthConnection(10, ['pages'], owner.id));
    const before = { ...oauth.counts };
    // Hold the one refresh answer until the 19 other tasks wait for the grant's renewal lease.
    let release!: () => void;
    oauth.refreshGate = new Promise<void>((resolve) => (release = resolve));
    const jobs = await Promise.all(conns.map((c) => startJob(c.id)));
    const waitingOn = () => lines.flat().filter((l) => l.msg === 'waiting for the credential renewal of another worker' && l.grant_id === owner.id);
    const waiting = await eventually(async () => (waitingOn().length >= 19 && oauth.counts.refresh - before.refresh >= 1 ? waitingOn().length : undefined), {
      timeoutMs: 45_000,
      describe: async () => ({ refreshes: oauth.counts.refresh - before.refresh, waiting: waitingOn().length }),
    });
    const leases = await db.pool.query<{ n: number }>('select count(*)::int as n from oauth_grants where id = $1 and credential_lease_until > now()', [owner.id]);
    release();
    const results = await Promise.all(jobs.map((j) => j.handle.result()));
    oauth.refreshGate = null;

    expect(waiting).toBe(19);
    expect(leases.rows[0]!.n).toBe(1);
    expect(results.map((r) => r.status), JSON.stringify(results.filter((r) => r.status !== 'completed').slice(0, 2))).toEqual(Array(20).fill('completed'));
    expect(oauth.counts.refresh - before.refresh).toBe(1);
    expect(oauth.counts.unauthorized - before.unauthorized).toBe(0);
    const stored = await storedSecret(owner.id);
    expect(oauth.refreshTokens.has(stored.refresh_token as string)).toBe(true);
    for (const c of conns) {
      expect(await recordCount(c.id)).toBe(oauth.pageCount * oauth.pageSize);
      expect(await storedSecret(c.id)).toEqual(stored);
    }
    const grants = await db.pool.query<{ grant: string; status: string }>('select oauth_grant_id as grant, status from connections where id = any($1)', [conns.map((c) => c.id)]);
    expect(grants.rows.map((r) => [r.grant, r.status])).toEqual(Array(20).fill([owner.id, 'active']));
    const lease = await db.pool.query('select 1 from oauth_grants where id = $1 and credential_lease_token is null', [owner.id]);
    expect(lease.rowCount).toBe(1);
    // Both workers ran sync tasks of these jobs.
    const ran = lines.map((l) => l.filter((line) => jobs.some((j) => line.job_id === j.jobId)).length);
    expect(ran.every((n) => n > 0)).toBe(true);
  });

  it('a revoked shared grant: every connection of the grant needs reauthorization, each with its alert and its webhook event, and no breaker failure', async () => {
    const hook = await receiver(() => 200);
    try {
      const commandDeps = { pool: db.pool, credentials: TEST_KEYRING, webhookAllowPrivate: true } as unknown as CommandDeps;
      await createWebhook(commandDeps, { tenantId: 'acme', url: hook.url, eventTypes: ['connection.credentials_invalid'] });
      const owner = await oauthConnection(10); // due: refreshed before the first page
      const conns = [owner, await oauthConnection(10, ['pages'], owner.id), await oauthConnection(10, ['pages'], owner.id)];
      const ids = conns.map((c) => c.id);
      oauth.refreshTokens.delete(owner.grant.refresh); // revoked at the provider
      const before = { ...oauth.counts };
      const { handle } = await startJob(conns[1]!.id);
      const result = await handle.result();

      expect(result.status).toBe('failed');
      expect(result.error).toMatch(/invalid_grant/);
      expect(oauth.counts.refresh - before.refresh).toBe(1);
      expect(oauth.counts.items - before.items).toBe(0);
      const status = await db.pool.query<{ status: string }>('select status from connections where id = any($1)', [ids]);
      expect(status.rows.map((r) => r.status)).toEqual(['needs_reauth', 'needs_reauth', 'needs_reauth']);
      const alerts = await db.pool.query<{ connection_id: string }>(
        `select connection_id from alerts where connection_id = any($1) and category = 'connection_credentials_invalid' and resolved_at is null`, [ids]);
      expect(alerts.rows.map((r) => r.connection_id).sort()).toEqual([...ids].sort());
      const breaker = await db.pool.query<{ n: number }>('select coalesce(sum(consecutive_failures), 0)::int as n from connector_failure_stats where connection_id = any($1)', [ids]);
      expect(breaker.rows[0]!.n).toBe(0);
      // One event per connection reached the receiver, without a token or the client secret in it.
      const ofThese = () => hook.received.filter((r) => (ids as string[]).includes((JSON.parse(r.body) as { data: { connection_id: string } }).data.connection_id));
      const delivered = await eventually(async () => (ofThese().length >= 3 ? ofThese() : undefined));
      expect(delivered.map((r) => (JSON.parse(r.body) as { data: { connection_id: string } }).data.connection_id).sort()).toEqual([...ids].sort());
      for (const r of delivered) for (const s of [owner.grant.access, owner.grant.refresh, oauth.clientSecret]) expect(r.body).not.toContain(s);
    } finally {
      await hook.close();
    }
  });
});
