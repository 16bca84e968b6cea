import { createGeneratorSync } from 'json-schema-faker';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createApp } from '../api/app';
import { listen, type HttpServer } from '../lib/http';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { TEST_KEYRING, TEST_PROVIDER_POLICY } from './helpers/deps';
import { capturingLogger } from './helpers/logs';
import { useWorkerStack } from './helpers/stack';
const TQ = 'probe4'; const KEY = 'test-admin-key-0123456789abcdef';
type Json = Record<string, any>;
describe('probe4', () => {
  const stack = useWorkerStack('dev-server', TQ);
  const apiLog = capturingLogger();
  let server: HttpServer; let github: FakeGitHub; let doc: Json;
  async function call(method: string, path: string, body?: unknown) {
    const headers: Record<string, string> = { authorization: `Bearer ${KEY}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let parsed: any = text; try { parsed = JSON.parse(text); } catch { /* */ }
    return { status: res.status, body: parsed };
  }
  beforeAll(async () => {
    server = await listen(createApp({ pool: stack.db.pool, temporal: stack.env.client, registry: stack.registry, metrics: stack.metrics, logger: apiLog.logger, taskQueue: TQ, adminApiKey: KEY, credentials: TEST_KEYRING, maxIntervalSeconds: 86400, immediateSyncTimeoutMs: 60_000, providers: TEST_PROVIDER_POLICY }), '127.0.0.1', 0);
    github = await startFakeGitHub({ token: 'ghp_unused_0123456789', repos: {} });
    doc = (await call('GET', '/openapi.json')).body;
  });
  afterAll(async () => { await server?.close(); await github?.close(); });
  const gen = (method: string, path: string, n: number, seed: number) => {
    const schema = doc.paths[path][method.toLowerCase()].requestBody.content['application/json'].schema;
    const g = createGeneratorSync({ seed });
    return Array.from({ length: n }, () => g.generate({ ...schema, components: doc.components }) as Json);
  };
  it('probes', async () => {
    const conns: Record<string, string> = {};
    for (const [p, config] of [['demo', { records_per_resource: 2, page_size: 1 }], ['github', { repositories: ['a/b'], base_url: github.baseUrl }], ['http', { base_url: github.baseUrl, resources: { items: { path: '/items', id: 'id' } } }]] as const) {
      const r = await call('POST', '/connections', { tenant_id: 'acme', app_key: `c-${p}`, provider: p, status: 'paused', config });
      console.log('create', p, r.status, JSON.stringify(r.body).slice(0, 200));
      conns[p] = r.body.id;
    }
    const stat = new Map<string, number>();
    const routes: [string, string, (b: Json, i: number) => { path: string; body: Json }][] = [
      ['PATCH', '/connections/{id}', (b, i) => { const p = ['demo', 'github', 'http'][i % 3]!; if (b.config && p !== 'demo') { if (p === 'github') b.config.base_url = github.baseUrl; else { b.config.base_url = github.baseUrl; delete b.config.headers; } } if (b.schedule) { delete b.schedule; } return { path: `/connections/${conns[p]}`, body: b }; }],
      ['POST', '/webhooks', (b) => ({ path: '/webhooks', body: b })],
      ['POST', '/oauth-apps', (b, i) => ({ path: '/oauth-apps', body: { ...b, name: `n${i}` } })],
      ['PATCH', '/tenants/{tenant_id}/limits', (b) => ({ path: '/tenants/acme/limits', body: b })],
      ['POST', '/tenants/{tenant_id}/api-keys', (b) => ({ path: '/tenants/acme/api-keys', body: b })],
    ];
    for (const [m, p, adj] of routes) {
      const bodies = gen(m, p, 60, 77);
      for (const [i, g] of bodies.entries()) {
        const req = adj(structuredClone(g), i);
        const a = await call(m, req.path, req.body);
        const k = `${m} ${p} ${a.status} ${a.body?.error?.code ?? ''}`;
        stat.set(k, (stat.get(k) ?? 0) + 1);
        if (a.status >= 500) console.log('!!!', m, req.path, JSON.stringify(req.body).slice(0, 600), JSON.stringify(a.body));
        if (a.status === 400 && (stat.get(k) ?? 0) <= 3) console.log('400', m, p, JSON.stringify(req.body).slice(0, 300), a.body?.error?.message?.slice(0, 200));
      }
    }
    console.log([...stat].map(([k, v]) => `${k}: ${v}`).join('\n'));
    console.log(JSON.stringify(apiLog.lines.filter((l) => l.level === 'error').map((l) => l.err)).slice(0, 3000));
  }, 300_000);
});
