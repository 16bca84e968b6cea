// OAuth 2 credentials against a real OAuth server and resource on 127.0.0.1 (test/helpers/fake-oauth.ts),
// real Postgres, and the sync activity run as a worker runs it (MockActivityEnvironment): refresh once
// across concurrent activity calls, rotation stored, 401 → one refresh and one retry, invalid_grant →
// needs_reauth with its event and alert and no breaker count, and the connect flow through the API.
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import pg, { type PoolClient } from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../activities/enqueue-job';
import { recordAttemptFailure } from '../activities/record-attempt';
import { syncTask } from '../activities/sync-task';
import { credentialProvider } from '../activities/credential-provider';
import { updateConnection } from '../commands/connections';
import type { CommandDeps } from '../commands/deps';
import { createPool, type Pool } from '../db/pool';
import { isEnvelope, open, sealCredentials } from '../lib/credentials';
import type { HttpServer } from '../lib/http';
import type { SyncTaskInput, SyncTaskResult } from '../temporal/activities';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING, TEST_PROVIDER_POLICY, testActivityDeps } from './helpers/deps';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { insertOAuthApp, insertOAuthConnection, storedCredentials } from './helpers/oauth-grants';
import { completeJob, renewalOnTwoWorkers, runningJob, startTask } from './helpers/http-sync';
import { TEST_API_KEY, callApi, listenWithoutTemporal } from './helpers/api';
import type { LogLines } from './helpers/logs';
import { findGrantForRefresh } from '../db/models/connections';
import { nextSecret, refreshDue, refreshMarginSeconds, REFRESH_MARGIN_SECONDS } from '../policy/oauth';
import { redactSecrets } from '../connectors/provider-http';

let db: TestDatabase;
let oauth: FakeOAuth;
let secondPool: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  secondPool = createPool(db.url, 5);
  oauth = await startFakeOAuth();
});
afterAll(async () => {
  await secondPool?.end();
  await oauth?.close();
  await db?.drop();
});

const config = () => ({
  base_url: oauth.url,
  auth: { type: 'bearer' },
  resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' }, b: { path: '/items', id: 'id', updated_at: 'updated_at' } },
});

async function insertApp(tenant = 'acme'): Promise<string> {
  const id = randomUUID();
  return insertOAuthApp(db.pool, { id, tenantId: tenant, name: `app-${id.slice(0, 8)}`, clientId: oauth.clientId, clientSecret: oauth.clientSecret, origin: oauth.url });
}

/** An active http connection holding an oauth2 grant of the fake server whose access token expires in `expiresInSeconds`. */
async function oauthConnection(expiresInSeconds: number): Promise<{ id: string; appId: string; grant: { access: string; refresh: string } }> {
  const appId = await insertApp();
  const id = randomUUID();
  const grant = oauth.grant();
  const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + expiresInSeconds * 1000).toISOString(), scopes: ['read'] };
  await insertOAuthConnection(db.pool, { id, tenantId: 'acme', appKey: `c-${id.slice(0, 8)}`, config: config(), appId, sealed: sealCredentials(TEST_KEYRING, id, secret)! });
  return { id, appId, grant };
}

/** A running job of the connection with one task per resource type; the task ids. */
const job = (connectionId: string, resources: string[]) => runningJob(db.pool, connectionId, resources, 'incremental');
const endJob = (jobId: string) => completeJob(db.pool, jobId);
const runTask = (pool: Pool, jobId: string, taskId: string, resourceType: string, attempt = 1) =>
  startTask(pool, { jobId, taskId, resourceType, mode: 'incremental' }, attempt);

async function storedSecret(connectionId: string): Promise<Record<string, unknown>> {
  const stored = (await storedCredentials(db.pool, connectionId))!;
  expect(isEnvelope(stored.credentials)).toBe(true);
  return JSON.parse(open(TEST_KEYRING, { table: 'connections', id: stored.boundTo }, stored.credentials as string)) as Record<string, unknown>;
}

