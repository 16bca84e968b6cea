// A connection its owner paused stays paused through a refused grant and the new credentials that
// end it: a refusal marks it `needs_reauth` keeping what it was (`status_before_reauth`), and new
// credentials of any kind (a token PATCH, a completed connect flow, a shared grant) give it back
// that status, as a refusal undone does. Only a resume makes it active and syncing again. Through
// the real API with no Temporal behind it (and the connect flow's last statement), on real Postgres.
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { attachGrant } from '../db/models/connections';
import { sealCredentials } from '../lib/credentials';
import { useApiWithoutTemporal } from './helpers/api';
import { TEST_KEYRING } from './helpers/deps';
import { insertOAuthApp, insertOAuthConnection } from './helpers/oauth-grants';

const api = useApiWithoutTemporal('reauth-keeps-pause');
const TENANT = 'acme-reauth-pause';
const ORIGIN = 'http://127.0.0.1:9';
const config = { base_url: ORIGIN, auth: { type: 'bearer' }, resources: { a: { path: '/items', id: 'id', updated_at: 'updated_at' } } };

let appId: string;
beforeAll(async () => {
  appId = await insertOAuthApp(api.db.pool, { tenantId: TENANT, name: 'pause', clientId: 'client-pause', clientSecret: 'client-secret-pause', origin: ORIGIN });
});

/** An oauth2 connection of its own grant, in status `was`, then refused as markNeedsReauth marks it. */
async function refused(was: 'active' | 'paused'): Promise<string> {
  const id = randomUUID();
  const secret = { kind: 'oauth2', access_token: `at_${randomUUID()}`, refresh_token: `rt_${randomUUID()}`, expires_at: new Date(Date.now() + 3600_000).toISOString(), scopes: [] };
  await insertOAuthConnection(api.db.pool, { id, tenantId: TENANT, appKey: `c-${id.slice(0, 8)}`, config, appId, sealed: sealCredentials(TEST_KEYRING, id, secret)! });
  await api.db.pool.query(`update connections set status = $2 where id = $1`, [id, was]);
  await api.db.pool.query(`update connections set status = 'needs_reauth', status_before_reauth = status where id = $1`, [id]);
  return id;
}

const stateOf = async (id: string) =>
  (await api.db.pool.query<{ status: string; status_before_reauth: string | null }>('select status, status_before_reauth from connections where id = $1', [id])).rows[0];

describe('new credentials for a connection that needed reauthorization', () => {
  it('give back the status the refusal found: paused stays paused, active is active (a token PATCH)', async () => {
    for (const was of ['paused', 'active'] as const) {
      const id = await refused(was);
      const patched = await api.call('PATCH', `/connections/${id}`, { credentials: { token: `tok_${randomUUID()}` } });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      expect(await stateOf(id)).toEqual({ status: was, status_before_reauth: null });
    }
  });

  it('give back the status the refusal found (a completed connect flow, for every connection of the grant)', async () => {
    const paused = await refused('paused');
    const active = await refused('active');
    // Each one's connect flow stores a new grant for it, and its last statement (attachGrant) ends the refusal.
    for (const id of [paused, active]) {
      const grant = randomUUID();
      await api.db.pool.query('insert into oauth_grants (id, tenant_id, oauth_app_id, credentials) values ($1, $2, $3, to_jsonb($4::text))', [
        grant, TENANT, appId, sealCredentials(TEST_KEYRING, grant, { kind: 'oauth2', access_token: 'new', refresh_token: 'new-rt', expires_at: null, scopes: [] })!,
      ]);
      await attachGrant(api.db.pool, id, grant, appId);
    }
    expect(await stateOf(paused)).toEqual({ status: 'paused', status_before_reauth: null });
    expect(await stateOf(active)).toEqual({ status: 'active', status_before_reauth: null });
  });

  it('give back the status the refusal found (a shared grant)', async () => {
    const source = randomUUID();
    const secret = { kind: 'oauth2', access_token: `at_${randomUUID()}`, refresh_token: `rt_${randomUUID()}`, expires_at: new Date(Date.now() + 3600_000).toISOString(), scopes: [] };
    await insertOAuthConnection(api.db.pool, { id: source, tenantId: TENANT, appKey: `s-${source.slice(0, 8)}`, config, appId, sealed: sealCredentials(TEST_KEYRING, source, secret)! });
    const paused = await refused('paused');
    const shared = await api.call('PATCH', `/connections/${paused}`, { credentials: { kind: 'oauth2', grant_from_connection: source } });
    expect(shared.status, JSON.stringify(shared.body)).toBe(200);
    expect(await stateOf(paused)).toEqual({ status: 'paused', status_before_reauth: null });
  });
});
