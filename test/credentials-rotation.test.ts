// Key rotation against a real database, worker and time-skipping server: rows sealed under the old
// key (and legacy plaintext ones) are re-sealed under the new key while a sync runs; the sync
// completes; the rotation resumes after an interruption; a concurrent change is never overwritten.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resealSecrets } from '../commands/credentials';
import { envelopeKeyId, openCredentials, openWebhookSecret, parseKeyring, sealCredentials } from '../lib/credentials';
import { replaceCredentials } from '../db/models/connections';
import { startTestApi, type TestApi } from './helpers/api';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';
import { completeAuthorization, createOAuthApp, startAuthorization } from '../commands/oauth';
import { testCommandDeps } from './helpers/deps';
import { startFakeOAuth } from './helpers/fake-oauth';

const TASK_QUEUE = 'credentials-rotation';
const OLD = Buffer.alloc(32, 11).toString('base64');
const NEW = Buffer.alloc(32, 12).toString('base64');
/** Before rotation: only the old key. */
const OLD_ONLY = parseKeyring({ CREDENTIALS_KEYS: `old:${OLD}` })!;
/** During rotation: both keys, the new one active (what workers and the rotation run with). */
const BOTH = parseKeyring({ CREDENTIALS_KEYS: `old:${OLD},new:${NEW}`, CREDENTIALS_ACTIVE_KEY_ID: 'new' })!;
/** After rotation: the old key can go. */
const NEW_ONLY = parseKeyring({ CREDENTIALS_KEYS: `new:${NEW}` })!;
const GH_TOKEN = 'ghp_rotation_token_8Hk2Lm5Np';