describe('oauth2 credentials', () => {
  it('two activity calls on two pools with a token inside its refresh margin refresh exactly once, and both use the result', async () => {
    const conn = await oauthConnection(10); // within the 300 s margin
    const { jobId, tasks } = await job(conn.id, ['a', 'b']);
    const before = oauth.counts.refresh;
    let release!: () => void;
    oauth.refreshGate = new Promise<void>((resolve) => (release = resolve));
    const first = runTask(db.pool, jobId, tasks[0]!, 'a');
    const second = runTask(secondPool, jobId, tasks[1]!, 'b');
    // Let the first refresh answer only once the other call waits for its renewal lease.
    for (;;) {
      const waiting = [...first.lines, ...second.lines].some((l) => l.msg === 'waiting for the credential renewal of another worker');
      if (waiting || oauth.counts.refresh - before >= 2) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    release();
    const [a, b] = await Promise.all([first.result, second.result]);
    oauth.refreshGate = null;
    await endJob(jobId);
    expect(oauth.counts.refresh - before).toBe(1);
    expect(a.status).toBe('completed');
    expect(b.status).toBe('completed');
    expect(a.entityCount + b.entityCount).toBe(4);
    // Rotation stored: the refresh token is the new one (the old one is refused by the server now).
    const stored = await storedSecret(conn.id);
    expect(stored.refresh_token).not.toBe(conn.grant.refresh);
    expect(oauth.refreshTokens.has(stored.refresh_token as string)).toBe(true);
    expect(oauth.refreshTokens.has(conn.grant.refresh)).toBe(false);
    expect(Date.parse(stored.expires_at as string)).toBeGreaterThan(Date.now() + 3000 * 1000);
    // Never in a log line.
    const logged = JSON.stringify([...first.lines, ...second.lines]);
    for (const s of [conn.grant.access, conn.grant.refresh, stored.access_token, stored.refresh_token, oauth.clientSecret]) expect(logged).not.toContain(s);
  });

  it('a worker waiting for another worker\'s renewal heartbeats while it waits (the wait may outlast the heartbeat timeout), repeating where its pass stands', async () => {
    const conn = await oauthConnection(10); // within the 300 s margin
    const { jobId, tasks } = await job(conn.id, ['a', 'b']);
    let release!: () => void;
    oauth.refreshGate = new Promise<void>((resolve) => (release = resolve));
    const runs = [runTask(db.pool, jobId, tasks[0]!, 'a'), runTask(secondPool, jobId, tasks[1]!, 'b')];
    const waits = (run: (typeof runs)[number]) => run.lines.some((l) => l.msg === 'waiting for the credential renewal of another worker');
    while (!runs.some(waits)) await new Promise((r) => setTimeout(r, 20));
    const waiting = runs.find(waits)!;
    const before = waiting.heartbeats.length;
    // The run heartbeats every 2 s while it works.
    await new Promise((r) => setTimeout(r, 2500));
    const during = waiting.heartbeats.slice(before);
    release();
    const results = await Promise.all(runs.map((run) => run.result));
    oauth.refreshGate = null;
    await endJob(jobId);
    expect(results.map((r) => r.status)).toEqual(['completed', 'completed']);
    expect(during.length).toBeGreaterThanOrEqual(1);
    // Where the pass stands (no page stored yet), as its page heartbeats say it.
    expect(during.at(-1)).toEqual({ pageToken: null, pages: 0 });
  });

  it('a renewal lease left by a worker that died (past its expiry) is taken over: one refresh, stored, and the lease ends', async () => {
    const conn = await oauthConnection(10); // within the 300 s margin
    await db.pool.query(
      `update oauth_grants set credential_lease_token = $2, credential_lease_until = now() - interval '1 second' where id = $1`,
      [conn.id, randomUUID()],
    );
    const before = oauth.counts.refresh;
    const { jobId, tasks } = await job(conn.id, ['a']);
    const run = runTask(db.pool, jobId, tasks[0]!, 'a');
    const result = await run.result;
    await endJob(jobId);
    expect(result.status).toBe('completed');
    expect(oauth.counts.refresh - before).toBe(1);
    expect(run.lines.some((l) => l.msg === 'waiting for the credential renewal of another worker')).toBe(false);
    const stored = await storedSecret(conn.id);
    expect(oauth.refreshTokens.has(stored.refresh_token as string)).toBe(true);
    const lease = await db.pool.query('select 1 from oauth_grants where id = $1 and credential_lease_token is null and credential_lease_until is null', [conn.id]);
    expect(lease.rowCount).toBe(1);
  });

  it('a worker whose lease ended while it waited for a database connection to store its answer: the refusal another worker got for the refresh token it spent is undone by its store (a connection of the grant that was paused stays paused), and that worker\'s task is tried again', async () => {
    const conn = await oauthConnection(10); // within the 300 s margin
    // Another connection of the grant, paused by its owner: the refusal marks it too, and its undo
    // gives it back its pause.
    const paused = randomUUID();
    await insertOAuthConnection(db.pool, { id: paused, tenantId: 'acme', appKey: `c-${paused.slice(0, 8)}`, config: config(), appId: conn.appId, grantId: conn.id });
    await db.pool.query(`update connections set status = 'paused' where id = $1`, [paused]);
    const { jobId, tasks } = await job(conn.id, ['a', 'b']);
    // Worker A: one database connection, a 1 s provider timeout (its lease: 11 s).
    const poolA = createPool(db.url, 1);
    let heldA: PoolClient | null = null;
    let runA: Promise<SyncTaskResult> | null = null;
    try {
      const before = oauth.counts.refresh;
      // When the token endpoint has rotated A's refresh token, A's one connection is busy (other
      // activities of a loaded worker) until after its lease has ended.
      oauth.beforeRefreshAnswer = async () => {
        oauth.beforeRefreshAnswer = null;
        heldA = await poolA.connect();
      };
      const { deps: depsA } = testActivityDeps({ pool: poolA, providers: { ...TEST_PROVIDER_POLICY, timeoutMs: 1_000 } });
      const inputA: SyncTaskInput = { jobId, taskId: tasks[0]!, resourceType: 'a', mode: 'incremental' };
      runA = new MockActivityEnvironment().run(syncTask(depsA), inputA) as Promise<SyncTaskResult>;
      const leaseEnded = async () =>
        (await db.pool.query('select 1 from oauth_grants where id = $1 and credential_lease_until <= now()', [conn.id])).rowCount === 1;
      while (!heldA) await new Promise((r) => setTimeout(r, 100));
      // Its lease ends while it waits: its end (11 s on, by the database's clock) moved to now, as
      // when those seconds have passed.
      await db.pool.query('update oauth_grants set credential_lease_until = now() where id = $1 and credential_lease_token is not null', [conn.id]);
      expect(await leaseEnded()).toBe(true);
      // Worker B finds the lease ended (as a dead worker's) and refreshes with the stored refresh token, which A spent.
      const errB = await runTask(secondPool, jobId, tasks[1]!, 'b').result.then(() => null, (e: Error & { nonRetryable?: boolean }) => e);
      expect(errB?.message).toMatch(/invalid_grant/);
      expect(oauth.counts.refresh - before).toBe(2);
      const statuses = async () =>
        (await db.pool.query<{ id: string; status: string }>('select id, status from connections where id = any($1::uuid[]) order by id = $2 desc', [[conn.id, paused], conn.id])).rows.map((r) => r.status);
      expect(await statuses()).toEqual(['needs_reauth', 'needs_reauth']);
      // B's task is tried again: the worker whose lease it took over may still store the grant's successor.
      expect(errB?.nonRetryable).toBe(false);
      // A gets its connection and stores the tokens the provider gave it.
      (heldA as PoolClient | null)?.release();
      heldA = null;
      const a = await runA;
      runA = null;
      expect(a.status).toBe('completed');
      // Temporal's retry of B's task (attempt 2) syncs with them.
      const retriedB = await runTask(secondPool, jobId, tasks[1]!, 'b', 2).result;
      await endJob(jobId);
      expect(retriedB.status).toBe('completed');
      expect(oauth.counts.refresh - before).toBe(2);
      const stored = await storedSecret(conn.id);
      expect(oauth.refreshTokens.has(stored.refresh_token as string)).toBe(true);
      // The grant is healthy: its connection is active (the paused one paused), with no open alert, and its next run syncs.
      expect(await statuses()).toEqual(['active', 'paused']);
      const alerts = await db.pool.query(
        `select 1 from alerts where connection_id = any($1::uuid[]) and category = 'connection_credentials_invalid' and resolved_at is null`, [[conn.id, paused]]);
      expect(alerts.rowCount).toBe(0);
      const next = await job(conn.id, ['a']);
      expect((await runTask(db.pool, next.jobId, next.tasks[0]!, 'a').result).status).toBe('completed');
      await endJob(next.jobId);
    } finally {
      oauth.beforeRefreshAnswer = null;
      (heldA as PoolClient | null)?.release();
      await (runA as Promise<SyncTaskResult> | null)?.catch(() => undefined);
      await poolA.end();
    }
  });

  it('a grant refused under a lease taken over from a worker that died: the run fails as retryable, and its retry as needing new credentials without asking the provider again', async () => {
    const conn = await oauthConnection(10); // within the 300 s margin
    oauth.refreshTokens.delete(conn.grant.refresh); // spent by the dead worker's refresh, whose answer was lost
    await db.pool.query(
      `update oauth_grants set credential_lease_token = $2, credential_lease_until = now() - interval '1 second' where id = $1`,
      [conn.id, randomUUID()],
    );
    const before = oauth.counts.refresh;
    const { jobId, tasks } = await job(conn.id, ['a']);
    const first = await runTask(db.pool, jobId, tasks[0]!, 'a').result.then(() => null, (e: Error & { nonRetryable?: boolean }) => e);
    expect(first?.message).toMatch(/invalid_grant/);
    expect(first?.nonRetryable).toBe(false);
    expect((await db.pool.query<{ status: string }>('select status from connections where id = $1', [conn.id])).rows[0]!.status).toBe('needs_reauth');
    const retried = await runTask(db.pool, jobId, tasks[0]!, 'a', 2).result.then(() => null, (e: Error & { nonRetryable?: boolean }) => e);
    await endJob(jobId);
    expect(retried?.message).toMatch(/needs new credentials/);
    expect(retried?.nonRetryable).toBe(true);
    expect(oauth.counts.refresh - before).toBe(1);
    const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [conn.id]);
    expect(alerts.rowCount).toBe(1);
  });

  it('a refresh whose answer cannot be stored at once (no database connection for a moment) stores it when one is free: the rotated refresh token is kept', async () => {
    const conn = await oauthConnection(10); // within the 300 s margin
    // Worker A: one database connection, which it waits for at most 200 ms at a time.
    const poolA = new pg.Pool({ connectionString: db.url, max: 1, connectionTimeoutMillis: 200 });
    poolA.on('error', () => undefined);
    let heldA: PoolClient | null = null;
    try {
      // When the token endpoint has rotated the refresh token, A's one connection is busy for a second.
      oauth.beforeRefreshAnswer = async () => {
        oauth.beforeRefreshAnswer = null;
        heldA = await poolA.connect();
        setTimeout(() => {
          heldA?.release();
          heldA = null;
        }, 1_000);
      };
      const { deps } = testActivityDeps({ pool: poolA });
      const stored = (await storedCredentials(db.pool, conn.id))!.credentials;
      const credential = await credentialProvider(deps, conn.id, stored, conn.id).current().then((c) => c, (e: Error) => e);
      const issued = oauth.issued.slice(-2);
      expect(credential).toEqual({ token: issued[0] });
      const secret = await storedSecret(conn.id);
      expect(secret.refresh_token).toBe(issued[1]);
      expect(oauth.refreshTokens.has(secret.refresh_token as string)).toBe(true);
      const lease = await db.pool.query('select 1 from oauth_grants where id = $1 and credential_lease_token is null', [conn.id]);
      expect(lease.rowCount).toBe(1);
    } finally {
      oauth.beforeRefreshAnswer = null;
      (heldA as PoolClient | null)?.release();
      await poolA.end();
    }
  });

  it('a 401 refreshes once and retries once; a token refused again fails the task instead of looping', async () => {
    const conn = await oauthConnection(3600);
    oauth.accessTokens.delete(conn.grant.access); // revoked at the resource, not yet expired by the clock
    const before = { ...oauth.counts };
    const { jobId, tasks } = await job(conn.id, ['a']);
    const ok = await runTask(db.pool, jobId, tasks[0]!, 'a').result;
    await endJob(jobId);
    expect(ok.status).toBe('completed');
    expect(oauth.counts.refresh - before.refresh).toBe(1);
    expect(oauth.counts.unauthorized - before.unauthorized).toBe(1);
    const rotated = await storedSecret(conn.id);
    expect(rotated.refresh_token).not.toBe(conn.grant.refresh);

    // The resource refuses every token now: one refresh, one retry, then the task fails.
    oauth.refuseAll = true;
    const mid = { ...oauth.counts };
    const second = await job(conn.id, ['a']);
    await expect(runTask(db.pool, second.jobId, second.tasks[0]!, 'a').result).rejects.toThrow(/rejected the credentials/);
    await endJob(second.jobId);
    expect(oauth.counts.refresh - mid.refresh).toBe(1);
    expect(oauth.counts.items - mid.items).toBe(2);
    oauth.refuseAll = false;
  });

  it('invalid_grant puts the connection in needs_reauth with an event and an alert, counts no breaker failure, and new credentials clear it', async () => {
    const conn = await oauthConnection(10);
    oauth.refreshTokens.delete(conn.grant.refresh); // revoked
    await db.pool.query(`insert into webhooks (tenant_id, url, event_types, secret) values ('acme', 'https://example.com/h', '{connection.credentials_invalid}', 'whsec')`);
    const { jobId, tasks } = await job(conn.id, ['a']);
    const { deps } = testActivityDeps({ pool: db.pool });
    await expect(runTask(db.pool, jobId, tasks[0]!, 'a').result).rejects.toThrow(/invalid_grant/);
    const status = await db.pool.query<{ status: string }>('select status from connections where id = $1', [conn.id]);
    expect(status.rows[0]!.status).toBe('needs_reauth');
    const events = await db.pool.query<{ payload: Record<string, unknown> }>(
      `select payload from webhook_events where connection_id = $1 and event_type = 'connection.credentials_invalid'`, [conn.id]);
    expect(events.rows).toHaveLength(1);
    expect(events.rows[0]!.payload.connection_id).toBe(conn.id);
    const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [conn.id]);
    expect(alerts.rowCount).toBe(1);
    // The job workflow then records the failed attempt: nothing is counted for a connection that needs reauthorization.
    const breaker = (await new MockActivityEnvironment().run(recordAttemptFailure(deps), { connectionId: conn.id, at: Date.now(), error: 'x', attemptKey: 'k1' })) as { consecutiveFailures: number };
    expect(breaker.consecutiveFailures).toBe(0);
    const stats = await db.pool.query('select 1 from connector_failure_stats where connection_id = $1 and consecutive_failures > 0', [conn.id]);
    expect(stats.rowCount).toBe(0);
    await endJob(jobId);
    // A later run fails at once without calling the token endpoint again.
    const before = oauth.counts.refresh;
    const again = await job(conn.id, ['a']);
    await expect(runTask(db.pool, again.jobId, again.tasks[0]!, 'a').result).rejects.toThrow(/needs new credentials/);
    await endJob(again.jobId);
    expect(oauth.counts.refresh).toBe(before);
    // The schedule enqueues nothing while it needs reauthorization.
    const enqueue = () => new MockActivityEnvironment().run(enqueueJob(deps), {
      jobId: randomUUID(), connectionId: conn.id, jobType: 'incremental' as const, trigger: 'schedule' as const, scheduledAt: Date.now(), at: Date.now(),
    }) as Promise<{ outcome: string }>;
    expect(await enqueue()).toMatchObject({ outcome: 'inactive', status: 'needs_reauth' });
    // New credentials (PATCH credentials) make it active again and resolve the alert.
    const commandDeps = { pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 } as unknown as CommandDeps;
    const row = await updateConnection(commandDeps, conn.id, { credentials: { token: 'static_token_1234567890' } });
    expect(row.status).toBe('active');
    expect(row.credential_kind).toBe('token');
    const open2 = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [conn.id]);
    expect(open2.rowCount).toBe(0);
    expect(await enqueue()).toMatchObject({ outcome: 'enqueued' });
  });

  it("a refused grant's job error reads as the token endpoint answered it (redaction leaves the words after 'token' that are no token value)", async () => {
    const conn = await oauthConnection(10);
    oauth.refreshTokens.delete(conn.grant.refresh); // revoked
    const { jobId, tasks } = await job(conn.id, ['a']);
    const err = await runTask(db.pool, jobId, tasks[0]!, 'a').result.then(() => null, (e: Error) => e);
    await endJob(jobId);
    expect(err?.message).toBe('oauth2: the token endpoint answered 400 invalid_grant; reconnect the connection or PATCH its credentials');
    // A value after `token` that looks like one is still redacted, as are Bearer and Basic values.
    expect(redactSecrets('token abcdefgh12345678, token ABCDEFGHIJKL, Bearer abcdefghijkl, Basic abcdefghijkl')).toBe('token [redacted], token [redacted], Bearer [redacted], Basic [redacted]');
    expect(redactSecrets('the token endpoint answered; the token expired; token request failed')).toBe('the token endpoint answered; the token expired; token request failed');
  });

  it('invalid_grant for credentials replaced (PATCH) while the refresh was under way fails the task as retryable, and its retry syncs with the new ones', async () => {
    const conn = await oauthConnection(10); // within its margin: the first use refreshes
    const { jobId, tasks } = await job(conn.id, ['a']);
    const before = oauth.counts.refresh;
    let release!: () => void;
    oauth.refreshGate = new Promise<void>((resolve) => (release = resolve));
    const run = runTask(db.pool, jobId, tasks[0]!, 'a');
    const failure = run.result.then(() => null, (err: Error & { nonRetryable?: boolean }) => err);
    while (oauth.counts.refresh === before) await new Promise((r) => setTimeout(r, 20));
    // While the token endpoint answers: the grant is revoked at the provider, and the user gives new credentials.
    oauth.refreshTokens.delete(conn.grant.refresh);
    const commandDeps = { pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 } as unknown as CommandDeps;
    const patched = await updateConnection(commandDeps, conn.id, { credentials: { token: 'patched_token_0123456789abcdef' } });
    expect([patched.status, patched.credential_kind]).toEqual(['active', 'token']);
    oauth.accessTokens.add('patched_token_0123456789abcdef');
    release();
    const err = await failure;
    oauth.refreshGate = null;
    // The refusal was of the credentials the connection no longer has: nothing to reconnect, try again.
    expect(err?.message).toMatch(/replaced/);
    expect(err?.nonRetryable).toBe(false);
    expect((await db.pool.query<{ status: string }>('select status from connections where id = $1', [conn.id])).rows[0]!.status).toBe('active');
    const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [conn.id]);
    expect(alerts.rowCount).toBe(0);
    // Temporal's retry of the activity (attempt 2) takes the task over and syncs with the token.
    const retried = await runTask(db.pool, jobId, tasks[0]!, 'a', 2).result;
    await endJob(jobId);
    expect(retried.status).toBe('completed');
  });

  it('a run whose grant a PATCH replaced meanwhile, refused by the provider (401), fails as retryable, not as credentials gone for good', async () => {
    const conn = await oauthConnection(3600);
    const { deps } = testActivityDeps({ pool: db.pool });
    const stored = (await storedCredentials(db.pool, conn.id))!.credentials;
    // A run opened the grant (a task claimed with it); its token comes due while it pages.
    const provider = credentialProvider(deps, conn.id, stored, conn.id);
    expect(await provider.current()).toEqual({ token: conn.grant.access });
    const commandDeps = { pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 } as unknown as CommandDeps;
    await updateConnection(commandDeps, conn.id, { credentials: { token: 'patched_token_0123456789abcdef' } });
    expect(await findGrantForRefresh(db.pool, conn.id)).toBeNull(); // the grant no connection uses is gone
    const err = await provider.renewed({ token: conn.grant.access }).then(() => null, (e: Error) => e);
    expect(err?.name).toBe('Transient');
    expect(err?.message).toMatch(/credentials changed/);
  });

  it('a connection of a refused grant that was disabled when the grant was refused, then resumed, needs reauthorization too at its next run, with its alert and event', async () => {
    const owner = await oauthConnection(10);
    const sharer = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [sharer, `s-${sharer.slice(0, 8)}`, config()]);
    const commandDeps = { pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 } as unknown as CommandDeps;
    await updateConnection(commandDeps, sharer, { credentials: { kind: 'oauth2', grant_from_connection: owner.id } });
    await db.pool.query(`update connections set status = 'disabled' where id = $1`, [sharer]); // as POST /disable writes it
    oauth.refreshTokens.delete(owner.grant.refresh); // revoked
    const first = await job(owner.id, ['a']);
    await expect(runTask(db.pool, first.jobId, first.tasks[0]!, 'a').result).rejects.toThrow(/invalid_grant/);
    await endJob(first.jobId);
    const statusOf = async (id: string) => (await db.pool.query<{ status: string }>('select status from connections where id = $1', [id])).rows[0]!.status;
    expect([await statusOf(owner.id), await statusOf(sharer)]).toEqual(['needs_reauth', 'disabled']);
    await db.pool.query(`update connections set status = 'active' where id = $1`, [sharer]); // as POST /resume writes it
    const before = oauth.counts.refresh;
    const next = await job(sharer, ['a']);
    await expect(runTask(db.pool, next.jobId, next.tasks[0]!, 'a').result).rejects.toThrow(/needs new credentials/);
    await endJob(next.jobId);
    expect(oauth.counts.refresh).toBe(before); // the refused grant is not tried again
    // Every connection of a refused grant needs reauthorization: the schedule stops, the tenant is told.
    expect(await statusOf(sharer)).toBe('needs_reauth');
    const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [sharer]);
    expect(alerts.rowCount).toBe(1);
    const events = await db.pool.query(`select 1 from webhook_events where connection_id = $1 and event_type = 'connection.credentials_invalid'`, [sharer]);
    expect(events.rowCount).toBe(1);
  });

  it('sharing a healthy grant into a connection that needs reauthorization makes it active with its alert resolved, and the grant keeps refreshing at the provider', async () => {
    const healthy = await oauthConnection(10); // within its margin: its next use refreshes
    const refused = await oauthConnection(10);
    oauth.refreshTokens.delete(refused.grant.refresh); // revoked
    const statusOf = async (id: string) => (await db.pool.query<{ status: string }>('select status from connections where id = $1', [id])).rows[0]!.status;
    const openAlerts = async (id: string) =>
      (await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [id])).rowCount;
    const first = await job(refused.id, ['a']);
    await expect(runTask(db.pool, first.jobId, first.tasks[0]!, 'a').result).rejects.toThrow(/invalid_grant/);
    await endJob(first.jobId);
    expect([await statusOf(refused.id), await openAlerts(refused.id)]).toEqual(['needs_reauth', 1]);

    // PATCH /connections/<refused> {"credentials": {"kind": "oauth2", "grant_from_connection": "<healthy>"}}: new credentials.
    const commandDeps = { pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 } as unknown as CommandDeps;
    const row = await updateConnection(commandDeps, refused.id, { credentials: { kind: 'oauth2', grant_from_connection: healthy.id } });
    expect([row.status, row.credential_kind, row.oauth_grant_id]).toEqual(['active', 'oauth2', healthy.id]);
    expect(await openAlerts(refused.id)).toBe(0);
    expect((await findGrantForRefresh(db.pool, healthy.id))?.status).toBe('active');

    // The healthy connection's next sync reaches the token endpoint and refreshes once.
    const before = oauth.counts.refresh;
    const next = await job(healthy.id, ['a']);
    const result = await runTask(db.pool, next.jobId, next.tasks[0]!, 'a').result;
    await endJob(next.jobId);
    expect(result.status).toBe('completed');
    expect(oauth.counts.refresh - before).toBe(1);
    expect([await statusOf(healthy.id), await openAlerts(healthy.id)]).toEqual(['active', 0]);
    // The connection that took the grant uses its refreshed token: no second refresh.
    const taken = await job(refused.id, ['a']);
    expect((await runTask(db.pool, taken.jobId, taken.tasks[0]!, 'a').result).status).toBe('completed');
    await endJob(taken.jobId);
    expect(oauth.counts.refresh - before).toBe(1);
  });

  it('a provider issuing 300 s access tokens (Keycloak\'s default): refreshed once, then used by every request and every later run', async () => {
    oauth.expiresIn = 300;
    try {
      const conn = await oauthConnection(10); // within its margin: the first use refreshes
      const before = oauth.counts.refresh;
      const { deps } = testActivityDeps({ pool: db.pool });
      const stored = async () => (await storedCredentials(db.pool, conn.id))!.credentials;
      const provider = credentialProvider(deps, conn.id, await stored(), conn.id);
      const tokens = new Set<unknown>();
      for (let i = 0; i < 5; i++) tokens.add((await provider.current())!.token); // five page requests
      // A later activity run (another worker) opens the stored envelope.
      tokens.add((await credentialProvider(deps, conn.id, await stored(), conn.id).current())!.token);
      expect({ refreshes: oauth.counts.refresh - before, distinctTokens: tokens.size }).toEqual({ refreshes: 1, distinctTokens: 1 });
      // The envelope records when the token was obtained: its lifetime is what its margin is judged by.
      const secret = await storedSecret(conn.id);
      expect(Date.parse(secret.expires_at as string) - Date.parse(secret.obtained_at as string)).toBe(300_000);
    } finally {
      oauth.expiresIn = 3600;
    }
  });

  it('a grant without a refresh token is used until its access token expires: inside the refresh margin it syncs and stays active; once expired it needs reauthorization', async () => {
    const appId = await insertApp();
    const grantOf = async (expiresInMs: number) => {
      const id = randomUUID();
      const grant = oauth.grant();
      const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: null, expires_at: new Date(Date.now() + expiresInMs).toISOString(), scopes: ['read'] };
      await insertOAuthConnection(db.pool, { id, tenantId: 'acme', appKey: `c-${id.slice(0, 8)}`, config: config(), appId, sealed: sealCredentials(TEST_KEYRING, id, secret)! });
      return id;
    };
    const statusOf = async (id: string) => (await db.pool.query<{ status: string }>('select status from connections where id = $1', [id])).rows[0]!.status;
    const runOnce = async (id: string) => {
      const { jobId, tasks } = await job(id, ['a']);
      try {
        return await runTask(db.pool, jobId, tasks[0]!, 'a').result.then((r) => r, (e: Error) => e);
      } finally {
        await endJob(jobId);
      }
    };
    // Two minutes left (inside the 300 s margin): nothing can renew it earlier, so it is used.
    const live = await grantOf(120_000);
    const used = await runOnce(live);
    expect(used instanceof Error ? used.message : used.status).toBe('completed');
    expect(await statusOf(live)).toBe('active');
    // Expired: the connection needs a new connect flow.
    const expired = await grantOf(-1_000);
    const refused = await runOnce(expired);
    expect(refused instanceof Error ? refused.message : refused.status).toMatch(/has no refresh token/);
    expect(await statusOf(expired)).toBe('needs_reauth');
  });
});

