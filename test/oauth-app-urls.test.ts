// The endpoints of a tenant's OAuth app as the API takes them (real API app, real Postgres): only the
// authorization URL may carry a query. The token URL is where the client secret goes (a query there
// is no place for a secret: it would be stored and answered unsealed, and the client credentials
// grant's token_url refuses one too), and the redirect URI must reach this API's callback, whose
// own query is the provider's code and state. The token URL, the one endpoint Synctide itself
// requests, must name a host PROVIDER_HOSTS allows, as a provider base URL must.
import { describe, expect, it } from 'vitest';
import { DEFAULT_PROVIDER_POLICY } from '../connectors/provider-http';
import { loadConfig, providerPolicy } from '../lib/config';
import { useApiWithoutTemporal } from './helpers/api';
import { TEST_PROVIDER_POLICY } from './helpers/deps';

describe('OAuth app endpoints', () => {
  const api = useApiWithoutTemporal('oauth-app-urls', { providers: { ...TEST_PROVIDER_POLICY, allowedHosts: ['idp.example'] } });

  let seq = 0;
  const appBody = (urls: Record<string, string> = {}) => ({
    tenant_id: 'acme', name: `app-${++seq}`, client_id: 'client', client_secret: 'client-secret-0123456789',
    authorize_url: 'https://idp.example/authorize', token_url: 'https://idp.example/token', redirect_uri: 'https://synctide.example/oauth/callback', scopes: ['read'],
    ...urls,
  });
  const apps = async () => (await api.db.pool.query<{ n: number }>('select count(*)::int as n from oauth_apps')).rows[0]!.n;

  it('takes a query on the authorization URL only: a token_url or redirect_uri with one is refused 400 naming the field, on create and on update, writing nothing', async () => {
    const withQuery = await api.call('POST', '/oauth-apps', appBody({ authorize_url: 'https://idp.example/authorize?prompt=consent' }));
    expect(withQuery.status, JSON.stringify(withQuery.body)).toBe(201);
    const id = withQuery.body.id as string;
    const before = await apps();

    for (const [field, url] of [
      ['token_url', 'https://idp.example/token?client_secret=in-the-url'],
      ['redirect_uri', 'https://synctide.example/oauth/callback?state=fixed'],
    ] as const) {
      const created = await api.call('POST', '/oauth-apps', appBody({ [field]: url }));
      expect(created.status, JSON.stringify(created.body)).toBe(400);
      expect(created.body.error.message).toMatch(new RegExp(`^${field}: must not carry a query`));
      expect(await apps()).toBe(before);

      const updated = await api.call('PATCH', `/oauth-apps/${id}`, { [field]: url });
      expect(updated.status, JSON.stringify(updated.body)).toBe(400);
      expect(updated.body.error.message).toMatch(new RegExp(`^${field}: must not carry a query`));
      const { rows } = await api.db.pool.query<{ url: string }>(`select ${field} as url from oauth_apps where id = $1`, [id]);
      expect(rows[0]!.url).not.toContain('?');
    }
  });

  it("moves the token endpoint to another origin only with the client secret given again, and never while grants of the app exist (their refresh tokens would go there)", async () => {
    const created = await api.call('POST', '/oauth-apps', appBody());
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const tokenUrl = async () => (await api.db.pool.query<{ u: string }>('select token_url as u from oauth_apps where id = $1', [id])).rows[0]!.u;
    const patch = async (body: Record<string, unknown>) => {
      const res = await api.call('PATCH', `/oauth-apps/${id}`, body);
      return [res.status, res.body.error?.code ?? null, res.body.error?.message ?? null];
    };

    // Another origin (a port is part of it) without the secret: the stored one is not sent there.
    expect(await patch({ token_url: 'https://idp.example:8443/token' })).toEqual([
      400, 'invalid_request', 'token_url: moving the token endpoint to another origin (https://idp.example to https://idp.example:8443) needs client_secret in the same request: the stored secret is never sent to a host it was not given for',
    ]);
    expect(await tokenUrl()).toBe('https://idp.example/token');
    // Another path on the same origin: as before.
    expect((await patch({ token_url: 'https://idp.example/oauth/token' }))[0]).toBe(200);
    // With the secret given again: moved.
    expect((await patch({ token_url: 'https://idp.example:8443/token', client_secret: 'the-secret-for-8443' }))[0]).toBe(200);
    expect(await tokenUrl()).toBe('https://idp.example:8443/token');

    // A grant of the app: its refresh token was given for the app's origin, and no secret given
    // in the request moves it elsewhere.
    await api.db.pool.query(`insert into oauth_grants (tenant_id, oauth_app_id, credentials) values ('acme', $1, '{}')`, [id]);
    expect(await patch({ token_url: 'https://idp.example/token', client_secret: 'another-secret' })).toEqual([
      409, 'oauth_app_in_use', "token_url: connections hold grants of this OAuth app, whose refresh tokens would go to the new origin; create another OAuth app for it and reconnect them",
    ]);
    expect(await tokenUrl()).toBe('https://idp.example:8443/token');
    expect((await patch({ token_url: 'https://idp.example:8443/v2/token' }))[0]).toBe(200);
  });
});

