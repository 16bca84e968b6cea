// GitHub App credentials against a fake GitHub on 127.0.0.1 (test/helpers/fake-github.ts) that
// verifies the app's JWT with the app's public key, real Postgres, and the sync activity run as a
// worker runs it (MockActivityEnvironment): an installation token is minted from a test RSA key
// once per expiry across two workers (two pools), cached sealed, minted again after a 401 once,
// a refused installation makes the connection needs_reauth (a rate-limited mint does not: it is a
// rate limit with GitHub's wait; nor does a JWT refused for its times: it is made again on GitHub's
// clock), and the API takes the credential (validated, never answered; a key with text around its
// PEM block, which the check takes, mints too).
import { createPrivateKey, generateKeyPairSync, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../db/pool';
import { isEnvelope, open, sealCredentials } from '../lib/credentials';
import type { HttpServer } from '../lib/http';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING } from './helpers/deps';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { completeJob, renewalOnTwoWorkers, runningJob, startTask } from './helpers/http-sync';
import { serve, serveRaw, serveTls } from './helpers/fake-server';
import { TEST_API_KEY, listenWithoutTemporal } from './helpers/api';
import type { LogLines } from './helpers/logs';

const APP_ID = 424242;
const INSTALLATION = 9001;
const rsa = () => generateKeyPairSync('rsa', { modulusLength: 2048, publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs1', format: 'pem' } });
const appKey = rsa();
const otherKey = rsa();
/** A line from the middle of a PEM: what a leaked key would show wherever it went (newlines escaped or not). */
const keyLine = (pem: string) => pem.split('\n')[3]!;

let db: TestDatabase;
let github: FakeGitHub;
let secondPool: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  secondPool = createPool(db.url, 5);
  github = await startFakeGitHub({
    token: 'ghp_static_token_nobody_uses_0001',
    repos: { 'acme/app': { issues: 4, pulls: 2 } },
    app: { id: APP_ID, publicKey: appKey.publicKey, installations: [INSTALLATION] },
  });
});
afterAll(async () => {
  await secondPool?.end();
  await github?.close();
  await db?.drop();
});

const appCredential = (privateKey = appKey.privateKey, installation = INSTALLATION) => ({ kind: 'github_app', app_id: APP_ID, installation_id: installation, private_key: privateKey });