describe('token answers whose expires_in lies beyond any date', () => {
  it('an oauth2 refresh answered with expires_in 1e13 stores the rotated refresh token and the access token without an expiry (used until refused)', async () => {
    oauth.expiresIn = 1e13;
    try {
      const conn = await oauthConnection(10); // within its margin: the first use refreshes
      const { deps } = testActivityDeps({ pool: db.pool });
      const stored = (await storedCredentials(db.pool, conn.id))!.credentials;
      const token = (await credentialProvider(deps, conn.id, stored, conn.id).current())!.token;
      const secret = await storedSecret(conn.id);
      expect(secret.access_token).toBe(token);
      expect(secret.refresh_token).not.toBe(conn.grant.refresh);
      expect(oauth.refreshTokens.has(secret.refresh_token as string)).toBe(true);
      expect(secret.expires_at).toBeNull();
    } finally {
      oauth.expiresIn = 3600;
    }
  });

  it('a client credentials token answered with expires_in 1e13 is cached without an expiry', async () => {
    oauth.expiresIn = 1e13;
    try {
      const id = randomUUID();
      const credential = { kind: 'oauth2_client_credentials', token_url: `${oauth.url}/token`, client_id: oauth.clientId, client_secret: oauth.clientSecret, scopes: ['read'] };
      const sealed = sealCredentials(TEST_KEYRING, id, credential);
      await db.pool.query(
        `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials) values ($1, 'acme', 'http', $2, $3, to_jsonb($4::text))`,
        [id, `ccx-${id.slice(0, 8)}`, config(), sealed],
      );
      const { deps } = testActivityDeps({ pool: db.pool });
      const token = (await credentialProvider(deps, id, sealed).current())!.token;
      const secret = await storedSecret(id);
      expect(secret.token).toBe(token);
      expect(secret.expires_at).toBeNull();
    } finally {
      oauth.expiresIn = 3600;
    }
  });
});

