// Multi-tenant security through the real API, worker, time-skipping Temporal server and Postgres:
// known tokens are nowhere at rest, in workflow history, in logs or answers; tenant keys see and
// change only their own tenant (every route, own id / another tenant's id / admin); API keys are
// shown once and revocable; mutating calls are audited; the per-key limit answers 429.
import { randomUUID } from 'node:crypto';
import { generateKeyPairSync } from 'node:crypto';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callApi, startTestApi, TEST_API_KEY, type ApiAnswer, type TestApi } from './helpers/api';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { capturingLogger } from './helpers/logs';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'tenant-security';
const GH_TOKEN = 'ghp_known_token_Q7x2m9Lk4Zp1';
const DEMO_TOKEN = 'demo-known-token-R8s3n0Mj5Yq2';
const DEMO_PASSWORD = 'demo-known-password-T9u4o1Nh6Xr3';
const PATCHED_TOKEN = 'patched-known-token-V0w5p2Pg7Ws4';
const CLIENT_SECRET = 'oauth-client-secret-W1x6q3Qf8Vt5';
const APP_KEY = generateKeyPairSync('rsa', { modulusLength: 2048, publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs1', format: 'pem' } });
/** Lines of the GitHub App's private key: what a leaked key shows wherever it went, its newlines escaped or not. */
const APP_KEY_LINES = APP_KEY.privateKey.split('\n').filter((line) => line.length === 64);


describe('tenant security', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  const apiLog = capturingLogger();
  let api: TestApi;
  let github: FakeGitHub;
  let oauth: FakeOAuth;
  const answers: string[] = [];

  beforeAll(async () => {
    github = await startFakeGitHub({
      token: GH_TOKEN, repos: { 'acme/app': { issues: 12, pulls: 3 } },
      app: { id: 31337, publicKey: APP_KEY.publicKey, installations: [4242] },
    });
    // An OAuth server whose grants are GitHub tokens the fake GitHub accepts, each living one second
    // (refreshed once half of it has passed).
    oauth = await startFakeOAuth({ accessToken: () => GH_TOKEN, clientSecret: CLIENT_SECRET });
    oauth.expiresIn = 1;
    api = await startTestApi(stack, TASK_QUEUE, { logger: apiLog.logger, webhookAllowPrivate: true });
  });
  afterAll(async () => {
    await api?.server.close();
    await github?.close();
    await oauth?.close();
  });

  /** One call with `key` as the bearer token. */
  async function call(key: string, method: string, path: string, body?: unknown): Promise<ApiAnswer> {
    const answer = await callApi(api.server.url, key, method, path, body);
    answers.push(answer.text);
    return answer;
  }
  const admin = (method: string, path: string, body?: unknown) => call(TEST_API_KEY, method, path, body);
  const q = <T = any>(sql: string, params: unknown[] = []) => stack.db.pool.query(sql, params).then((r) => r.rows as T[]);

  async function newKey(tenant: string, scopes?: string[]): Promise<string> {
    const res = await admin('POST', `/tenants/${tenant}/api-keys`, scopes ? { scopes } : { name: `${tenant} backend` });
    expect(res.status, res.text).toBe(201);
    return res.body.secret;
  }

  async function created(res: Promise<ApiAnswer>, status = 201): Promise<any> {
    const answer = await res;
    expect(answer.status, answer.text).toBe(status);
    return answer.body;
  }

  /** Every row of every table as text: what a `pg_dump --data-only` of the database holds. */
  async function dumpAll(): Promise<string> {
    const tables = await q<{ name: string }>(`select tablename as name from pg_tables where schemaname = 'public' order by 1`);
    let dump = '';
    for (const { name } of tables) {
      const [row] = await q<{ text: string | null }>(`select string_agg(t::text, E'\\n') as text from "${name}" t`);
      dump += `-- ${name}\n${row?.text ?? ''}\n`;
    }
    return dump;
  }

  /** The raw protobuf bytes of a workflow's history: payloads appear in it as their JSON bytes. */
  async function historyBytes(workflowId: string): Promise<Buffer> {
    // The time-skipping server now and then answers NOT_FOUND ("Execution not found in mutable
    // state") for a run it has just closed or continued as new: asked again, it answers.
    const history = await eventually(() => stack.env.client.workflow.getHandle(workflowId).fetchHistory().catch(() => undefined));
    return Buffer.from(temporal.api.history.v1.History.encode(history).finish());
  }

  async function jobFinished(key: string, jobId: string): Promise<any> {
    return eventually(async () => {
      const res = await call(key, 'GET', `/jobs/${jobId}`);
      return ['completed', 'failed', 'cancelled'].includes(res.body.status) ? res.body : undefined;
    });
  }

  it('keeps known tokens, refresh tokens, OAuth client secrets (code and client credentials grants), GitHub App private keys, installation tokens and webhook secrets out of every table, the Temporal history of a sync, the logs and every answer', async () => {
    // Names of this attempt's own: the timing-sensitive group retries a failed test once, and a retry must not
    // meet the connections and app of the attempt before it (409 on their app_key and name).
    const attempt = `-${randomUUID().slice(0, 8)}`;
    const gh = await created(
      admin('POST', '/connections', {
        tenant_id: 'acme', app_key: `gh${attempt}`, provider: 'github',
        config: { base_url: github.baseUrl, repositories: ['acme/app'], per_page: 5 },
        credentials: { token: GH_TOKEN }, schedule: { interval_seconds: 86_400 },
      }),
    );
    const demo = await created(
      admin('POST', '/connections', {
        tenant_id: 'acme', app_key: `demo-secret${attempt}`, provider: 'demo', config: { records_per_resource: 3, page_size: 3 },
        credentials: { token: DEMO_TOKEN, password: DEMO_PASSWORD }, schedule: { interval_seconds: 86_400 },
      }),
    );
    expect(gh.has_credentials).toBe(true);
    const patched = await admin('PATCH', `/connections/${demo.id}`, { credentials: { token: PATCHED_TOKEN } });
    expect(patched.status, patched.text).toBe(200);
    const hook = await created(admin('POST', '/webhooks', { tenant_id: 'acme', url: 'http://127.0.0.1:9/hook', event_types: ['connection.breaker_opened'] }));
    const webhookSecret: string = hook.secret;
    expect(webhookSecret.length).toBeGreaterThan(20);
    // Rotated: the new secret answered once, the replaced one kept (sealed) for the overlap.
    const rotatedSecret: string = (await created(admin('POST', `/webhooks/${hook.id}/rotate-secret`, {}), 200)).secret;
    expect(rotatedSecret).not.toBe(webhookSecret);

    // A full sync of the GitHub connection: it can only succeed with the token opened from its envelope.
    const accepted = await created(admin('POST', `/connections/${gh.id}/sync`, { mode: 'full' }), 202);
    expect((await jobFinished(TEST_API_KEY, accepted.job_id)).status).toBe('completed');

    // An oauth2 GitHub connection through the connect flow; its token is refreshed (rotating the
    // refresh token) before its sync's requests, as its one second has passed by then.
    const app = await created(admin('POST', '/oauth-apps', {
      tenant_id: 'acme', name: `gh-app${attempt}`, client_id: oauth.clientId, client_secret: CLIENT_SECRET,
      authorize_url: `${oauth.url}/authorize`, token_url: `${oauth.url}/token`, redirect_uri: `${api.server.url}/oauth/callback`,
    }));
    const ghOAuth = await created(admin('POST', '/connections', {
      tenant_id: 'acme', app_key: `gh-oauth${attempt}`, provider: 'github', config: { base_url: github.baseUrl, repositories: ['acme/app'], per_page: 5 },
      schedule: { interval_seconds: 86_400 },
    }));
    const start = await created(admin('POST', `/connections/${ghOAuth.id}/oauth/authorize`, { oauth_app_id: app.id }), 200);
    const consent = await fetch(start.authorization_url, { redirect: 'manual' });
    const back = await fetch(consent.headers.get('location')!);
    answers.push(await back.text());
    expect(back.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const viaOAuth = await created(admin('POST', `/connections/${ghOAuth.id}/sync`, { mode: 'full' }), 202);
    expect((await jobFinished(TEST_API_KEY, viaOAuth.job_id)).status).toBe('completed');
    expect(oauth.counts.refresh).toBeGreaterThan(0);
    const [stored15] = await q<{ n: number }>('select count(*)::int as n from records where connection_id = $1', [gh.id]);
    expect(stored15!.n).toBeGreaterThan(0);
    expect(github.requests.length).toBeGreaterThan(0);

    // A GitHub App installation: its sync mints an installation token from the app's JWT.
    const ghApp = await created(admin('POST', '/connections', {
      tenant_id: 'acme', app_key: `gh-app-installation${attempt}`, provider: 'github', config: { base_url: github.baseUrl, repositories: ['acme/app'], per_page: 5 },
      credentials: { kind: 'github_app', app_id: 31337, installation_id: 4242, private_key: APP_KEY.privateKey }, schedule: { interval_seconds: 86_400 },
    }));
    const viaApp = await created(admin('POST', `/connections/${ghApp.id}/sync`, { mode: 'full' }), 202);
    expect((await jobFinished(TEST_API_KEY, viaApp.job_id)).status).toBe('completed');
    expect(github.mints.length).toBeGreaterThan(0);
    const installationTokens = github.mints.map((m) => m.token);
    const jwts = github.requests.filter((r) => r.url.startsWith('/app/')).map((r) => String(r.headers.authorization).slice('Bearer '.length));
    expect(APP_KEY_LINES.length).toBeGreaterThan(10);

    // An http connection whose token comes from the client credentials grant (the same client secret).
    const ccBefore = oauth.counts.client;
    const httpClient = await created(admin('POST', '/connections', {
      tenant_id: 'acme', app_key: `http-client-credentials${attempt}`, provider: 'http',
      config: { base_url: oauth.url, auth: { type: 'bearer' }, resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at' } } },
      credentials: { kind: 'oauth2_client_credentials', token_url: `${oauth.url}/token`, client_id: oauth.clientId, client_secret: CLIENT_SECRET },
      schedule: { interval_seconds: 86_400 },
    }));
    const viaClient = await created(admin('POST', `/connections/${httpClient.id}/sync`, { mode: 'full' }), 202);
    expect((await jobFinished(TEST_API_KEY, viaClient.job_id)).status).toBe('completed');
    expect(oauth.counts.client - ccBefore).toBeGreaterThan(0);

    const refreshTokens = oauth.issued.filter((t) => t !== GH_TOKEN);
    expect(refreshTokens.length).toBeGreaterThan(1);
    const secrets = [GH_TOKEN, DEMO_TOKEN, DEMO_PASSWORD, PATCHED_TOKEN, webhookSecret, rotatedSecret, CLIENT_SECRET, ...refreshTokens, ...APP_KEY_LINES, ...installationTokens, ...jwts];
    // At rest: every stored secret is an envelope of key `default`; none of the values appears.
    const dump = await dumpAll();
    expect(dump).toContain(gh.id);
    expect(dump).toContain('enc:v1:default:');
    for (const secret of secrets) expect(dump, 'a secret in the database').not.toContain(secret);
    // An oauth2 connection's credentials are its grant's (`oauth_grants`).
    const stored = await q<{ credentials: unknown }>(
      `select case when c.oauth_grant_id is null then c.credentials else g.credentials end as credentials
         from connections c left join oauth_grants g on g.id = c.oauth_grant_id where c.id = any($1)`,
      [[gh.id, demo.id, ghOAuth.id, ghApp.id, httpClient.id]],
    );
    expect(stored).toHaveLength(5);
    for (const row of stored) expect(row.credentials).toMatch(/^enc:v1:default:/);
    const [appRow] = await q<{ client_secret: string }>('select client_secret from oauth_apps where id = $1', [app.id]);
    expect(appRow!.client_secret).toMatch(/^enc:v1:default:/);
    const [hookRow] = await q<{ secret: string; previous_secret: string }>('select secret, previous_secret from webhooks where id = $1', [hook.id]);
    expect(hookRow!.secret).toMatch(/^enc:v1:default:/);
    expect(hookRow!.previous_secret).toMatch(/^enc:v1:default:/);

    // Temporal history of the sync (its job workflow and the connection's): ids yes, tokens no.
    for (const [workflowId, connectionId] of [[`sync-job:${accepted.job_id}`, gh.id], [`connection:${gh.id}`, gh.id], [`sync-job:${viaOAuth.job_id}`, ghOAuth.id], [`sync-job:${viaApp.job_id}`, ghApp.id], [`sync-job:${viaClient.job_id}`, httpClient.id]] as const) {
      const bytes = await historyBytes(workflowId);
      expect(bytes.includes(connectionId), `${workflowId} names its connection`).toBe(true);
      for (const secret of secrets) expect(bytes.includes(secret), `a secret in ${workflowId}`).toBe(false);
    }

    // Logs of the worker and the API, and every answer but the webhook's one-time secret.
    const logs = JSON.stringify(stack.lines) + JSON.stringify(apiLog.lines);
    expect(logs).toContain(gh.id);
    for (const secret of secrets) expect(logs, 'a secret in the logs').not.toContain(secret);
    const shown = answers.filter((a) => !a.includes('"secret"')).join('\n');
    for (const secret of secrets) expect(shown, 'a secret in an answer').not.toContain(secret);
  });

  it('shows a tenant key once, stores only its hash, stamps last_used_at, and stops it at once when revoked', async () => {
    const res = await admin('POST', '/tenants/keyco/api-keys', { name: 'ci' });
    expect(res.status, res.text).toBe(201);
    const { id, secret, prefix } = res.body;
    expect(secret).toMatch(new RegExp(`^stk_${prefix}_`));
    const [row] = await q<{ secret_hash: Buffer; last_used_at: Date | null }>('select secret_hash, last_used_at from api_keys where id = $1', [id]);
    expect(row!.secret_hash.length).toBe(32);
    expect(row!.last_used_at).toBeNull();
    expect(JSON.stringify(await dumpAll())).not.toContain(secret);

    expect((await call(secret, 'GET', '/connections')).status).toBe(200);
    const listed = await admin('GET', '/tenants/keyco/api-keys');
    expect(listed.body.items).toEqual([expect.objectContaining({ id, prefix, scopes: ['read', 'write'], last_used_at: expect.any(String), revoked_at: null })]);
    expect(listed.text).not.toContain(secret);

    // A wrong secret under the same prefix, and another tenant's path, are refused.
    expect((await call(`${secret.slice(0, -4)}AAAA`, 'GET', '/connections')).status).toBe(401);
    expect((await admin('DELETE', `/tenants/other/api-keys/${id}`)).status).toBe(404);
    const revoked = await admin('DELETE', `/tenants/keyco/api-keys/${id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked_at).toEqual(expect.any(String));
    expect((await call(secret, 'GET', '/connections')).status).toBe(401);

    // A read-only key reads but may not change anything.
    const reader = await newKey('keyco', ['read']);
    expect((await call(reader, 'GET', '/connections')).status).toBe(200);
    const refused = await call(reader, 'POST', '/connections', { tenant_id: 'keyco', app_key: 'nope', provider: 'demo' });
    expect(refused.status).toBe(403);
    expect(await q('select 1 from connections where app_key = $1', ['nope'])).toEqual([]);
  });

  it('matrix: every route × {own id, another tenant’s id, admin}: only own and admin succeed; another tenant’s id answers 404 and changes nothing', async () => {
    const alphaKey = await newKey('alpha');
    const betaKey = await newKey('beta');

    /** One tenant's resources: a fast connection, a slow one with a running job, a webhook, a connection to delete. */
    async function resources(tenant: string, tag: string) {
      const conn = await created(admin('POST', '/connections', {
        tenant_id: tenant, app_key: `${tag}-c`, provider: 'demo', config: { records_per_resource: 2, page_size: 2 }, schedule: { interval_seconds: 86_400 },
      }));
      const slow = await created(admin('POST', '/connections', {
        tenant_id: tenant, app_key: `${tag}-slow`, provider: 'demo', schedule: { interval_seconds: 86_400 },
        config: { resource_types: ['items'], records_per_resource: 2000, page_size: 1, latency_ms: 50 },
      }));
      const doomed = await created(admin('POST', '/connections', {
        tenant_id: tenant, app_key: `${tag}-doomed`, provider: 'demo', config: { records_per_resource: 1, page_size: 1 }, schedule: { interval_seconds: 86_400 },
      }));
      const job = await created(admin('POST', `/connections/${slow.id}/sync`, { mode: 'incremental' }), 202);
      const hook = await created(admin('POST', '/webhooks', { tenant_id: tenant, url: 'http://127.0.0.1:9/hook', event_types: ['connection.breaker_opened'] }));
      const app = await created(admin('POST', '/oauth-apps', { tenant_id: tenant, name: `${tag}-app`, ...APP }));
      // A paused connection holding an OAuth 2 grant (as a connect flow leaves it), whose grant others may share.
      const oauthConn = await created(admin('POST', '/connections', {
        tenant_id: tenant, app_key: `${tag}-oauth`, provider: 'demo', config: { records_per_resource: 1, page_size: 1 }, status: 'paused', schedule: { interval_seconds: 86_400 },
      }));
      const [grant] = await q<{ id: string }>(
        `insert into oauth_grants (tenant_id, oauth_app_id, credentials) values ($1, $2, to_jsonb('enc:v1:default:matrix'::text)) returning id`, [tenant, app.id]);
      await q(`update connections set credential_kind = 'oauth2', oauth_app_id = $2, oauth_grant_id = $3 where id = $1`, [oauthConn.id, app.id, grant!.id]);
      return {
        tenant, tag, conn: conn.id as string, connKey: `${tag}-c`, slow: slow.id as string, doomed: doomed.id as string, job: job.job_id as string,
        hook: hook.id as string, purge: '', newHook: '', app: app.id as string, newApp: '', oauthConn: oauthConn.id as string,
      };
    }
    const APP = {
      client_id: 'matrix-client', client_secret: 'matrix-client-secret', authorize_url: 'https://example.com/authorize',
      token_url: 'https://api.github.com/token', /* a PROVIDER_HOSTS host of the tests' policy */ redirect_uri: 'https://example.com/oauth/callback',
    };
    const alpha = await resources('alpha', 'a');
    const own = await resources('beta', 'b');
    const adm = await resources('beta', 'b2');
    const settled = (sql: string, params: unknown[]) => eventually(async () => ((await q(sql, params)).length === 0 ? true : undefined));
    // The slow jobs are running (they stay so until the cancel route).
    await settled(`select 1 from sync_jobs where id = any($1) and status <> 'running'`, [[alpha.job, own.job, adm.job]]);

    type World = typeof own;
    /** Waits until the connection workflows stored their pause or resume (they write the status too). */
    const intentsStored = (status: string) =>
      eventually(async () => {
        for (const id of [own.conn, adm.conn]) {
          const res = await admin('GET', `/connections/${id}`);
          if (res.body.status !== status || !res.body.live || res.body.live.pending.length > 0) return undefined;
        }
        return true;
      });
    const window = { start: '2020-01-01T00:00:00Z', end: '2020-01-02T00:00:00Z' };
    /** Every tenant route: how to call it on world `w`, and what success is. */
    const routes: { name: string; ok: number; call: (key: string, w: World, n: number) => Promise<ApiAnswer>; settle?: () => Promise<unknown> }[] = [
      { name: 'POST /connections', ok: 201, call: (k, w, n) => call(k, 'POST', '/connections', { tenant_id: w.tenant, app_key: `${w.tag}-new-${n}`, provider: 'demo' }) },
      { name: 'GET /connections?tenant_id', ok: 200, call: (k, w) => call(k, 'GET', `/connections?tenant_id=${w.tenant}`) },
      { name: 'GET /connections/:id', ok: 200, call: (k, w) => call(k, 'GET', `/connections/${w.conn}`) },
      { name: 'PATCH /connections/:id', ok: 200, call: (k, w) => call(k, 'PATCH', `/connections/${w.conn}`, { config: { records_per_resource: 3, page_size: 3 }, credentials: { token: 'x' } }) },
      { name: 'POST /connections/:id/pause', ok: 200, call: (k, w) => call(k, 'POST', `/connections/${w.conn}/pause`), settle: () => intentsStored('paused') },
      { name: 'POST /connections/:id/resume', ok: 200, call: (k, w) => call(k, 'POST', `/connections/${w.conn}/resume`), settle: () => intentsStored('active') },
      { name: 'POST /connections/:id/sync', ok: 202, call: (k, w) => call(k, 'POST', `/connections/${w.conn}/sync`, { mode: 'incremental' }) },
      { name: 'GET /connections/:id/records', ok: 200, call: (k, w) => call(k, 'GET', `/connections/${w.slow}/records`) },
      { name: 'POST /sync (tenant_id)', ok: 202, call: (k, w) => call(k, 'POST', '/sync', { app_key: w.connKey, tenant_id: w.tenant }) },
      { name: 'POST /jobs/schedule', ok: 202, call: (k, w) => call(k, 'POST', '/jobs/schedule', { pairId: w.conn, window }) },
      { name: 'GET /jobs/:id', ok: 200, call: (k, w) => call(k, 'GET', `/jobs/${w.job}?include_tasks=true`) },
      { name: 'GET /jobs?tenant_id', ok: 200, call: (k, w) => call(k, 'GET', `/jobs?tenant_id=${w.tenant}`) },
      { name: 'GET /jobs?connection_id', ok: 200, call: (k, w) => call(k, 'GET', `/jobs?connection_id=${w.slow}`) },
      {
        name: 'POST /jobs/:id/cancel', ok: 202, call: (k, w) => call(k, 'POST', `/jobs/${w.job}/cancel`),
        settle: () => settled(`select 1 from sync_jobs where id = any($1) and status <> 'cancelled'`, [[own.job, adm.job]]),
      },
      {
        name: 'POST /webhooks', ok: 201,
        call: async (k, w) => {
          const res = await call(k, 'POST', '/webhooks', { tenant_id: w.tenant, url: 'http://127.0.0.1:9/other', event_types: ['sync.failed'] });
          if (res.status === 201) w.newHook = res.body.id;
          return res;
        },
      },
      { name: 'GET /webhooks?tenant_id', ok: 200, call: (k, w) => call(k, 'GET', `/webhooks?tenant_id=${w.tenant}`) },
      { name: 'GET /webhooks/:id', ok: 200, call: (k, w) => call(k, 'GET', `/webhooks/${w.hook}`) },
      { name: 'GET /webhooks/:id/deliveries', ok: 200, call: (k, w) => call(k, 'GET', `/webhooks/${w.hook}/deliveries`) },
      { name: 'POST /webhooks/:id/rotate-secret', ok: 200, call: (k, w) => call(k, 'POST', `/webhooks/${w.hook}/rotate-secret`, {}) },
      { name: 'PATCH /webhooks/:id', ok: 200, call: (k, w) => call(k, 'PATCH', `/webhooks/${w.hook}`, { enabled: true }) },
      { name: 'DELETE /webhooks/:id', ok: 204, call: (k, w) => call(k, 'DELETE', `/webhooks/${w.hook}`) },
      {
        name: 'POST /oauth-apps', ok: 201,
        call: async (k, w, n) => {
          const res = await call(k, 'POST', '/oauth-apps', { tenant_id: w.tenant, name: `${w.tag}-app-${n}`, ...APP });
          if (res.status === 201) w.newApp = res.body.id;
          return res;
        },
      },
      { name: 'GET /oauth-apps?tenant_id', ok: 200, call: (k, w) => call(k, 'GET', `/oauth-apps?tenant_id=${w.tenant}`) },
      { name: 'GET /oauth-apps/:id', ok: 200, call: (k, w) => call(k, 'GET', `/oauth-apps/${w.app}`) },
      { name: 'PATCH /oauth-apps/:id', ok: 200, call: (k, w) => call(k, 'PATCH', `/oauth-apps/${w.app}`, { scopes: ['repo'] }) },
      { name: 'POST /connections/:id/oauth/authorize', ok: 200, call: (k, w) => call(k, 'POST', `/connections/${w.conn}/oauth/authorize`, { oauth_app_id: w.app }) },
      { name: 'DELETE /oauth-apps/:id', ok: 204, call: (k, w) => call(k, 'DELETE', `/oauth-apps/${w.newApp}`) },
      {
        name: 'PATCH /connections/:id (credentials: a shared OAuth 2 grant)', ok: 200,
        call: (k, w) => call(k, 'PATCH', `/connections/${w.conn}`, { credentials: { kind: 'oauth2', grant_from_connection: w.oauthConn } }),
      },
      { name: 'POST /connections/:id/disable', ok: 200, call: (k, w) => call(k, 'POST', `/connections/${w.conn}/disable`) },
      {
        name: 'DELETE /connections/:id', ok: 202,
        call: async (k, w) => {
          const res = await call(k, 'DELETE', `/connections/${w.doomed}`);
          if (res.status === 202) w.purge = res.body.id;
          return res;
        },
        settle: () => settled(`select 1 from connection_purges where status <> 'completed'`, []),
      },
      { name: 'GET /purges/:id', ok: 200, call: (k, w) => call(k, 'GET', `/purges/${w.purge || adm.purge}`) },
    ];

    /**
     * What an API call can write: row counts of the tables calls write (connections, webhooks and
     * their deliveries, purges, API keys, and jobs the API inserts itself, `api` and `backfill`;
     * the connection workflows insert the scheduled and sync-now ones, and syncs write the rest in
     * the background), and the other tenant's rows as they stand.
     */
    async function snapshot() {
      const counts: Record<string, number> = {};
      for (const table of ['connections', 'webhooks', 'webhook_events', 'webhook_deliveries', 'connection_purges', 'api_keys', 'oauth_apps', 'oauth_states', 'oauth_grants']) {
        counts[table] = (await q<{ n: number }>(`select count(*)::int as n from "${table}"`))[0]!.n;
      }
      counts.requested_jobs = (await q<{ n: number }>(`select count(*)::int as n from sync_jobs where trigger in ('api', 'backfill')`))[0]!.n;
      const beta = await q(`select id, status, app_key, config, credentials, credential_kind, oauth_grant_id from connections where tenant_id = 'beta' order by id`);
      const hooks = await q(`select id, url, event_types, secret, previous_secret, previous_secret_expires_at from webhooks where tenant_id = 'beta' order by id`);
      const apps = await q(`select id, client_id, client_secret, scopes, token_url from oauth_apps where tenant_id = 'beta' order by id`);
      const slowJobs = await q(`select id, status from sync_jobs where id = any($1) order by id`, [[own.job, adm.job]]);
      return { counts, beta, hooks, apps, slowJobs };
    }

    let n = 0;
    for (const route of routes) {
      n += 1;
      // Another tenant's id (alpha's key on beta's resources): 404, and nothing changed.
      const before = await snapshot();
      const cross = await route.call(alphaKey, own, n);
      expect(cross.status, `${route.name} with another tenant's id: ${cross.text}`).toBe(404);
      expect(cross.body.error.code).toBe('not_found');
      expect(await snapshot(), `${route.name} with another tenant's id changed something`).toEqual(before);
      // Own id and the admin key succeed.
      const mine = await route.call(betaKey, own, n);
      expect(mine.status, `${route.name} with the tenant's own id: ${mine.text}`).toBe(route.ok);
      const asAdmin = await route.call(TEST_API_KEY, adm, n);
      expect(asAdmin.status, `${route.name} as admin: ${asAdmin.text}`).toBe(route.ok);
      await route.settle?.();
    }

    // Listings never show another tenant: alpha's key without a filter sees alpha only.
    for (const path of ['/connections', '/jobs', '/webhooks', '/oauth-apps']) {
      const res = await call(alphaKey, 'GET', path);
      expect(res.status).toBe(200);
      expect(res.body.items.length).toBeGreaterThan(0);
      expect(new Set(res.body.items.map((i: { tenant_id: string }) => i.tenant_id)), path).toEqual(new Set(['alpha']));
    }
    // A shared grant: its source is looked for in the connection's own tenant only (another
    // tenant's connection answers 404 like any other id of it), and must hold an oauth2 grant.
    const before = await q(`select id, credential_kind, oauth_grant_id from connections where id = $1`, [own.slow]);
    const foreign = await call(betaKey, 'PATCH', `/connections/${own.slow}`, { credentials: { kind: 'oauth2', grant_from_connection: alpha.oauthConn } });
    expect([foreign.status, foreign.body.error.code]).toEqual([404, 'not_found']);
    const notOAuth = await call(betaKey, 'PATCH', `/connections/${own.slow}`, { credentials: { kind: 'oauth2', grant_from_connection: own.slow } });
    expect([notOAuth.status, notOAuth.body.error.code]).toEqual([409, 'grant_source_not_oauth2']);
    const foreignNew = await call(betaKey, 'POST', '/connections', {
      tenant_id: 'beta', app_key: 'b-shares-alpha', provider: 'demo', credentials: { kind: 'oauth2', grant_from_connection: alpha.oauthConn },
    });
    expect([foreignNew.status, foreignNew.body.error.code]).toEqual([404, 'not_found']);
    expect(await q('select 1 from connections where app_key = $1', ['b-shares-alpha'])).toEqual([]);
    expect(await q(`select id, credential_kind, oauth_grant_id from connections where id = $1`, [own.slow])).toEqual(before);
    const shared = await q<{ oauth_grant_id: string }>('select oauth_grant_id from connections where id = any($1)', [[own.conn, own.oauthConn]]);
    expect(new Set(shared.map((r) => r.oauth_grant_id)).size).toBe(1);
    // An id escaped in the path is checked as the route decodes it.
    const escaped = `%${own.slow.charCodeAt(0).toString(16)}${own.slow.slice(1)}`;
    expect((await call(alphaKey, 'GET', `/connections/${escaped}`)).status).toBe(404);
    expect((await call(betaKey, 'GET', `/connections/${escaped}`)).status).toBe(200);
    // POST /sync by app_key alone looks in the key's own tenant only.
    expect((await call(alphaKey, 'POST', '/sync', { app_key: own.connKey })).status).toBe(404);
    // Redelivery of another tenant's webhook is hidden by the webhook id.
    // Redelivery names the webhook first: another tenant's webhook is hidden (the scope's answer),
    // while on its own webhook the key reaches the route (which looks for the delivery).
    const redeliver = await call(alphaKey, 'POST', `/webhooks/${own.newHook}/deliveries/${alpha.hook}/redeliver`);
    expect(redeliver.status).toBe(404);
    expect(redeliver.body.error.message).toBe('no such resource');
    const ownRedeliver = await call(betaKey, 'POST', `/webhooks/${own.newHook}/deliveries/${alpha.hook}/redeliver`);
    expect([ownRedeliver.status, ownRedeliver.body.error.message]).toEqual([404, 'no delivery with that id for this webhook']);

    // Admin-only routes: a tenant key is refused (403) whatever the tenant; the admin succeeds.
    const adminOnly: [string, string, number, unknown?][] = [
      ['POST', '/tenants/beta/api-keys', 201],
      ['GET', '/tenants/beta/api-keys', 200],
      ['GET', '/audit?tenant_id=beta', 200],
      ['GET', '/metrics', 200],
      // A tenant can neither read nor raise its own limits.
      ['GET', '/tenants/beta/limits', 200],
      ['PATCH', '/tenants/beta/limits', 200, { max_connections: null }],
    ];
    for (const [method, path, ok, body] of adminOnly) {
      expect((await call(betaKey, method, path, body)).status, `${method} ${path} with a tenant key`).toBe(403);
      expect((await call(TEST_API_KEY, method, path, body)).status, `${method} ${path} as admin`).toBe(ok);
    }
    const keys = await admin('GET', '/tenants/beta/api-keys');
    const betaKeyId: string = keys.body.items[0].id;
    expect((await call(betaKey, 'DELETE', `/tenants/beta/api-keys/${betaKeyId}`)).status).toBe(403);

    // The audit log has the calls: who, what, target, result; newest first; by tenant.
    const audit = await admin('GET', '/audit?tenant_id=beta&limit=200');
    const entries: any[] = audit.body.items;
    expect(entries.some((e) => e.actor === `key:${betaKeyId}` && e.method === 'DELETE' && e.path === `/connections/${own.doomed}` && e.status === 202 && e.target_id === own.doomed)).toBe(true);
    expect(entries.some((e) => e.actor === 'admin' && e.method === 'POST' && e.path === `/connections/${adm.conn}/pause` && e.tenant_id === 'beta')).toBe(true);
    expect(entries.every((e) => e.tenant_id === 'beta' || e.target_tenant_id === 'beta')).toBe(true);
    expect(entries.some((e) => e.method === 'GET')).toBe(false);
    const ids = entries.map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    // The refused cross-tenant calls are audited under alpha's key with their 404, and shown to
    // beta, the tenant they aimed at.
    const alphaAudit = await admin('GET', '/audit?tenant_id=alpha&limit=200');
    expect(alphaAudit.body.items.some((e: any) => e.status === 404 && e.path === `/connections/${own.conn}/pause`)).toBe(true);
    expect(entries.some((e) => e.tenant_id === 'alpha' && e.target_tenant_id === 'beta' && e.status === 404 && e.path === `/connections/${own.conn}/pause`)).toBe(true);
  });

  it("quotas: a tenant at its limits is refused with the limit named, whoever calls; another tenant's calls and limits are untouched", async () => {
    const gammaKey = await newKey('gamma');
    const deltaKey = await newKey('delta');
    const limits = await admin('PATCH', '/tenants/gamma/limits', { max_connections: 1, max_webhooks: 1 });
    expect(limits.status, limits.text).toBe(200);
    const conn = (n: number) => ({ tenant_id: 'gamma', app_key: `q-${n}`, provider: 'demo', status: 'paused' });
    const hook = { tenant_id: 'gamma', url: 'http://127.0.0.1:9/q', event_types: ['sync.failed'] };
    await created(call(gammaKey, 'POST', '/connections', conn(1)));
    await created(call(gammaKey, 'POST', '/webhooks', hook));
    // Over the limit, with the tenant's own key or the admin's: 409 naming the limit and its value.
    for (const key of [gammaKey, TEST_API_KEY]) {
      const c = await call(key, 'POST', '/connections', conn(2));
      expect([c.status, c.body.error]).toEqual([409, expect.objectContaining({ code: 'tenant_limit', limit: 'max_connections', value: 1 })]);
      const w = await call(key, 'POST', '/webhooks', hook);
      expect([w.status, w.body.error]).toEqual([409, expect.objectContaining({ code: 'tenant_limit', limit: 'max_webhooks', value: 1 })]);
    }
    // Another tenant is not held back, and gamma's limits are not its own.
    await created(call(deltaKey, 'POST', '/connections', { ...conn(2), tenant_id: 'delta' }));
    await created(call(deltaKey, 'POST', '/webhooks', { ...hook, tenant_id: 'delta' }));
    expect((await admin('GET', '/tenants/delta/limits')).body.overrides.max_connections).toBeNull();
    // A tenant key cannot reach another tenant's limits either.
    expect((await call(deltaKey, 'PATCH', '/tenants/gamma/limits', { max_connections: 100 })).status).toBe(403);
    expect((await admin('GET', '/tenants/gamma/limits')).body.limits.max_connections).toBe(1);
  });

  it('answers 429 with Retry-After once a key has used its burst, and other keys go on', async () => {
    const limited = await startTestApi(stack, TASK_QUEUE, { rateLimit: { ratePerSecond: 0.001, burst: 3 } });
    try {
      const key = await newKey('ratey');
      const get = (k: string) => fetch(`${limited.server.url}/connections`, { headers: { authorization: `Bearer ${k}` } });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await get(key)).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      const refused = await get(key);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
      // The admin key has a bucket of its own.
      expect((await get(TEST_API_KEY)).status).toBe(200);
    } finally {
      await limited.server.close();
    }
  });

  it('refuses a key over its rate before looking it up, and a made-up token with its prefix cannot empty its bucket', async () => {
    const limited = await startTestApi(stack, TASK_QUEUE, { rateLimit: { ratePerSecond: 0.001, burst: 2 } });
    try {
      const get = (k: string) => fetch(`${limited.server.url}/connections`, { headers: { authorization: `Bearer ${k}` } });
      const key = await newKey('prefixy');
      const prefix = key.split('_')[1]!;
      // Made-up tokens carrying the key's public prefix are not found: 401, and its bucket keeps its tokens.
      const forged = `stk_${prefix}_${'A'.repeat(43)}`;
      expect([(await get(forged)).status, (await get(forged)).status, (await get(forged)).status]).toEqual([401, 401, 401]);
      expect([(await get(key)).status, (await get(key)).status, (await get(key)).status]).toEqual([200, 200, 429]);
      // Over its rate the key is refused before its row is read: revoked meanwhile, it is still
      // answered 429, not 401 (a lookup would have found no active key).
      await stack.db.pool.query('update api_keys set revoked_at = now() where prefix = $1', [prefix]);
      const refused = await get(key);
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
      // Another key of the same tenant has a bucket of its own, and is looked up.
      expect((await get(await newKey('prefixy'))).status).toBe(200);
    } finally {
      await limited.server.close();
    }
  });
});