/** An active github connection holding `credential` (sealed), `extra` merged into it (e.g. a cached token). */
async function appConnection(credential: Record<string, unknown> = appCredential()): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials) values ($1, 'acme', 'github', $2, $3, to_jsonb($4::text))`,
    [id, `gh-${id.slice(0, 8)}`, { base_url: github.baseUrl, repositories: ['acme/app'], per_page: 2 }, sealCredentials(TEST_KEYRING, id, credential)],
  );
  return id;
}

const job = (connectionId: string, resources: string[]) => runningJob(db.pool, connectionId, resources, 'full');
const endJob = (jobId: string) => completeJob(db.pool, jobId);
const runTask = (pool: Pool, jobId: string, taskId: string, resourceType: string) => startTask(pool, { jobId, taskId, resourceType, mode: 'full' });

/** Runs a new job's one task for `resource` to its end: its status (or its error's message) and how many tokens were minted meanwhile. */
async function syncOnce(connectionId: string, resource: string): Promise<{ outcome: string; mints: number }> {
  const before = github.mints.length;
  const { jobId, tasks } = await job(connectionId, [resource]);
  const outcome = await runTask(db.pool, jobId, tasks[0]!, resource).result.then((r) => r.status as string, (err: Error) => err.message);
  await endJob(jobId);
  return { outcome, mints: github.mints.length - before };
}

async function storedSecret(connectionId: string): Promise<Record<string, unknown>> {
  const { rows } = await db.pool.query<{ credentials: string }>('select credentials from connections where id = $1', [connectionId]);
  expect(isEnvelope(rows[0]!.credentials)).toBe(true);
  return JSON.parse(open(TEST_KEYRING, { table: 'connections', id: connectionId }, rows[0]!.credentials)) as Record<string, unknown>;
}

/** Both resource types of a job run at once on two pools, the token request held until one waits for the other's renewal lease. */
async function twoWorkers(connectionId: string) {
  const { results, lines, requests } = await renewalOnTwoWorkers({
    pools: [db.pool, secondPool], connectionId, resources: ['issues', 'pull_requests'], mode: 'full',
    hold: (gate) => (github.mintGate = gate), requests: () => github.mints.length,
  });
  return { results, lines, mints: requests };
}

describe('github_app credentials', () => {
  it('two workers mint one installation token per expiry from the app JWT; it is cached sealed and used by both; nothing secret is logged', async () => {
    const id = await appConnection();
    const run1 = await twoWorkers(id);
    expect(run1.mints).toBe(1);
    for (const r of run1.results) expect(r.status).toBe('completed');
    expect(run1.results[0].entityCount + run1.results[1].entityCount).toBe(8); // the issues listing holds the 4 issues and the 2 pulls (as GitHub's does), the pulls listing the 2 pulls
    const first = github.mints.at(-1)!;
    // The fake verified the JWT against the public key; its claims are GitHub's rules.
    expect(first.installationId).toBe(INSTALLATION);
    expect(first.claims.iss).toBe(APP_ID);
    expect(first.claims.exp - first.claims.iat).toBeLessThanOrEqual(600);
    // Every repository request carried the minted token.
    const listings = github.requests.filter((r) => r.url.startsWith('/repos/') || r.url.startsWith('/repositories/'));
    expect(listings.length).toBeGreaterThan(2);
    for (const r of listings) expect(r.headers.authorization).toBe(`Bearer ${first.token}`);
    const stored = await storedSecret(id);
    expect(stored).toMatchObject({ kind: 'github_app', app_id: APP_ID, installation_id: INSTALLATION, token: first.token });
    // GitHub's expiry on this machine's clock (the same clock here): at most the Date's second and a second of caution earlier.
    const storedExpiry = Date.parse(String(stored.expires_at));
    expect(storedExpiry).toBeLessThanOrEqual(Date.parse(first.expiresAt));
    expect(storedExpiry).toBeGreaterThan(Date.parse(first.expiresAt) - 3000);
    const raw = JSON.stringify((await db.pool.query('select credentials from connections where id = $1', [id])).rows[0]);
    expect(raw).not.toContain(first.token);
    expect(raw).not.toContain(keyLine(appKey.privateKey));

    // A fresh cached token: another run mints nothing.
    const run2 = await twoWorkers(id);
    expect(run2.mints).toBe(0);

    // The cached token reaches its margin (minted 58 minutes ago, stored expiry 2 minutes away): one mint again, for both workers.
    await db.pool.query('update connections set credentials = to_jsonb($2::text) where id = $1', [
      id, sealCredentials(TEST_KEYRING, id, { ...stored, obtained_at: new Date(Date.now() - 58 * 60_000).toISOString(), expires_at: new Date(Date.now() + 120_000).toISOString() }),
    ]);
    const run3 = await twoWorkers(id);
    expect(run3.mints).toBe(1);
    for (const r of run3.results) expect(r.status).toBe('completed');
    expect((await storedSecret(id)).token).toBe(github.mints.at(-1)!.token);

    const jwts = github.requests.filter((r) => r.url.startsWith('/app/')).map((r) => String(r.headers.authorization).slice('Bearer '.length));
    expect(jwts.length).toBeGreaterThanOrEqual(2);
    const logged = JSON.stringify([...run1.lines, ...run2.lines, ...run3.lines]);
    expect(logged).toContain('installation token minted');
    for (const secret of [keyLine(appKey.privateKey), ...github.mints.map((m) => m.token), ...jwts]) expect(logged).not.toContain(secret);
  });

  it('an installation token living less than twice the margin (4 minutes) is used for half its lifetime: one mint serves every page of a task, not one mint per request', async () => {
    const id = await appConnection();
    github.setTokenTtl(240);
    try {
      expect(await syncOnce(id, 'issues')).toEqual({ outcome: 'completed', mints: 1 });
      const pages = github.requests.filter((r) => r.url.startsWith('/repos/acme/app/issues') && r.headers.authorization === `Bearer ${github.mints.at(-1)!.token}`);
      expect(pages.length).toBeGreaterThan(1);
      // Stored with when it was obtained: the next run uses it while its first half lasts.
      const stored = await storedSecret(id);
      expect(stored.token).toBe(github.mints.at(-1)!.token);
      expect(await syncOnce(id, 'pull_requests')).toEqual({ outcome: 'completed', mints: 0 });
    } finally {
      github.setTokenTtl(3600);
    }
  });

  it('a 401 with the cached token mints once more and retries once', async () => {
    const id = await appConnection();
    expect((await syncOnce(id, 'pull_requests')).outcome).toBe('completed');
    const before = github.mints.length;
    github.setFailure({ kind: 'unauthorized', path: '/repos/', times: 1 });
    const { jobId, tasks } = await job(id, ['pull_requests']);
    const result = await runTask(db.pool, jobId, tasks[0]!, 'pull_requests').result;
    github.setFailure(null);
    await endJob(jobId);
    expect(result.status).toBe('completed');
    expect(github.mints.length - before).toBe(1);
  });

  it("a worker clock apart from GitHub's (45 s fast, 10 minutes slow) is no refusal: the JWT is made again on GitHub's clock (its Date) and the mint succeeds; the connection stays active", async () => {
    // Worker fast by 45 s: the JWT's exp is more than 10 minutes ahead of GitHub. Worker slow by 10 minutes: the JWT has expired by GitHub's clock.
    for (const offsetMs of [-45_000, 600_000]) {
      const id = await appConnection();
      const mintsBefore = github.mints.length;
      const refusedBefore = github.refusedMints;
      github.setClockOffset(offsetMs);
      try {
        const { jobId, tasks } = await job(id, ['issues']);
        const outcome = await runTask(db.pool, jobId, tasks[0]!, 'issues').result.then((r) => r.status, (err: Error) => err.message);
        await endJob(jobId);
        expect(outcome, `GitHub's clock ${offsetMs} ms from ours`).toBe('completed');
      } finally {
        github.setClockOffset(0);
      }
      expect(github.refusedMints - refusedBefore).toBe(1);
      expect(github.mints.length - mintsBefore).toBe(1);
      expect((await db.pool.query<{ status: string }>('select status from connections where id = $1', [id])).rows[0]!.status).toBe('active');
    }
  });

  it("a minted token's expiry is kept on this machine's clock: with GitHub's clock 10 minutes ahead, the hour GitHub gives ends an hour from now, not 70 minutes", async () => {
    const id = await appConnection();
    github.setClockOffset(600_000);
    try {
      const { jobId, tasks } = await job(id, ['issues']);
      expect((await runTask(db.pool, jobId, tasks[0]!, 'issues').result).status).toBe('completed');
      await endJob(jobId);
    } finally {
      github.setClockOffset(0);
    }
    // GitHub's expires_at is on its clock: read as ours, the token would be used up to 10 minutes after it expired.
    const expiresAt = Date.parse(String((await storedSecret(id)).expires_at));
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 3600_000);
    expect(expiresAt).toBeGreaterThan(Date.now() + 3500_000);
  });

  it('GitHub refusing the JWT (a key that is not the app\'s) or the installation makes the connection needs_reauth with its alert, naming no secret', async () => {
    for (const credential of [appCredential(otherKey.privateKey), appCredential(appKey.privateKey, 777)]) {
      const id = await appConnection(credential);
      const refusedBefore = github.refusedMints;
      const { jobId, tasks } = await job(id, ['issues']);
      const failure = await runTask(db.pool, jobId, tasks[0]!, 'issues').result.then(() => null, (err: Error) => err);
      await endJob(jobId);
      expect(failure?.message).toMatch(/GitHub refused (the app JWT|installation 777)/);
      expect(github.refusedMints - refusedBefore).toBe(1);
      for (const secret of [keyLine(otherKey.privateKey), keyLine(appKey.privateKey)]) expect(JSON.stringify(failure, Object.getOwnPropertyNames(failure))).not.toContain(secret);
      expect((await db.pool.query<{ status: string }>('select status from connections where id = $1', [id])).rows[0]!.status).toBe('needs_reauth');
      const alerts = await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [id]);
      expect(alerts.rowCount).toBe(1);
    }
  });
});