describe('the refresh margin (policy/oauth.ts)', () => {
  const at = Date.parse('2025-01-01T12:00:00Z');
  const token = (obtainedAgoSeconds: number, lifetimeSeconds: number) => nextSecret({ refresh_token: 'r', scopes: [] }, { access_token: 'a', expires_in: lifetimeSeconds }, at - obtainedAgoSeconds * 1000);

  it('is 300 s, or half the token\'s lifetime when that is shorter', () => {
    expect(refreshMarginSeconds(token(0, 3600))).toBe(REFRESH_MARGIN_SECONDS);
    expect(refreshMarginSeconds(token(0, 600))).toBe(300);
    expect(refreshMarginSeconds(token(0, 300))).toBe(150);
    expect(refreshMarginSeconds(token(0, 60))).toBe(30);
    expect(refreshMarginSeconds(token(0, 0))).toBe(0);
    // A 300 s token is not due when it arrives, nor until half its lifetime has passed; then it is.
    expect(refreshDue(token(0, 300), at)).toBe(false);
    expect(refreshDue(token(149, 300), at)).toBe(false);
    expect(refreshDue(token(150, 300), at)).toBe(true);
    // A long-lived one keeps the 300 s margin.
    expect(refreshDue(token(3299, 3600), at)).toBe(false);
    expect(refreshDue(token(3300, 3600), at)).toBe(true);
  });

  it('keeps the fixed 300 s margin for an envelope written before the time it was obtained was recorded', () => {
    const legacy = { expires_at: new Date(at + 299_000).toISOString() };
    expect(refreshMarginSeconds(legacy)).toBe(REFRESH_MARGIN_SECONDS);
    expect(refreshDue(legacy, at)).toBe(true);
    expect(refreshDue({ expires_at: new Date(at + 301_000).toISOString(), obtained_at: null }, at)).toBe(false);
    expect(refreshMarginSeconds({ expires_at: 'not a time', obtained_at: new Date(at).toISOString() })).toBe(REFRESH_MARGIN_SECONDS);
    // No expiry: used until refused.
    expect(refreshDue({ expires_at: null, obtained_at: new Date(at).toISOString() }, at)).toBe(false);
  });
});

