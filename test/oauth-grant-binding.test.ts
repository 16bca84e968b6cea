// A shared OAuth 2 grant is bound to its use, as any stored credentials are: a connection may share
// the grant of another connection (`{"kind": "oauth2", "grant_from_connection": …}`) only when it
// presents it to the same provider origin in the same way (the http connector's auth scheme and
// its header or query parameter name). Otherwise anyone who may write a tenant's connections could
// have the grant's access tokens, refreshed for as long as the grant lives, sent to a host of their
// choosing, where a PATCH moving a connection's origin drops the credentials it held. Through the
// real API with no Temporal behind it, on real Postgres.
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { sealCredentials } from '../lib/credentials';
import { useApiWithoutTemporal } from './helpers/api';
import { TEST_KEYRING } from './helpers/deps';
import { insertOAuthApp, insertOAuthConnection } from './helpers/oauth-grants';

const api = useApiWithoutTemporal('oauth-grant-binding');
const TENANT = 'acme-binding';
const ORIGIN = 'http://127.0.0.1:9';
const OTHER_ORIGIN = 'http://127.0.0.1:10';

const config = (baseUrl = ORIGIN, auth: Record<string, unknown> = { type: 'bearer' }) => ({
  base_url: baseUrl,
  auth,
  resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } },
});

let appId: string;
beforeAll(async () => {
  appId = await insertOAuthApp(api.db.pool, { tenantId: TENANT, name: 'binding', clientId: 'client-binding', clientSecret: 'client-secret-binding', origin: ORIGIN });
});

/** A paused http connection of the tenant holding an oauth2 grant of its own, presented as `config()` says. */
async function grantHolder(): Promise<string> {
  const id = randomUUID();
  const secret = { kind: 'oauth2', access_token: `at_${randomUUID()}`, refresh_token: `rt_${randomUUID()}`, expires_at: new Date(Date.now() + 3600_000).toISOString(), scopes: [] };
  await insertOAuthConnection(api.db.pool, { id, tenantId: TENANT, appKey: `holder-${id.slice(0, 8)}`, config: config(), appId, sealed: sealCredentials(TEST_KEYRING, id, secret)! });
  await api.db.pool.query(`update connections set status = 'paused' where id = $1`, [id]);
  return id;
}

/** A paused http connection of the tenant with no credentials, of config `cfg`. */
async function bare(cfg: Record<string, unknown>): Promise<string> {
  const id = randomUUID();
  await api.db.pool.query(`insert into connections (id, tenant_id, provider_slug, app_key, config, status) values ($1, $2, 'http', $3, $4, 'paused')`, [id, TENANT, `bare-${id.slice(0, 8)}`, cfg]);
  return id;
}

const grantOf = async (id: string) => (await api.db.pool.query<{ oauth_grant_id: string | null }>('select oauth_grant_id from connections where id = $1', [id])).rows[0]?.oauth_grant_id ?? null;
const baseUrlOf = async (id: string) => (await api.db.pool.query<{ base_url: string }>(`select config ->> 'base_url' as base_url from connections where id = $1`, [id])).rows[0]!.base_url;

describe('sharing an OAuth 2 grant', () => {
  it('into a connection of another provider origin, or presenting it in another way, is refused (400 naming the field); nothing is shared', async () => {
    const source = await grantHolder();
    const shared = { kind: 'oauth2', grant_from_connection: source };
    for (const cfg of [config(OTHER_ORIGIN), config(ORIGIN, { type: 'query', name: 'access_token' })]) {
      const target = await bare(cfg);
      const patched = await api.call('PATCH', `/connections/${target}`, { credentials: shared });
      expect([patched.status, patched.body.error?.code], JSON.stringify(patched.body)).toEqual([400, 'invalid_request']);
      expect(patched.body.error.message).toMatch(/grant_from_connection/);
      expect(await grantOf(target)).toBeNull();
      // A config moved to the other origin in the same request as the grant is given is refused the same.
      const moved = await api.call('PATCH', `/connections/${await bare(config())}`, { config: cfg, credentials: shared });
      expect([moved.status, moved.body.error?.code]).toEqual([400, 'invalid_request']);
      const created = await api.call('POST', '/connections', { tenant_id: TENANT, app_key: `created-${randomUUID().slice(0, 8)}`, provider: 'http', status: 'paused', config: cfg, credentials: shared });
      expect([created.status, created.body.error?.code], JSON.stringify(created.body)).toEqual([400, 'invalid_request']);
    }
    expect((await api.db.pool.query('select 1 from connections where app_key like $1', ['created-%'])).rowCount).toBe(0);
  });

  it('with itself (or a connection sharing its grant) in a PATCH that moves its origin is refused: the grant does not follow the connection to the other origin', async () => {
    const source = await grantHolder();
    const sibling = await bare(config());
    expect((await api.call('PATCH', `/connections/${sibling}`, { credentials: { kind: 'oauth2', grant_from_connection: source } })).status).toBe(200);
    for (const from of [source, sibling]) {
      const moved = await api.call('PATCH', `/connections/${source}`, { config: config(OTHER_ORIGIN), credentials: { kind: 'oauth2', grant_from_connection: from } });
      expect([moved.status, moved.body.error?.code], JSON.stringify(moved.body)).toEqual([400, 'invalid_request']);
      expect(await baseUrlOf(source)).toBe(ORIGIN);
      expect(await grantOf(source)).toBe(source);
    }
  });

  it('into a connection presenting it to the same origin in the same way is allowed (PATCH), also with a config change that keeps both', async () => {
    const source = await grantHolder();
    const target = await bare(config());
    const patched = await api.call('PATCH', `/connections/${target}`, { credentials: { kind: 'oauth2', grant_from_connection: source } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(await grantOf(target)).toBe(source);
    const again = await api.call('PATCH', `/connections/${source}`, { config: { ...config(), resources: { ...config().resources, b: { path: '/others', id: 'id', updated_at: 'updated_at' } } }, credentials: { kind: 'oauth2', grant_from_connection: target } });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect([await grantOf(source), await grantOf(target)]).toEqual([source, source]);
  });
});