describe('credentials rotation', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE, { credentials: BOTH });
  let api: TestApi;
  let github: FakeGitHub;

  beforeAll(async () => {
    api = await startTestApi(stack, TASK_QUEUE, { credentials: OLD_ONLY, webhookAllowPrivate: true });
    github = await startFakeGitHub({ token: GH_TOKEN, repos: { 'acme/app': { issues: 8, pulls: 2 } } });
  });
  afterAll(async () => {
    await api?.server.close();
    await github?.close();
  });

  const q = <T = any>(sql: string, params: unknown[] = []) => stack.db.pool.query(sql, params).then((r) => r.rows as T[]);

  async function jobStatus(id: string): Promise<string> {
    return (await api.call('GET', `/jobs/${id}`)).body.status;
  }

  it('re-seals every row under the new key while a sync runs, resumes after an interruption, and the sync completes', async () => {
    const gh = await api.call('POST', '/connections', {
      tenant_id: 'acme', app_key: 'gh', provider: 'github', credentials: { token: GH_TOKEN },
      config: { base_url: github.baseUrl, repositories: ['acme/app'], per_page: 2 }, schedule: { interval_seconds: 86_400 },
    });
    expect(gh.status, JSON.stringify(gh.body)).toBe(201);
    const slow = await api.call('POST', '/connections', {
      tenant_id: 'acme', app_key: 'slow', provider: 'demo', credentials: { token: 'slow-token' }, schedule: { interval_seconds: 86_400 },
      config: { resource_types: ['a', 'b', 'c'], records_per_resource: 400, page_size: 5, latency_ms: 40 },
    });
    expect(slow.status).toBe(201);
    const hook = await api.call('POST', '/webhooks', { tenant_id: 'acme', url: 'http://127.0.0.1:9/h', event_types: ['connection.breaker_opened'] });
    expect(hook.status).toBe(201);
    // Many more rows under the old key than one batch (200), written as the API writes them, and a
    // legacy plaintext connection and webhook secret from before encryption.
    const many = await q<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key) select 'bulk', 'demo', 'bulk-' || i from generate_series(1, 450) i returning id`,
    );
    for (const { id } of many) await q('update connections set credentials = to_jsonb($2::text) where id = $1', [id, sealCredentials(OLD_ONLY, id, { token: `bulk-${id}` })]);
    const [legacy] = await q<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, credentials) values ('acme', 'demo', 'legacy', '{"token": "legacy-token"}') returning id`);
    const [legacyHook] = await q<{ id: string }>(`insert into webhooks (tenant_id, url, event_types, secret) values ('acme', 'http://127.0.0.1:9/l', '{sync.failed}', 'whsec_legacy_plain') returning id`);
    const underOld = await q(`select 1 from connections where credentials #>> '{}' like 'enc:v1:old:%'`);
    expect(underOld.length).toBe(452);

    // The slow connection's bootstrap sync runs (three tasks, each opening the credentials).
    const job = await eventually(async () => {
      const [row] = await q<{ id: string; status: string }>(`select id, status from sync_jobs where connection_id = $1`, [slow.body.id]);
      return row?.status === 'running' ? row.id : undefined;
    });

    // Rotation, interrupted after its first batch (as a killed process would be) ...
    await expect(resealSecrets({ pool: stack.db.pool, credentials: BOTH }, 'all', () => { throw new Error('killed'); })).rejects.toThrow('killed');
    const halfway = await q(`select 1 from connections where credentials #>> '{}' like 'enc:v1:new:%'`);
    expect(halfway.length).toBeGreaterThan(0);
    expect(halfway.length).toBeLessThan(453);
    expect(await jobStatus(job)).toBe('running');
    // ... and run again: it picks up the rest; every row is under the new key, none is left.
    const result = await resealSecrets({ pool: stack.db.pool, credentials: BOTH }, 'all');
    expect(result.remaining).toBe(0);
    // 453 connections (452 under the old key, 1 plaintext) and 2 webhooks, less the first run's.
    expect(result.sealed).toBe(453 + 2 - halfway.length);
    const rows = await q<{ id: string; credentials: unknown }>(`select id, credentials from connections where credentials is not null`);
    expect(rows.length).toBe(453);
    for (const row of rows) expect(envelopeKeyId(row.credentials), row.id).toBe('new');
    const hooks = await q<{ id: string; secret: string }>('select id, secret from webhooks');
    for (const row of hooks) expect(envelopeKeyId(row.secret)).toBe('new');
    // The old key is no longer needed: the new one alone opens everything.
    expect(openCredentials(NEW_ONLY, legacy!.id, rows.find((r) => r.id === legacy!.id)!.credentials)).toEqual({ token: 'legacy-token' });
    expect(openWebhookSecret(NEW_ONLY, legacyHook!.id, hooks.find((h) => h.id === legacyHook!.id)!.secret)).toBe('whsec_legacy_plain');
    for (const row of rows.slice(0, 20)) expect(openCredentials(NEW_ONLY, row.id, row.credentials)).toEqual(expect.any(Object));
    // Nothing to do on a third run.
    expect(await resealSecrets({ pool: stack.db.pool, credentials: BOTH }, 'all')).toEqual({ sealed: 0, skipped: 0, remaining: 0 });

    // The sync that ran through the rotation completes, and the GitHub connection syncs with its
    // token opened from the new envelope.
    await eventually(async () => ((await jobStatus(job)) === 'completed' ? true : undefined), { timeoutMs: 50_000 });
    const sync = await api.call('POST', `/connections/${gh.body.id}/sync`, { mode: 'full' });
    expect(sync.status).toBe(202);
    await eventually(async () => (['completed', 'failed'].includes(await jobStatus(sync.body.job_id)) ? true : undefined));
    expect(await jobStatus(sync.body.job_id)).toBe('completed');
    expect(github.requests.length).toBeGreaterThan(0);
    expect(github.requests.every((r) => r.headers.authorization === `Bearer ${GH_TOKEN}`)).toBe(true);
  });

  it('the start-up step seals only plaintext rows and leaves envelopes of other keys for rotation', async () => {
    const [plain] = await q<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, credentials) values ('s', 'demo', 'plain', '{"token": "p"}') returning id`);
    const [old] = await q<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key) values ('s', 'demo', 'old') returning id`);
    await q('update connections set credentials = to_jsonb($2::text) where id = $1', [old!.id, sealCredentials(OLD_ONLY, old!.id, { token: 'o' })]);
    const result = await resealSecrets({ pool: stack.db.pool, credentials: BOTH }, 'plaintext');
    expect(result.sealed).toBe(1);
    const rows = await q<{ id: string; credentials: unknown }>('select id, credentials from connections where id = any($1)', [[plain!.id, old!.id]]);
    const byId = new Map(rows.map((r) => [r.id, r.credentials]));
    expect(envelopeKeyId(byId.get(plain!.id))).toBe('new');
    expect(openCredentials(BOTH, plain!.id, byId.get(plain!.id))).toEqual({ token: 'p' });
    expect(envelopeKeyId(byId.get(old!.id))).toBe('old');
  });

  it('never overwrites credentials changed while the rotation looked at them (compare and set)', async () => {
    const [row] = await q<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key) values ('cas', 'demo', 'cas') returning id`);
    const stale = sealCredentials(OLD_ONLY, row!.id, { token: 'before' })!;
    const fresh = sealCredentials(BOTH, row!.id, { token: 'patched meanwhile' })!;
    await q('update connections set credentials = to_jsonb($2::text) where id = $1', [row!.id, fresh]);
    expect(await replaceCredentials(stack.db.pool, row!.id, stale, sealCredentials(BOTH, row!.id, { token: 'before' })!)).toBe(false);
    const [now] = await q<{ credentials: unknown }>('select credentials from connections where id = $1', [row!.id]);
    expect(openCredentials(BOTH, row!.id, now!.credentials)).toEqual({ token: 'patched meanwhile' });
  });
  it('re-seals OAuth 2 grants (shared by two connections) under the new key, bound to the grant, and both connections read the same credential', async () => {
    const [app] = await q<{ id: string }>(
      `insert into oauth_apps (tenant_id, name, client_id, client_secret, authorize_url, token_url, redirect_uri)
       values ('g', 'rot', 'cid', 'x', 'https://p.example/a', 'https://p.example/t', 'https://c.example/cb') returning id`);
    const secret = { kind: 'oauth2', access_token: 'at-rotation-1', refresh_token: 'rt-rotation-1', expires_at: new Date(Date.now() + 3_600_000).toISOString(), scopes: [] };
    const [grant] = await q<{ id: string }>(`insert into oauth_grants (tenant_id, oauth_app_id, credentials) values ('g', $1, '"x"') returning id`, [app!.id]);
    await q('update oauth_grants set credentials = to_jsonb($2::text) where id = $1', [grant!.id, sealCredentials(OLD_ONLY, grant!.id, secret)]);
    const conns = await q<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, credential_kind, oauth_app_id, oauth_grant_id)
       select 'g', 'demo', 'g-' || i, 'oauth2', $1, $2 from generate_series(1, 2) i returning id`, [app!.id, grant!.id]);
    expect(conns).toHaveLength(2);
    const result = await resealSecrets({ pool: stack.db.pool, credentials: BOTH }, 'all');
    expect(result.remaining).toBe(0);
    const [row] = await q<{ credentials: unknown }>('select credentials from oauth_grants where id = $1', [grant!.id]);
    expect(envelopeKeyId(row!.credentials)).toBe('new');
    expect(openCredentials(NEW_ONLY, grant!.id, row!.credentials)).toEqual(secret);
    const used = await q<{ credentials: unknown }>(
      'select g.credentials from connections c join oauth_grants g on g.id = c.oauth_grant_id where c.id = any($1)', [conns.map((c) => c.id)]);
    expect(used.map((u) => u.credentials)).toEqual([row!.credentials, row!.credentials]);
  });

  it('re-seals the PKCE verifier of an open connect flow, which completes after the old key is removed', async () => {
    const oauth = await startFakeOAuth();
    try {
      const deps = (credentials: typeof BOTH) => ({ ...testCommandDeps(stack.db.pool, undefined as never), credentials });
      const app = await createOAuthApp(deps(OLD_ONLY), {
        tenantId: 'flow', name: 'rotating', clientId: oauth.clientId, clientSecret: oauth.clientSecret,
        authorizeUrl: `${oauth.url}/authorize`, tokenUrl: `${oauth.url}/token`, redirectUri: 'https://client.example/cb', scopes: ['read'],
      });
      const [conn] = await q<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ('flow', 'http', 'flow', 'needs_reauth') returning id`);
      // A person starts the connect flow before the rotation (its verifier sealed under the old key) ...
      const start = await startAuthorization(deps(OLD_ONLY), conn!.id, { appId: app.id });
      const consent = await fetch(start.authorization_url, { redirect: 'manual' });
      const back = new URL(consent.headers.get('location')!);
      // ... the rotation runs and reports nothing left under the old key ...
      const result = await resealSecrets({ pool: stack.db.pool, credentials: BOTH }, 'all');
      expect(result.remaining).toBe(0);
      const states = await q<{ code_verifier: string }>('select code_verifier from oauth_states where connection_id = $1', [conn!.id]);
      expect(states.map((s) => envelopeKeyId(s.code_verifier))).toEqual(['new']);
      // ... the old key is removed, and the person comes back from the provider's consent.
      const done = await completeAuthorization(deps(NEW_ONLY), { state: back.searchParams.get('state')!, code: back.searchParams.get('code')! });
      expect(done).toEqual({ connection_id: conn!.id, status: 'active' });
      expect(oauth.counts.code).toBe(1);
    } finally {
      await oauth.close();
    }
  });
});