describe('oauth2 client credentials (the http connector)', () => {
  /** An active http connection holding a client credentials credential of the fake server (sealed). */
  async function clientConnection(clientSecret = oauth.clientSecret): Promise<string> {
    const id = randomUUID();
    const credential = { kind: 'oauth2_client_credentials', token_url: `${oauth.url}/token`, client_id: oauth.clientId, client_secret: clientSecret, scopes: ['read'] };
    await db.pool.query(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials) values ($1, 'acme', 'http', $2, $3, to_jsonb($4::text))`,
      [id, `cc-${id.slice(0, 8)}`, config(), sealCredentials(TEST_KEYRING, id, credential)],
    );
    return id;
  }

  /** Both resources of a job at once on two pools, the token answer held until one waits for the other's renewal lease. */
  const twoWorkers = (connectionId: string) =>
    renewalOnTwoWorkers({
      pools: [db.pool, secondPool], connectionId, resources: ['a', 'b'], mode: 'incremental',
      hold: (gate) => (oauth.refreshGate = gate), requests: () => oauth.counts.client,
    });

  it('two workers obtain one token per expiry by the client credentials grant; it is cached sealed and the client secret is never logged', async () => {
    const id = await clientConnection();
    const run1 = await twoWorkers(id);
    expect(run1.requests).toBe(1);
    for (const r of run1.results) expect(r.status).toBe('completed');
    expect(run1.results[0].entityCount + run1.results[1].entityCount).toBe(4);
    const stored = await storedSecret(id);
    expect(stored.token).toBe(oauth.issued.at(-2));
    expect(Date.parse(stored.expires_at as string)).toBeGreaterThan(Date.now() + 3000 * 1000);
    // Fresh: no token request at all.
    expect((await twoWorkers(id)).requests).toBe(0);
    // Within its margin (the token an hour old, a minute left): one request again, for both workers.
    await db.pool.query('update connections set credentials = to_jsonb($2::text) where id = $1', [
      id, sealCredentials(TEST_KEYRING, id, { ...stored, expires_at: new Date(Date.now() + 60_000).toISOString(), obtained_at: new Date(Date.now() + 60_000 - 3_600_000).toISOString() }),
    ]);
    const run3 = await twoWorkers(id);
    expect(run3.requests).toBe(1);
    for (const r of run3.results) expect(r.status).toBe('completed');
    const logged = JSON.stringify([...run1.lines, ...run3.lines]);
    expect(logged).toContain('oauth2 client credentials token obtained');
    for (const s of [oauth.clientSecret, stored.token as string, (await storedSecret(id)).token as string]) expect(logged).not.toContain(s);
  });

  it('a client credentials token living 300 s is obtained once for both workers, and a later run uses it', async () => {
    oauth.expiresIn = 300;
    try {
      const id = await clientConnection();
      const run1 = await twoWorkers(id);
      expect(run1.requests).toBe(1);
      for (const r of run1.results) expect(r.status).toBe('completed');
      expect((await twoWorkers(id)).requests).toBe(0);
      const stored = await storedSecret(id);
      expect(Date.parse(stored.expires_at as string) - Date.parse(stored.obtained_at as string)).toBe(300_000);
    } finally {
      oauth.expiresIn = 3600;
    }
  });

  it('a client the token endpoint refuses (invalid_client) makes the connection needs_reauth with its alert; the secret is in no error', async () => {
    const id = await clientConnection('not-the-client-secret-0123');
    const { jobId, tasks } = await job(id, ['a']);
    const failure = await runTask(db.pool, jobId, tasks[0]!, 'a').result.then(() => null, (err: Error) => err);
    await endJob(jobId);
    expect(failure?.message).toMatch(/invalid_client/);
    expect(failure?.message).not.toContain('not-the-client-secret-0123');
    expect((await db.pool.query<{ status: string }>('select status from connections where id = $1', [id])).rows[0]!.status).toBe('needs_reauth');
    const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [id]);
    expect(alerts.rowCount).toBe(1);
  });

  it('PATCH credentials checks a client credentials credential (URL, keys, scopes) without echoing it, and then takes it', async () => {
    const id = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', $2, $3)`, [id, `ccp-${id.slice(0, 8)}`, config()]);
    const commandDeps = { pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 } as unknown as CommandDeps;
    const good = { kind: 'oauth2_client_credentials', token_url: `${oauth.url}/token`, client_id: oauth.clientId, client_secret: 'patched-secret-Q1w2e3r4' };
    for (const [bad, key] of [
      [{ ...good, token_url: 'ftp://example.com/token' }, 'token_url'],
      [{ ...good, token_url: 'https://user:pw@example.com/token' }, 'token_url'],
      [{ ...good, client_secret: '' }, 'client_secret'],
      [{ ...good, scopes: ['has space'] }, 'scopes'],
      [{ ...good, token: 'chosen-token-0123456789' }, 'token'],
      [{ ...good, kind: 'oauth1' }, 'kind'],
    ] as const) {
      const err = await updateConnection(commandDeps, id, { credentials: bad }).then(() => null, (e: Error) => e);
      expect(err?.message).toContain(`credentials.${key}`);
      expect(err?.message).not.toContain('patched-secret-Q1w2e3r4');
    }
    const row = await updateConnection(commandDeps, id, { credentials: good });
    expect(row.has_credentials).toBe(true);
    expect((await storedSecret(id)).client_secret).toBe('patched-secret-Q1w2e3r4');
  });
});