describe('OAuth app endpoints under PROVIDER_HOSTS (a deployment as in production: idp.example allowed, no private addresses)', () => {
  const api = useApiWithoutTemporal('oauth-app-hosts', { providers: { ...DEFAULT_PROVIDER_POLICY, allowedHosts: ['idp.example'] } });

  let seq = 0;
  const appBody = (urls: Record<string, string> = {}) => ({
    tenant_id: 'acme', name: `host-app-${++seq}`, client_id: 'client', client_secret: 'client-secret-0123456789',
    authorize_url: 'https://login.idp-web.example/authorize', token_url: 'https://idp.example/token', redirect_uri: 'https://synctide.example/oauth/callback', scopes: ['read'],
    ...urls,
  });
  const apps = async () => (await api.db.pool.query<{ n: number }>('select count(*)::int as n from oauth_apps')).rows[0]!.n;

  it("refuses a token_url whose host PROVIDER_HOSTS does not allow, 400 naming the field, on create and on update, writing nothing; the authorization and redirect URLs (which only a person's browser visits) may name any public host", async () => {
    const created = await api.call('POST', '/oauth-apps', appBody());
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const before = await apps();

    const refused = await api.call('POST', '/oauth-apps', appBody({ token_url: 'https://collector.attacker.example/token' }));
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body.error.message).toBe("token_url: host 'collector.attacker.example' is not an allowed provider host (PROVIDER_HOSTS)");
    expect(await apps()).toBe(before);

    const updated = await api.call('PATCH', `/oauth-apps/${id}`, { token_url: 'https://collector.attacker.example/token' });
    expect(updated.status, JSON.stringify(updated.body)).toBe(400);
    expect(updated.body.error.message).toBe("token_url: host 'collector.attacker.example' is not an allowed provider host (PROVIDER_HOSTS)");
    const { rows } = await api.db.pool.query<{ url: string }>('select token_url as url from oauth_apps where id = $1', [id]);
    expect(rows[0]!.url).toBe('https://idp.example/token');

    // The host rule is PROVIDER_HOSTS', names compared without case.
    const upper = await api.call('PATCH', `/oauth-apps/${id}`, { token_url: 'https://IDP.example/oauth/token' });
    expect(upper.status, JSON.stringify(upper.body)).toBe(200);
  });
});

describe('OAuth app endpoints under the default PROVIDER_HOSTS', () => {
  const api = useApiWithoutTemporal('oauth-app-default-hosts', { providers: providerPolicy(loadConfig({})) });

  it("takes a GitHub OAuth app (its token URL is on github.com, not api.github.com) and refuses a token_url elsewhere", async () => {
    const app = (token_url: string) => ({
      tenant_id: 'acme', name: `github-${token_url.length}`, client_id: 'Iv1.8a61f9b3a7aba766', client_secret: 'client-secret-0123456789',
      authorize_url: 'https://github.com/login/oauth/authorize', token_url, redirect_uri: 'https://synctide.example/oauth/callback', scopes: ['repo'],
    });
    const github = await api.call('POST', '/oauth-apps', app('https://github.com/login/oauth/access_token'));
    expect(github.status, JSON.stringify(github.body)).toBe(201);
    const elsewhere = await api.call('POST', '/oauth-apps', app('https://idp.example/oauth/token'));
    expect([elsewhere.status, elsewhere.body.error?.message]).toEqual([400, "token_url: host 'idp.example' is not an allowed provider host (PROVIDER_HOSTS)"]);
  });
});