describe('github_app credentials on two GitHub hosts', () => {
  it("an installation of the same app and installation ids on another GitHub (Enterprise) host has a rate budget of its own: one host's exhausted limit holds back no request to the other", async () => {
    // GitHub Enterprise numbers its apps and installations from 1, as every other GitHub does: ids alike on two hosts are two installations.
    const host = () => startFakeGitHub({
      token: 'ghp_static_token_nobody_uses_0002',
      repos: { 'acme/app': { issues: 2, pulls: 1 } },
      app: { id: APP_ID, publicKey: appKey.publicKey, installations: [INSTALLATION] },
    });
    const [one, other] = [await host(), await host()];
    /** A connection of the app's installation on `github`'s host. */
    const on = async (github: FakeGitHub) => {
      const id = randomUUID();
      await db.pool.query(
        `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials) values ($1, 'acme', 'github', $2, $3, to_jsonb($4::text))`,
        [id, `gh-${id.slice(0, 8)}`, { base_url: github.baseUrl, repositories: ['acme/app'], per_page: 2 }, sealCredentials(TEST_KEYRING, id, appCredential())],
      );
      return id;
    };
    try {
      // The first host's installation spends its last request: its budget waits for the reset, an hour away.
      one.setRateLimitRemaining(0);
      const spent = await job(await on(one), ['pull_requests']);
      expect((await runTask(db.pool, spent.jobId, spent.tasks[0]!, 'pull_requests').result).status).toBe('completed');
      await endJob(spent.jobId);
      const { jobId, tasks } = await job(await on(other), ['issues']);
      const outcome = await runTask(db.pool, jobId, tasks[0]!, 'issues').result.then((r) => r.status, (err: Error) => err.message);
      await endJob(jobId);
      expect(outcome).toBe('completed');
      expect(other.mints).toHaveLength(1);
    } finally {
      await one.close();
      await other.close();
    }
  });
});