describe('the connect flow through the API', () => {
  let server: HttpServer;
  let lines: LogLines;
  const call = (method: string, path: string, body?: unknown, key: string | null = TEST_API_KEY) => callApi(server.url, key, method, path, body);
  beforeAll(async () => {
    ({ server, lines } = await listenWithoutTemporal(db.pool, 'oauth-test'));
  });
  afterAll(async () => server?.close());

  it('authorize → consent → callback stores the tokens sealed, once, and a sync uses them; secrets are in no answer', async () => {
    const redirect = `${server.url}/oauth/callback`;
    const created = await call('POST', '/oauth-apps', {
      tenant_id: 'acme', name: 'fake', client_id: oauth.clientId, client_secret: oauth.clientSecret,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: redirect, scopes: ['read'],
    });
    expect(created.status).toBe(201);
    expect(created.text).not.toContain(oauth.clientSecret);
    const stored = await db.pool.query<{ client_secret: string }>('select client_secret from oauth_apps where id = $1', [created.body.id]);
    expect(isEnvelope(stored.rows[0]!.client_secret)).toBe(true);
    const listed = await call('GET', '/oauth-apps?tenant_id=acme');
    expect(listed.status).toBe(200);
    expect(listed.text).not.toContain(oauth.clientSecret);

    const id = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config, status) values ($1, 'acme', 'http', 'flow', $2, 'needs_reauth')`, [id, config()]);

    const wrongRedirect = await call('POST', `/connections/${id}/oauth/authorize`, { oauth_app_id: created.body.id, redirect_uri: `${redirect}/` });
    expect(wrongRedirect.status).toBe(400);
    expect(wrongRedirect.body.error.message).toMatch(/redirect_uri/);

    const start = await call('POST', `/connections/${id}/oauth/authorize`, { oauth_app_id: created.body.id });
    expect(start.status).toBe(200);
    const auth = new URL(start.body.authorization_url as string);
    expect(auth.searchParams.get('code_challenge_method')).toBe('S256');
    expect(auth.searchParams.get('redirect_uri')).toBe(redirect);
    const state = auth.searchParams.get('state')!;
    const states = await db.pool.query<{ state_hash: string }>('select state_hash from oauth_states where connection_id = $1', [id]);
    expect(states.rows).toHaveLength(1);
    expect(states.rows[0]!.state_hash).not.toBe(state);

    // The fake consent redirects back with a code and the state.
    const consent = await fetch(auth, { redirect: 'manual' });
    expect(consent.status).toBe(302);
    const back = new URL(consent.headers.get('location')!);
    const done = await call('GET', `${back.pathname}${back.search}`, undefined, null);
    expect(done.text).toContain(id);
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ connection_id: id, status: 'active', credential_kind: 'oauth2' });
    // Single-use: the same callback again is refused.
    const replay = await call('GET', `${back.pathname}${back.search}`, undefined, null);
    expect(replay.status).toBe(400);
    expect(replay.body.error.message).toMatch(/state/);

    const row = await db.pool.query<{ credentials: string; credential_kind: string; oauth_app_id: string }>(
      'select g.credentials, c.credential_kind, c.oauth_app_id from connections c join oauth_grants g on g.id = c.oauth_grant_id where c.id = $1', [id]);
    expect(row.rows[0]!.credential_kind).toBe('oauth2');
    expect(row.rows[0]!.oauth_app_id).toBe(created.body.id);
    const secret = await storedSecret(id);
    expect(JSON.stringify(row.rows[0]!.credentials)).not.toContain(secret.access_token as string);
    expect(JSON.stringify(row.rows[0]!.credentials)).not.toContain(secret.refresh_token as string);

    const shown = await call('GET', `/connections/${id}`);
    expect(shown.status).toBe(200);
    expect(shown.body.credential_kind ?? shown.body.connection?.credential_kind).toBe('oauth2');
    for (const s of [secret.access_token as string, secret.refresh_token as string, oauth.clientSecret]) {
      expect(shown.text).not.toContain(s);
      expect(JSON.stringify(lines)).not.toContain(s);
    }

    const before = oauth.counts.items;
    const { jobId, tasks } = await job(id, ['a']);
    const result = await runTask(db.pool, jobId, tasks[0]!, 'a').result;
    await endJob(jobId);
    expect(result).toMatchObject({ status: 'completed', entityCount: 2 });
    expect(oauth.counts.items - before).toBe(1);

    // An app in use cannot be deleted.
    expect((await call('DELETE', `/oauth-apps/${created.body.id}`)).status).toBe(409);
  });
  it('a refused shared grant: a connect flow on any of its connections replaces the grant for all of them, which are all active again with their alerts resolved', async () => {
    const redirect = `${server.url}/oauth/callback`;
    const created = await call('POST', '/oauth-apps', {
      tenant_id: 'acme', name: 'fake-shared', client_id: oauth.clientId, client_secret: oauth.clientSecret,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: redirect, scopes: ['read'],
    });
    expect(created.status).toBe(201);
    const owner = randomUUID();
    const grant = oauth.grant();
    const secret = { kind: 'oauth2', access_token: grant.access, refresh_token: grant.refresh, expires_at: new Date(Date.now() + 10_000).toISOString(), scopes: ['read'] };
    await insertOAuthConnection(db.pool, { id: owner, tenantId: 'acme', appKey: 'shared-owner', config: config(), appId: created.body.id, sealed: sealCredentials(TEST_KEYRING, owner, secret)! });
    const sharer = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', 'shared-sharer', $2)`, [sharer, config()]);
    const shared = await call('PATCH', `/connections/${sharer}`, { credentials: { kind: 'oauth2', grant_from_connection: owner } });
    expect([shared.status, shared.body.credential_kind, shared.body.has_credentials]).toEqual([200, 'oauth2', true]);

    // Revoked at the provider: a task of the sharer refreshes, is refused, and both need reauthorization.
    oauth.refreshTokens.delete(grant.refresh);
    const refused = await job(sharer, ['a']);
    await expect(runTask(db.pool, refused.jobId, refused.tasks[0]!, 'a').result).rejects.toThrow(/invalid_grant/);
    await endJob(refused.jobId);
    const statuses = async () => (await db.pool.query<{ status: string }>('select status from connections where id = any($1) order by app_key', [[owner, sharer]])).rows.map((r) => r.status);
    expect(await statuses()).toEqual(['needs_reauth', 'needs_reauth']);
    const open = async () => (await db.pool.query(`select 1 from alerts where connection_id = any($1) and category = 'connection_credentials_invalid' and resolved_at is null`, [[owner, sharer]])).rowCount;
    expect(await open()).toBe(2);
    // A refused grant is not handed on to a third connection.
    const third = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'http', 'shared-third', $2)`, [third, config()]);
    const refusedShare = await call('PATCH', `/connections/${third}`, { credentials: { kind: 'oauth2', grant_from_connection: owner } });
    expect([refusedShare.status, refusedShare.body.error?.code]).toEqual([409, 'connection_needs_reauth']);
    expect((await db.pool.query('select oauth_grant_id from connections where id = $1', [third])).rows[0]).toEqual({ oauth_grant_id: null });

    // The connect flow on the sharer: the grant (the same row) gets the new tokens, for both.
    const start = await call('POST', `/connections/${sharer}/oauth/authorize`, { oauth_app_id: created.body.id });
    expect(start.status).toBe(200);
    const consent = await fetch(new URL(start.body.authorization_url as string), { redirect: 'manual' });
    const back = new URL(consent.headers.get('location')!);
    const done = await call('GET', `${back.pathname}${back.search}`, undefined, null);
    expect(done.status, done.text).toBe(200);
    expect(await statuses()).toEqual(['active', 'active']);
    expect(await open()).toBe(0);
    const grants = await db.pool.query<{ oauth_grant_id: string }>('select oauth_grant_id from connections where id = any($1)', [[owner, sharer]]);
    expect(grants.rows.map((r) => r.oauth_grant_id)).toEqual([owner, owner]);
    const renewed = await storedSecret(owner);
    expect(oauth.refreshTokens.has(renewed.refresh_token as string)).toBe(true);
    const again = await job(owner, ['a']);
    const result = await runTask(db.pool, again.jobId, again.tasks[0]!, 'a').result;
    await endJob(again.jobId);
    expect(result).toMatchObject({ status: 'completed' });
  });
});

describe('what errors are redacted with', () => {
  it("an oauth2 credential's secrets are its tokens, not its kind, expiry or scope names (which would garble messages)", () => {
    const connectionId = randomUUID();
    const stored = sealCredentials(TEST_KEYRING, connectionId, {
      kind: 'oauth2',
      access_token: 'gho_access0123456789',
      refresh_token: 'ghr_refresh0123456789',
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      scopes: ['repo', 'read:org'],
    });
    const source = credentialProvider({ credentials: TEST_KEYRING } as Parameters<typeof credentialProvider>[0], connectionId, stored);
    const secrets = source.secrets();
    expect(secrets).toEqual(expect.arrayContaining(['gho_access0123456789', 'ghr_refresh0123456789']));
    for (const word of ['oauth2', 'repo', 'read:org', 'read%3Aorg']) expect(secrets).not.toContain(word);
    // A static token: every value of the opened credentials.
    const token = credentialProvider({ credentials: TEST_KEYRING } as Parameters<typeof credentialProvider>[0], connectionId, sealCredentials(TEST_KEYRING, connectionId, { token: 'ghp_static0123456789' }));
    expect(token.secrets()).toContain('ghp_static0123456789');
  });
});
