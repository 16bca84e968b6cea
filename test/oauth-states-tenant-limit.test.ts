// The connect flow's pending states (`oauth_states`, one per POST /connections/{id}/oauth/authorize,
// alive for 10 minutes unless a callback uses it) are a shared table: one tenant may hold at most
// TENANT_MAX_OAUTH_STATES live ones. Over it the start answers 429 `tenant_limit` naming the limit,
// with Retry-After until the tenant's oldest live state expires; concurrent starts take exactly
// the places left; a used or expired state frees its place; other tenants are not held back.
// The real API app on a real Postgres, no Temporal (none is involved).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { seal } from '../lib/credentials';
import { TEST_API_KEY, useApiWithoutTemporal } from './helpers/api';
import { TEST_KEYRING } from './helpers/deps';

const CAP = 3;

describe('live connect-flow states per tenant (real Postgres, the API app)', () => {
  const api = useApiWithoutTemporal('oauth-states-limit', { oauthStatesPerTenant: CAP });
  const q = async <T extends object = Record<string, unknown>>(sql: string, params: unknown[] = []) => (await api.db.pool.query<T>(sql, params)).rows;

  /** An OAuth app of `tenant` (token URL on a host of the tests' provider policy; never called here) and a connection of it needing authorization. */
  async function appAndConnection(tenant: string): Promise<{ appId: string; connectionId: string }> {
    const appId = randomUUID();
    await q(
      `insert into oauth_apps (id, tenant_id, name, client_id, client_secret, authorize_url, token_url, redirect_uri)
       values ($1, $2, $3, 'cid', $4, 'https://example.com/authorize', 'https://api.github.com/token', 'https://example.com/oauth/callback')`,
      [appId, tenant, `app-${appId.slice(0, 8)}`, seal(TEST_KEYRING, { table: 'oauth_apps', id: appId }, 'states-client-secret')],
    );
    const connectionId = randomUUID();
    await q(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, status) values ($1, $2, 'http', $3, '{}', 'needs_reauth')`,
      [connectionId, tenant, `c-${connectionId.slice(0, 8)}`],
    );
    return { appId, connectionId };
  }
  const start = async (flow: { appId: string; connectionId: string }) => {
    const res = await api.app.request(`/connections/${flow.connectionId}/oauth/authorize`, {
      method: 'POST', headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ oauth_app_id: flow.appId }),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as any };
  };
  const stored = async (tenant: string) => (await q<{ n: number }>('select count(*)::int as n from oauth_states where tenant_id = $1', [tenant]))[0]!.n;

  it('a tenant holds at most its limit of live states: over it 429 naming the limit with Retry-After; concurrent starts take exactly the places left; other tenants go on', async () => {
    const flow = await appAndConnection('states-a');
    const burst = await Promise.all(Array.from({ length: CAP + 7 }, () => start(flow)));
    expect(burst.filter((r) => r.status === 200)).toHaveLength(CAP);
    const refused = burst.filter((r) => r.status !== 200);
    expect(refused).toHaveLength(7);
    for (const r of refused) {
      expect(r.status, JSON.stringify(r.body)).toBe(429);
      expect(r.body.error).toMatchObject({ code: 'tenant_limit', limit: 'max_oauth_states', value: CAP });
      expect(r.body.error.message).toContain('max_oauth_states');
      // Until the oldest of the tenant's live states expires: within the state's 10 minutes.
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(r.retryAfter)).toBeLessThanOrEqual(600);
      expect(r.body.error.retry_after_seconds).toBe(Number(r.retryAfter));
    }
    expect(await stored('states-a')).toBe(CAP);
    // The same tenant's other connections share the tenant's places.
    expect((await start(await appAndConnection('states-a'))).status).toBe(429);
    // Another tenant is not held back.
    const other = await appAndConnection('states-b');
    expect((await start(other)).status).toBe(200);
    expect(await stored('states-b')).toBe(1);
  });

  it('a used state and an expired one free their places; expired states of the tenant are deleted', async () => {
    const flow = await appAndConnection('states-c');
    const states: string[] = [];
    for (let k = 0; k < CAP; k += 1) {
      const answer = await start(flow);
      expect(answer.status).toBe(200);
      states.push(new URL(answer.body.authorization_url as string).searchParams.get('state')!);
    }
    expect((await start(flow)).status).toBe(429);
    // A callback consumes its state (here the person declined: the provider's error comes back).
    const declined = await api.call('GET', `/oauth/callback?state=${encodeURIComponent(states[0]!)}&error=access_denied`);
    expect(declined.status).toBe(502);
    expect((await start(flow)).status).toBe(200);
    expect((await start(flow)).status).toBe(429);
    // Expired states (moved into the past here) no longer count, and are cleared.
    await q(`update oauth_states set expires_at = now() - interval '1 second' where tenant_id = 'states-c'`);
    expect((await start(await appAndConnection('states-c'))).status).toBe(200);
    expect(await stored('states-c')).toBe(1);
  });
});