describe('github_app credentials rate-limited by GitHub', () => {
  const status = async (id: string) => (await db.pool.query<{ status: string }>('select status from connections where id = $1', [id])).rows[0]!.status;
  const openAlerts = async (id: string) =>
    (await db.pool.query(`select 1 from alerts where connection_id = $1 and category = 'connection_credentials_invalid' and resolved_at is null`, [id])).rowCount;

  it("a rate-limited installation token request (403 with x-ratelimit-remaining 0, 403 with Retry-After, 429) fails the task as rate-limited with GitHub's wait, asked once; the connection stays active with no alert", async () => {
    const limits = [
      { kind: 'primary' as const, reset: Math.floor(Date.now() / 1000) + 600, wait: [590, 600] },
      { kind: 'secondary' as const, retryAfter: 30, wait: [30, 30] },
      { kind: 'secondary' as const, status: 429 as const, wait: null },
    ];
    for (const { wait, ...limit } of limits) {
      const mintRequests = () => github.requests.filter((r) => r.url.startsWith('/app/installations/')).length;
      const asked = mintRequests();
      const id = await appConnection();
      const mintsBefore = github.mints.length;
      github.setFailure({ ...limit, path: '/app/installations/', times: 1 });
      const { jobId, tasks } = await job(id, ['issues']);
      const failure = await runTask(db.pool, jobId, tasks[0]!, 'issues').result.then(() => null, (err: Error) => err);
      github.setFailure(null);
      await endJob(jobId);
      // A rate limit, as a listing's is: the job waits GitHub's time durably, and it counts toward no breaker.
      expect(failure, JSON.stringify(limit)).toMatchObject({ type: 'rate_limited', nonRetryable: true });
      const hint = (failure as { details?: { retryAfterSeconds: number | null }[] } | null)?.details?.[0]?.retryAfterSeconds ?? null;
      if (wait === null) expect(hint).toBeNull();
      else {
        expect(hint).toBeGreaterThanOrEqual(wait[0]!);
        expect(hint).toBeLessThanOrEqual(wait[1]!);
      }
      expect(mintRequests() - asked).toBe(1);
      expect(failure?.message).toMatch(/GitHub rate-limited the installation token request \((403|429)\)/);
      expect(github.mints.length - mintsBefore).toBe(0);
      expect(await status(id)).toBe('active');
      expect(await openAlerts(id)).toBe(0);
      // Once the limit has passed, the next run mints and syncs.
      const next = await job(id, ['issues']);
      expect((await runTask(db.pool, next.jobId, next.tasks[0]!, 'issues').result).status).toBe('completed');
      await endJob(next.jobId);
      expect(github.mints.length - mintsBefore).toBe(1);
    }
  });

  /**
   * A GitHub App connection of its own whose GitHub is at `baseUrl`, and how its job's one task
   * (issues) failed (null when it did not); the job is ended afterwards.
   */
  async function taskAgainstGitHubAt(baseUrl: string): Promise<{ id: string; failure: (Error & { type?: string; nonRetryable?: boolean }) | null }> {
    const id = randomUUID();
    await db.pool.query(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials) values ($1, 'acme', 'github', $2, $3, to_jsonb($4::text))`,
      [id, `gh-${id.slice(0, 8)}`, { base_url: baseUrl, repositories: ['acme/app'] }, sealCredentials(TEST_KEYRING, id, appCredential())],
    );
    const { jobId, tasks } = await job(id, ['issues']);
    const failure = await runTask(db.pool, jobId, tasks[0]!, 'issues').result.then(() => null, (err: Error) => err);
    await endJob(jobId);
    return { id, failure };
  }

  it("an installation token answer whose header section passes Node's 16 KiB limit fails the task for good, naming the limit and the host; the connection stays active", async () => {
    const huge = await serve((_req, res) => res.writeHead(201, { 'content-type': 'application/json', 'x-padding': 'p'.repeat(20 * 1024) }).end('{}'));
    try {
      const { id, failure } = await taskAgainstGitHubAt(huge.url);
      expect(failure).toMatchObject({ type: 'permanent', nonRetryable: true });
      expect(failure?.message).toBe(
        "github_app: obtaining a token failed: the installation token request to '127.0.0.1' was answered, but its response headers exceed 16384 bytes (16 KiB), Node's limit on a response's header section (--max-http-header-size)",
      );
      expect(huge.requests).toHaveLength(1);
      expect(await status(id)).toBe('active');
      expect(await openAlerts(id)).toBe(0);
    } finally {
      await huge.close();
    }
  });

  it('an installation token answer that is malformed HTTP (a bad status line) fails the task for good, naming what was wrong and the host; the connection stays active', async () => {
    const raw = await serveRaw('HTTP/1.1 2x1 Created\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}');
    try {
      const { id, failure } = await taskAgainstGitHubAt(raw.url);
      expect(failure).toMatchObject({ type: 'permanent', nonRetryable: true });
      expect(failure?.message).toBe(
        "github_app: obtaining a token failed: the installation token request to '127.0.0.1' was answered, but its response is not valid HTTP: its status line has an invalid status code (HPE_INVALID_STATUS)",
      );
      expect(raw.requests).toHaveLength(1);
      expect(await status(id)).toBe('active');
      expect(await openAlerts(id)).toBe(0);
    } finally {
      await raw.close();
    }
  });

  it('an installation token request to a GitHub whose TLS certificate has expired fails the task for good, naming the host and why, with Node\'s code; the connection stays active', async () => {
    const expired = await serveTls('expired', (_req, res) => res.end('{}'));
    try {
      const { id, failure } = await taskAgainstGitHubAt(expired.url);
      expect(failure).toMatchObject({ type: 'permanent', nonRetryable: true });
      expect(failure?.message).toBe('github_app: obtaining a token failed: the installation token request failed: the certificate of 127.0.0.1 has expired (CERT_HAS_EXPIRED)');
      expect(expired.requests).toHaveLength(0);
      expect(await status(id)).toBe('active');
      expect(await openAlerts(id)).toBe(0);
    } finally {
      await expired.close();
    }
  });

  it('a 403 without any rate-limit signal is still a refusal: the connection needs reauthorization', async () => {
    const id = await appConnection();
    github.setFailure({ kind: 'forbidden', path: '/app/installations/', times: 1 });
    const { jobId, tasks } = await job(id, ['issues']);
    const failure = await runTask(db.pool, jobId, tasks[0]!, 'issues').result.then(() => null, (err: Error) => err);
    github.setFailure(null);
    await endJob(jobId);
    expect(failure?.message).toMatch(/GitHub refused installation 9001/);
    expect(await status(id)).toBe('needs_reauth');
    expect(await openAlerts(id)).toBe(1);
  });
});

describe('github_app credentials through the API', () => {
  let server: HttpServer;
  let lines: LogLines;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method, headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, body: text ? (JSON.parse(text) as any) : null };
  };
  beforeAll(async () => {
    ({ server, lines } = await listenWithoutTemporal(db.pool, 'ghapp-test'));
  });
  afterAll(async () => server?.close());

  it('PATCH credentials takes a github_app credential (checked: key shape, ids, no extra keys, never echoed) and a sync then mints with it', async () => {
    const id = randomUUID();
    await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'github', 'api-app', $2)`, [
      id, { base_url: github.baseUrl, repositories: ['acme/app'] },
    ]);
    const refused = [
      [{ ...appCredential(), private_key: 'not a key at all, but long enough to be mistaken for one' }, /private_key/],
      [{ ...appCredential(), installation_id: -1 }, /installation_id/],
      [{ ...appCredential(), app_id: 'x' }, /app_id/],
      [{ ...appCredential(), token: 'ghs_i_choose_my_own_cached_token_0001' }, /token: is not a GitHub App credential key/],
      [{ ...appCredential(), kind: 'saml' }, /kind/],
    ] as const;
    for (const [credentials, message] of refused) {
      const res = await call('PATCH', `/connections/${id}`, { credentials });
      expect(res.status, res.text).toBe(400);
      expect(res.text).toMatch(message);
      expect(res.text).not.toContain(keyLine(appKey.privateKey));
      expect(res.text).not.toContain('ghs_i_choose_my_own_cached_token_0001');
    }
    const ok = await call('PATCH', `/connections/${id}`, { credentials: appCredential() });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.has_credentials).toBe(true);
    expect(ok.text).not.toContain(keyLine(appKey.privateKey));
    const shown = await call('GET', `/connections/${id}`);
    expect(shown.text).not.toContain(keyLine(appKey.privateKey));
    expect(JSON.stringify(lines)).not.toContain(keyLine(appKey.privateKey));

    expect(await syncOnce(id, 'issues')).toEqual({ outcome: 'completed', mints: 1 });
  });

  it('a key PATCH takes with text around its PEM block (the Bag Attributes a PKCS#12 export writes before a PKCS#8 key, a line after it) mints: the sync completes and the connection stays active', async () => {
    const pkcs8 = createPrivateKey(appKey.privateKey).export({ type: 'pkcs8', format: 'pem' }) as string;
    const keys = [
      `Bag Attributes\n    friendlyName: synctide-app\n    localKeyID: 01 02 03 04\nKey Attributes: <No Attributes>\n${pkcs8}`,
      `${pkcs8}# the app's key, downloaded 2026-11-30\n`,
    ];
    for (const [n, key] of keys.entries()) {
      const id = randomUUID();
      await db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config) values ($1, 'acme', 'github', $2, $3)`, [
        id, `api-app-pem-${n}`, { base_url: github.baseUrl, repositories: ['acme/app'] },
      ]);
      const ok = await call('PATCH', `/connections/${id}`, { credentials: appCredential(key) });
      expect(ok.status, ok.text).toBe(200);
      expect(await syncOnce(id, 'issues'), `key ${n}`).toEqual({ outcome: 'completed', mints: 1 });
      expect((await db.pool.query<{ status: string }>('select status from connections where id = $1', [id])).rows[0]!.status).toBe('active');
    }
  });
});
