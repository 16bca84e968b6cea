// The endpoints of a tenant's OAuth app as the API takes them (real API app, real Postgres): only the
// authorization URL may carry a query. The token URL is where the client secret goes (a query there
// is no place for a secret: it would be stored and answered unsealed, and the client credentials
// grant's token_url refuses one too), and the redirect URI must reach this API's callback, whose
// own query is the provider's code and state.
import { describe, expect, it } from 'vitest';
import { useApiWithoutTemporal } from './helpers/api';

describe('OAuth app endpoints', () => {
  const api = useApiWithoutTemporal('oauth-app-urls');

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
});
