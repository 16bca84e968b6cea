// An http connection's config is stored and shown as it is (GET /connections answers it, and it
// travels to the worker with each job): a credential belongs in the connection's credentials,
// sealed at rest and never shown. The API refuses a config that puts one in a fixed request header
// (Authorization, or the header the config's own `auth` sends the token in) or in a fixed query
// parameter of the name a `query` auth sends it in, naming the key and
// never echoing its value; a config stored before the rule was made still syncs.
import { describe, expect, it } from 'vitest';
import { httpConnector } from '../connectors/http';
import { useApiWithoutTemporal } from './helpers/api';

const api = useApiWithoutTemporal('http-config-secrets');

const SECRET = 'sk_live_0123456789abcdef';
const config = (extra: Record<string, unknown>) => ({ base_url: 'http://127.0.0.1:9', resources: { items: { path: '/items', id: 'id' } }, ...extra });

describe('http config: credentials in fixed headers', () => {
  it('refuses Authorization and the auth header among the fixed headers, naming the key and never the value', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ headers: { Authorization: `Bearer ${SECRET}` } }, 'headers.Authorization'],
      [{ headers: { authorization: SECRET } }, 'headers.authorization'],
      [{ auth: { type: 'header', name: 'X-Api-Key' }, headers: { 'x-api-key': SECRET } }, 'headers.x-api-key'],
    ];
    for (const [extra, key] of cases) {
      const res = await api.call('POST', '/connections', { tenant_id: 'acme', app_key: `k-${key.replace(/[^a-z]/gi, "-")}`, provider: 'http', status: 'paused', config: config(extra) });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(JSON.stringify(res.body)).toContain(key);
      expect(JSON.stringify(res.body)).toMatch(/credentials/);
      expect(JSON.stringify(res.body)).not.toContain(SECRET);
    }
  });

  it("refuses a fixed query parameter of the name a query auth sends the token in, naming the key and never the value", async () => {
    const extra = { auth: { type: 'query', name: 'api_key' } };
    const withParams = (params: Record<string, string>) => ({ ...config(extra), resources: { items: { path: '/items', id: 'id', params } } });
    const res = await api.call('POST', '/connections', { tenant_id: 'acme', app_key: 'k-query-param', provider: 'http', status: 'paused', config: withParams({ api_key: SECRET }) });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(JSON.stringify(res.body)).toContain('resources.items.params.api_key');
    expect(JSON.stringify(res.body)).toMatch(/credentials/);
    expect(JSON.stringify(res.body)).not.toContain(SECRET);
    // Query parameter names are case-sensitive: another name is another parameter.
    expect(httpConnector.writeProblem!(withParams({ API_KEY: 'v2' }))).toBeNull();
  });

  it('still reads a config stored with such a header (its syncs go on)', () => {
    expect(httpConnector.resourceTypes(config({ headers: { Authorization: `Bearer ${SECRET}` } }))).toEqual(['items']);
  });
});
