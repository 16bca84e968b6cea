// Properties of every route that takes a JSON body, over generated bad input (a field replaced by
// any JSON value, a huge, negative or fractional number, a number no double holds, a long or odd
// string, an unknown key, a body that is no object, not JSON or not declared JSON), sent with the
// admin key or a tenant key: the answer is never a 5xx, a refusal is a 4xx with a JSON error code
// and changes nothing stored, and no answer echoes a secret. And of every route that names a
// resource by id: another tenant's id, in any spelling, answers a tenant key 404 exactly as a
// missing one, changing nothing of that tenant's. Against the real API app, Postgres and the
// Temporal dev server (no worker: the workflows it starts wait).
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiAppOnTemporal, TEST_API_KEY } from './helpers/api';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { capturingLogger } from './helpers/logs';
import { useServers } from './helpers/stack';

const SECRET = 'never-echoed-secret-4f1c9a';
const HTTP_CONFIG = { base_url: 'http://127.0.0.1:1', auth: { type: 'bearer' }, resources: { items: { path: '/items', id: 'id' } } };
const WINDOW = { start: '2025-01-01T00:00:00Z', end: '2025-01-02T00:00:00Z' };

describe('bad input and other tenants’ ids (real API app, Postgres, Temporal)', () => {
  const servers = useServers('dev-server');
  const logs = capturingLogger();
  let app: ReturnType<typeof apiAppOnTemporal>;
  /** Per tenant (`a`, `b`): its key's secret and the ids of what it holds. */
  const held: Record<'a' | 'b', { key: string; keyId: string; conn: string; hook: string; oauth: string; job: string }> = {} as never;

  interface Answer {
    status: number;
    text: string;
    body: any;
  }
  async function send(key: string, method: string, path: string, body?: string, contentType = 'application/json', extra: Record<string, string> = {}): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, ...extra };
    if (body !== undefined) headers['content-type'] = contentType;
    const res = await app.request(path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, text, body: parsed };
  }
  const call = (key: string, method: string, path: string, body?: unknown) => send(key, method, path, body === undefined ? undefined : JSON.stringify(body));

  /** Every table's rows but the audit log's and the keys' last use (each call writes them), as one text per table. */
  async function stored(): Promise<string> {
    const { rows: tables } = await servers.db.pool.query<{ name: string }>(
      `select tablename as name from pg_tables where schemaname = 'public' and tablename not in ('audit_log', 'pgmigrations') order by 1`,
    );
    const parts: string[] = [];
    for (const { name } of tables) {
      const row = name === 'api_keys' ? `(to_jsonb(t) - 'last_used_at')::text` : 't::text';
      const { rows } = await servers.db.pool.query<{ h: string }>(`select coalesce(string_agg(${row}, '|' order by ${row}), '') as h from "${name}" t`);
      parts.push(`${name}: ${rows[0]!.h}`);
    }
    return parts.join('\n');
  }

  beforeAll(async () => {
    app = apiAppOnTemporal(servers.db.pool, servers.env.client, 'api-input-properties', {
      logger: logs.logger,
      webhookAllowPrivate: true,
      providers: { ...TEST_PROVIDER_POLICY, allowedHosts: ['idp.example', '127.0.0.1'] },
    });
    for (const t of ['a', 'b'] as const) {
      const created = async (path: string, body: unknown, status = 201) => {
        const answer = await call(TEST_API_KEY, 'POST', path, body);
        expect(answer.status, answer.text).toBe(status);
        return answer.body;
      };
      const key = await created(`/tenants/${t}/api-keys`, {});
      const conn = await created('/connections', { tenant_id: t, app_key: 'http', provider: 'http', status: 'active', config: HTTP_CONFIG, credentials: { token: SECRET } });
      const hook = await created('/webhooks', { tenant_id: t, url: 'http://127.0.0.1:9/hook', event_types: ['sync.failed'] });
      const oauth = await created('/oauth-apps', {
        tenant_id: t, name: 'app', client_id: 'client', client_secret: SECRET, authorize_url: 'https://idp.example/a', token_url: 'https://idp.example/t', redirect_uri: 'https://x.example/cb',
      });
      const job = await created(`/connections/${conn.id}/sync`, {}, 202);
      held[t] = { key: key.secret, keyId: key.id, conn: conn.id, hook: hook.id, oauth: oauth.id, job: job.job_id };
    }
  }, 120_000);

  /** Routes with a JSON body, each with a body it takes (for tenant `a`). */
  const bodies = (): [string, string, () => Record<string, unknown>][] => [
    ['POST', '/connections', () => ({ tenant_id: 'a', app_key: `n${Math.floor(Math.random() * 1e9)}`, provider: 'http', status: 'paused', config: HTTP_CONFIG, credentials: { token: SECRET }, schedule: { interval_seconds: 3600 } })],
    ['PATCH', `/connections/${held.a.conn}`, () => ({ config: HTTP_CONFIG, credentials: { token: SECRET }, schedule: { cron: '*/15 * * * *', timezone: 'Europe/Berlin', full_sync_every: 7 } })],
    ['POST', `/connections/${held.a.conn}/sync`, () => ({ mode: 'full', resource_types: ['items'] })],
    ['POST', '/sync', () => ({ app_key: 'http', tenant_id: 'a', mode: 'incremental', resource_types: ['items'] })],
    ['POST', '/jobs/schedule', () => ({ pairId: held.a.conn, window: WINDOW, priority: 0, payload: { resource_types: ['items'], reason: 'x' } })],
    ['POST', '/webhooks', () => ({ tenant_id: 'a', url: 'http://127.0.0.1:9/other', event_types: ['sync.failed'] })],
    ['POST', `/webhooks/${held.a.hook}/rotate-secret`, () => ({ expire_previous_after_seconds: 10 })],
    ['PATCH', `/webhooks/${held.a.hook}`, () => ({ enabled: false })],
    ['POST', '/oauth-apps', () => ({ tenant_id: 'a', name: `n${Math.floor(Math.random() * 1e9)}`, client_id: 'c', client_secret: SECRET, authorize_url: 'https://idp.example/a', token_url: 'https://idp.example/t', redirect_uri: 'https://x.example/cb', scopes: ['read'] })],
    ['PATCH', `/oauth-apps/${held.a.oauth}`, () => ({ client_id: 'c', client_secret: SECRET, scopes: ['read'] })],
    ['POST', `/connections/${held.a.conn}/oauth/authorize`, () => ({ oauth_app_id: held.a.oauth, redirect_uri: 'https://x.example/cb', scopes: ['read'] })],
    ['POST', '/tenants/a/api-keys', () => ({ name: 'n', scopes: ['read', 'write'] })],
    ['PATCH', '/tenants/a/limits', () => ({ max_connections: 100, max_webhooks: 5, max_running_jobs: 3 })],
  ];

  const anyValue = fc.oneof(
    fc.jsonValue(),
    fc.constantFrom<unknown>(1e308, -1e308, 2 ** 53, 2 ** 31, -(2 ** 31) - 1, 2 ** 63, 0.5, -1, -0.0001, '', ' ', 'x'.repeat(70_000), '\u{10FFFF}', '0000-01-01T00:00:00Z', [], {}, [[]], null),
    fc.string({ unit: 'binary', maxLength: 40 }),
  );
  /** Text that replaces a field's JSON: numbers no double holds, and what JSON.stringify never writes. */
  const rawValue = fc.constantFrom('1e400', '-1e400', '1e-400', '9007199254740993', '{"__proto__":{"a":1}}', '"\\u0000"', '"\\ud800"', '['.repeat(100) + ']'.repeat(100));
  /** A body as sent: a base with one field (at a path of random keys) replaced, or a key added; or no object at all. */
  const mutation = fc.oneof(
    fc.record({ kind: fc.constant('field' as const), path: fc.array(fc.nat(20), { minLength: 1, maxLength: 4 }), value: anyValue }),
    fc.record({ kind: fc.constant('raw' as const), path: fc.array(fc.nat(20), { minLength: 1, maxLength: 4 }), text: rawValue }),
    fc.record({ kind: fc.constant('key' as const), key: fc.string({ maxLength: 10 }) }),
    fc.record({ kind: fc.constant('body' as const), text: fc.constantFrom('', '{', '[]', 'null', '"x"', '1', '{"a":1,}', '\ufeff{}') }),
    fc.record({ kind: fc.constant('type' as const), contentType: fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', 'application/merge-patch+json') }),
  );
  type Mutation = typeof mutation extends fc.Arbitrary<infer M> ? M : never;
  const MARK = '"__raw_value__"';
  function bodyText(base: Record<string, unknown>, m: Mutation): { text: string; contentType: string } {
    if (m.kind === 'body') return { text: m.text, contentType: 'application/json' };
    if (m.kind === 'type') return { text: JSON.stringify(base), contentType: m.contentType };
    if (m.kind === 'key') return { text: JSON.stringify({ ...base, [m.key]: 1 }), contentType: 'application/json' };
    const copy = structuredClone(base);
    let node: Record<string, unknown> = copy;
    for (let depth = 0; depth < m.path.length; depth++) {
      const keys = Object.keys(node);
      if (keys.length === 0) break;
      const key = keys[m.path[depth]! % keys.length]!;
      const inner = node[key];
      if (depth === m.path.length - 1 || !inner || typeof inner !== 'object') {
        node[key] = m.kind === 'raw' ? '__raw_value__' : m.value;
        break;
      }
      node = inner as Record<string, unknown>;
    }
    const text = JSON.stringify(copy);
    return { text: m.kind === 'raw' ? text.replace(MARK, m.text) : text, contentType: 'application/json' };
  }

  it('answers any body to any route below 500, refusing with a JSON error code and nothing stored changed, never echoing a secret', async () => {
    const routes = bodies();
    await fc.assert(
      fc.asyncProperty(fc.nat(routes.length - 1), mutation, fc.boolean(), async (route, m, tenantKey) => {
        const [method, path, base] = routes[route]!;
        const { text, contentType } = bodyText(base(), m);
        const before = await stored();
        const logged = logs.lines.length;
        const answer = await send(tenantKey ? held.a.key : TEST_API_KEY, method, path, text, contentType);
        const label = `${method} ${path} ${contentType} ${text.slice(0, 300)} → ${answer.status} ${answer.text.slice(0, 300)}`;
        expect(answer.status, label).toBeLessThan(500);
        expect(logs.lines.slice(logged).filter((line) => line.msg === 'request error'), label).toEqual([]);
        expect(answer.text, label).not.toContain(SECRET);
        if (answer.status >= 400) {
          expect(answer.body?.error, label).toEqual(expect.objectContaining({ code: expect.any(String), message: expect.any(String) }));
          expect(await stored(), label).toBe(before);
        }
      }),
      { numRuns: 300 },
    );
  }, 300_000);

  it("answers a tenant key naming another tenant's resource, in any spelling of its id, 404 as a missing one, changing nothing and showing none of its ids", async () => {
    const routes = (b: typeof held.b, spell: (id: string) => string): [string, string, unknown?][] => [
      ['GET', `/connections/${spell(b.conn)}`],
      ['PATCH', `/connections/${spell(b.conn)}`, { config: HTTP_CONFIG }],
      ['POST', `/connections/${spell(b.conn)}/pause`],
      ['POST', `/connections/${spell(b.conn)}/resume`],
      ['POST', `/connections/${spell(b.conn)}/disable`],
      ['POST', `/connections/${spell(b.conn)}/sync`, {}],
      ['GET', `/connections/${spell(b.conn)}/records`],
      ['POST', `/connections/${spell(b.conn)}/oauth/authorize`, { oauth_app_id: held.a.oauth }],
      ['DELETE', `/connections/${spell(b.conn)}`],
      ['GET', `/jobs/${spell(b.job)}`],
      ['POST', `/jobs/${spell(b.job)}/cancel`],
      ['GET', `/jobs?connection_id=${spell(b.conn)}`],
      ['POST', '/jobs/schedule', { pairId: b.conn.toUpperCase(), window: WINDOW }],
      ['GET', `/webhooks/${spell(b.hook)}`],
      ['DELETE', `/webhooks/${spell(b.hook)}`],
      ['POST', `/webhooks/${spell(b.hook)}/rotate-secret`, {}],
      ['PATCH', `/webhooks/${spell(b.hook)}`, { enabled: false }],
      ['GET', `/webhooks/${spell(b.hook)}/deliveries`],
      ['GET', `/oauth-apps/${spell(b.oauth)}`],
      ['PATCH', `/oauth-apps/${spell(b.oauth)}`, { client_id: 'other' }],
      ['DELETE', `/oauth-apps/${spell(b.oauth)}`],
      ['POST', `/connections/${held.a.conn}/oauth/authorize`, { oauth_app_id: b.oauth.toUpperCase() }],
      ['PATCH', `/connections/${held.a.conn}`, { credentials: { kind: 'oauth2', grant_from_connection: b.conn } }],
      ['POST', '/sync', { app_key: 'http', tenant_id: 'b' }],
      ['GET', '/connections?tenant_id=b'],
    ];
    // Hex digits in either case, and any of the id's characters percent-encoded in a path.
    const spelling = fc.record({ upper: fc.boolean(), encoded: fc.array(fc.nat(35), { maxLength: 6 }) });
    const before = await stored();
    await fc.assert(
      fc.asyncProperty(fc.nat(24), spelling, async (route, { upper, encoded }) => {
        const spell = (id: string) => [...(upper ? id.toUpperCase() : id)].map((ch, i) => (encoded.includes(i) ? `%${ch.charCodeAt(0).toString(16).toUpperCase()}` : ch)).join('');
        const [method, path, body] = routes(held.b, spell)[route]!;
        const answer = await call(held.a.key, method, path, body);
        const label = `${method} ${path} ${JSON.stringify(body ?? '')} → ${answer.status} ${answer.text.slice(0, 300)}`;
        expect({ status: answer.status, code: answer.body?.error?.code }, label).toEqual({ status: 404, code: 'not_found' });
        for (const id of Object.values(held.b)) expect(answer.text.toLowerCase(), label).not.toContain(id.toLowerCase());
      }),
      { numRuns: 150 },
    );
    expect(await stored()).toBe(before);
  }, 300_000);
});
