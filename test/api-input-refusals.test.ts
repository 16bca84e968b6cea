// Input the database cannot take is refused with a 4xx and a JSON body before anything is written,
// never answered 500 by a failed statement: characters Postgres cannot store anywhere in a JSON
// body, and percent-escapes that are not UTF-8 in a path; and query numbers and times the API would
// read as something else than what was sent. Against the real API app and Postgres.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { listen, type HttpServer } from '../lib/http';
import { callApi, TEST_API_KEY, useApiWithoutTemporal } from './helpers/api';
import { capturingLogger } from './helpers/logs';

describe('input the database cannot take (real API app, real Postgres)', () => {
  const logs = capturingLogger();
  const api = useApiWithoutTemporal('input-refusals', { logger: logs.logger });
  let connectionId: string;
  const tenant = 'input-refusals';
  /** The same app listening on 127.0.0.1, for requests sent over HTTP as a client sends them. */
  let server: HttpServer;

  beforeAll(async () => {
    const { rows } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'one', 'paused') returning id`,
      [tenant],
    );
    connectionId = rows[0]!.id;
    server = await listen(api.app, '127.0.0.1', 0);
  });
  afterAll(() => server?.close());

  /** Sends `body` as it is written (JSON text with escapes), with the admin key. */
  async function send(method: string, path: string, body?: string): Promise<{ status: number; body: any }> {
    const headers: Record<string, string> = { authorization: `Bearer ${TEST_API_KEY}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await api.app.request(path, { method, headers, body });
    return { status: res.status, body: await res.json() };
  }

  const counts = async () => {
    const { rows } = await api.db.pool.query<{ connections: number; jobs: number; keys: number }>(
      `select (select count(*) from connections)::int as connections, (select count(*) from sync_jobs)::int as jobs,
              (select count(*) from api_keys)::int as keys`,
    );
    return rows[0]!;
  };

  it('refuses a UTF-16 surrogate without its pair anywhere in a JSON body with one 400, writing nothing', async () => {
    const before = await counts();
    const window = '"window":{"start":"2025-01-01T00:00:00Z","end":"2025-01-02T00:00:00Z"}';
    const bodies: [string, string][] = [
      ['/connections', `{"tenant_id":"${tenant}","app_key":"lone-high","provider":"demo","status":"paused","config":{"note":"\\ud800"}}`],
      ['/connections', `{"tenant_id":"${tenant}","app_key":"lone-low","provider":"demo","status":"paused","config":{"note":"a\\udfffb"}}`],
      ['/connections', `{"tenant_id":"${tenant}","app_key":"lone-key","provider":"demo","status":"paused","metadata":{"\\udc00":1}}`],
      ['/connections', `{"tenant_id":"${tenant}","app_key":"\\ud800","provider":"demo","status":"paused"}`],
      ['/jobs/schedule', `{"pairId":"${connectionId}",${window},"payload":{"notes":["ok","\\ud800"]}}`],
      ['/jobs/schedule', `{"pairId":"${connectionId}",${window},"payload":{"note":"\\udfff\\ud800"}}`],
    ];
    for (const [path, body] of bodies) {
      const answer = await send('POST', path, body);
      expect(answer.status, body).toBe(400);
      expect(answer.body, body).toEqual({
        error: { code: 'invalid_request', message: 'body: must not contain a UTF-16 surrogate without its pair (\\ud800-\\udfff)' },
      });
    }
    expect(await counts()).toEqual(before);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
  });

  it('refuses a JSON body that is not UTF-8 with one 400, writing nothing (its bytes were read as U+FFFD and stored so)', async () => {
    const before = await counts();
    const latin1 = (text: string) => Buffer.from(text, 'latin1');
    const window = '"window":{"start":"2025-01-01T00:00:00Z","end":"2025-01-02T00:00:00Z"}';
    // "café" as Latin-1 (0xE9 alone is no UTF-8), and a byte that never appears in UTF-8 (0xFF).
    const bodies: [string, Buffer][] = [
      [`/tenants/${tenant}/api-keys`, latin1('{"name":"caf\u00e9 backend"}')],
      [`/tenants/${tenant}/api-keys`, Buffer.concat([Buffer.from('{"name":"a'), Buffer.from([0xff]), Buffer.from('"}')])],
      ['/connections', latin1(`{"tenant_id":"${tenant}","app_key":"latin","provider":"demo","status":"paused","config":{"note":"caf\u00e9"}}`)],
      ['/jobs/schedule', latin1(`{"pairId":"${connectionId}",${window},"payload":{"reason":"caf\u00e9"}}`)],
    ];
    for (const [path, body] of bodies) {
      const res = await api.app.request(path, { method: 'POST', headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' }, body });
      const answer = { status: res.status, body: await res.json() };
      expect(answer, `${path}: ${body.toString('latin1')}`).toEqual({ status: 400, body: { error: { code: 'invalid_request', message: 'body: must be UTF-8 text' } } });
    }
    expect(await counts()).toEqual(before);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
    // The same text in UTF-8 passes.
    const utf8 = await send('POST', `/tenants/${tenant}/api-keys`, '{"name":"caf\u00e9 backend"}');
    expect([utf8.status, utf8.body.name]).toEqual([201, 'café backend']);
  });

  it('lets a surrogate pair (a character outside the BMP) through to the route', async () => {
    // The connection is paused, so the route's own refusal answers: the body passed the check.
    const window = '"window":{"start":"2025-01-01T00:00:00Z","end":"2025-01-02T00:00:00Z"}';
    const answer = await send('POST', '/jobs/schedule', `{"pairId":"${connectionId}",${window},"payload":{"note":"\\ud83d\\ude00"}}`);
    expect(answer.status, JSON.stringify(answer.body)).toBe(409);
    expect(answer.body.error.code).toBe('connection_paused');
  });

  it("refuses a connection's rate_budget bound beyond what the budget takes (2147483647) with one 400 naming the field, writing nothing", async () => {
    const before = await counts();
    const http = { base_url: 'http://127.0.0.1:1', resources: { items: { path: '/items', id: 'id' } } };
    const bodies: [string, string][] = [
      [JSON.stringify({ tenant_id: tenant, app_key: 'huge-minute', provider: 'http', status: 'paused', config: { ...http, rate_budget: { per_minute: 10_000_000_000 } }, credentials: { token: 'never-echoed-token' } }),
        'config: http connector: invalid config: rate_budget.per_minute: must be a whole number from 1 to 2147483647'],
      [JSON.stringify({ tenant_id: tenant, app_key: 'huge-reserve', provider: 'github', status: 'paused', config: { base_url: 'http://127.0.0.1:1', repositories: ['octo/hello'], rate_budget: { reserve: 2_147_483_648 } }, credentials: { token: 'ghp_neverEchoedToken0123456789' } }),
        'config: github connector: invalid config: rate_budget.reserve: must be a whole number from 0 to 2147483647'],
    ];
    for (const [body, rule] of bodies) {
      const answer = await send('POST', '/connections', body);
      expect(answer.status, body).toBe(400);
      expect(answer.body.error.code, body).toBe('invalid_request');
      expect(answer.body.error.message, body).toBe(rule);
      expect(JSON.stringify(answer.body), body).not.toMatch(/never-echoed-token|neverEchoedToken/);
    }
    expect(await counts()).toEqual(before);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
  });

  it('refuses a number a double does not hold anywhere in a JSON body with one 400 naming it, storing nothing (JSON.parse read 1e400 as Infinity, stored as null, 1e-400 as 0 and 9007199254740993 as 9007199254740992)', async () => {
    const before = await counts();
    const window = '"window":{"start":"2025-01-01T00:00:00Z","end":"2025-01-02T00:00:00Z"}';
    const bodies: [string, string, string, string][] = [
      ['PATCH', `/connections/${connectionId}`, '{"config":{"note":1e400}}', '1e400'],
      ['PATCH', `/connections/${connectionId}`, '{"config":{"notes":[1,-1E+309]}}', '-1E+309'],
      ['PATCH', `/connections/${connectionId}`, '{"config":{"note":1e-400}}', '1e-400'],
      ['PATCH', `/connections/${connectionId}`, '{"config":{"id":9007199254740993}}', '9007199254740993'],
      ['PATCH', `/connections/${connectionId}`, '{"config":{"pi":3.14159265358979323846}}', '3.14159265358979323846'],
      ['POST', '/jobs/schedule', `{"pairId":"${connectionId}",${window},"payload":{"amount":12345678901234567891}}`, '12345678901234567891'],
      ['POST', `/tenants/${tenant}/api-keys`, '{"name":"k","n":1e999}', '1e999'],
    ];
    for (const [method, path, body, number] of bodies) {
      const answer = await send(method, path, body);
      expect({ status: answer.status, body: answer.body }, body).toEqual({
        status: 400,
        body: { error: { code: 'invalid_request', message: `body: must not contain a number a double does not hold (${number}): it would be stored as another number` } },
      });
    }
    expect(await counts()).toEqual(before);
    const stored = async () => (await api.db.pool.query('select config from connections where id = $1', [connectionId])).rows[0].config;
    expect(await stored()).toEqual({});
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
    // Numbers a double holds pass, however they are written (in strings, any digits are text).
    const held = '{"config":{"a":9007199254740992,"b":1.5e300,"c":0.1,"d":1.10,"e":-0,"f":1e-7,"g":1E21,"h":0.30000000000000004,"i":5e-324,"j":"12345678901234567891e400"}}';
    const patched = await send('PATCH', `/connections/${connectionId}`, held);
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    // As JSON.stringify writes them (-0 as 0): the same values.
    expect(await stored()).toEqual(JSON.parse(JSON.stringify(JSON.parse(held).config)));
    await api.db.pool.query(`update connections set config = '{}' where id = $1`, [connectionId]);
  });

  it("refuses an http connection's credentials its config's auth cannot send with one 400 naming the key, never the value, storing nothing (they were stored, and every sync failed for good)", async () => {
    const bearer = { base_url: 'http://127.0.0.1:1', auth: { type: 'bearer' }, resources: { items: { path: '/items', id: 'id' } } };
    const basic = { ...bearer, auth: { type: 'basic' } };
    const { rows: [row] } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status, config) values ($1, 'http', 'http-auth', 'paused', $2) returning id`,
      [tenant, JSON.stringify(bearer)],
    );
    const id = row!.id;
    const stored = async () => (await api.db.pool.query('select config, credentials from connections where id = $1', [id])).rows[0];
    const before = { counts: await counts(), row: await stored() };
    const refused: [string, string, unknown, string][] = [
      ['PATCH', `/connections/${id}`, { credentials: { token: 5 } }, "credentials.token: a non-empty string is required for auth type 'bearer'"],
      ['PATCH', `/connections/${id}`, { credentials: { token: '  ' } }, "credentials.token: a non-empty string is required for auth type 'bearer'"],
      ['PATCH', `/connections/${id}`, { credentials: { token: 'never-echoed\nsecret' } }, "credentials.token: auth type 'bearer' sends it in a header, which cannot carry a line break or another control character"],
      ['PATCH', `/connections/${id}`, { credentials: { username: 'ann', password: 'never-echoed-secret' } }, "credentials.token: a non-empty string is required for auth type 'bearer'"],
      ['PATCH', `/connections/${id}`, { config: basic, credentials: { token: 'never-echoed-secret' } }, "credentials.username: a non-empty string is required for auth type 'basic'"],
      ['PATCH', `/connections/${id}`, { config: basic, credentials: { username: 'ann', password: ['never-echoed-secret'] } }, "credentials.password: a non-empty string is required for auth type 'basic'"],
      ['POST', '/connections', { tenant_id: tenant, app_key: 'http-auth-new', provider: 'http', status: 'paused', config: bearer, credentials: { token: '' } }, "credentials.token: a non-empty string is required for auth type 'bearer'"],
    ];
    for (const [method, path, body, message] of refused) {
      const answer = await send(method, path, JSON.stringify(body));
      expect({ status: answer.status, body: answer.body }, JSON.stringify(body)).toEqual({ status: 400, body: { error: { code: 'invalid_request', message } } });
    }
    expect({ counts: await counts(), row: await stored() }).toEqual(before);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
    // What the auth sends passes: a token for bearer, a user and password for basic, anything for none.
    for (const body of [{ credentials: { token: 'a-token' } }, { config: basic, credentials: { username: 'ann', password: 'p@ss' } }, { config: { ...bearer, auth: { type: 'none' } }, credentials: { note: 1 } }]) {
      const answer = await send('PATCH', `/connections/${id}`, JSON.stringify(body));
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    }
  });

  it("refuses OAuth 2 client credentials for an http connection whose auth is basic with one 400, storing nothing (the grant's token was stored, and every sync failed for good: basic auth sends a username and password)", async () => {
    const basic = { base_url: 'http://127.0.0.1:1', auth: { type: 'basic' }, resources: { items: { path: '/items', id: 'id' } } };
    const client = { kind: 'oauth2_client_credentials', token_url: 'http://127.0.0.1:1/token', client_id: 'reader', client_secret: 'never-echoed-secret' };
    const { rows: [row] } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status, config) values ($1, 'http', 'http-basic-cc', 'paused', $2) returning id`,
      [tenant, JSON.stringify(basic)],
    );
    const id = row!.id;
    const stored = async () => (await api.db.pool.query('select config, credentials from connections where id = $1', [id])).rows[0];
    const before = { counts: await counts(), row: await stored() };
    const rule = "credentials.kind: a client credentials grant gives a token, which auth type 'basic' does not send (bearer, header or query send it)";
    for (const [method, path, body] of [
      ['PATCH', `/connections/${id}`, { credentials: client }],
      ['PATCH', `/connections/${id}`, { config: { ...basic, base_url: 'http://127.0.0.1:2' }, credentials: client }],
      ['POST', '/connections', { tenant_id: tenant, app_key: 'http-basic-cc-new', provider: 'http', status: 'paused', config: basic, credentials: client }],
    ] as const) {
      const answer = await send(method, path, JSON.stringify(body));
      expect({ status: answer.status, body: answer.body }, JSON.stringify(body)).toEqual({ status: 400, body: { error: { code: 'invalid_request', message: rule } } });
    }
    expect({ counts: await counts(), row: await stored() }).toEqual(before);
    // With an auth that sends a token, they pass.
    const bearer = await send('PATCH', `/connections/${id}`, JSON.stringify({ config: { ...basic, auth: { type: 'bearer' } }, credentials: client }));
    expect(bearer.status, JSON.stringify(bearer.body)).toBe(200);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
  });

  it("refuses the connect flow of an http connection whose auth is basic with one 409 naming why, storing no state (the grant's token was stored, and every sync failed for good: basic auth sends a username and password)", async () => {
    const basic = { base_url: 'http://127.0.0.1:1', auth: { type: 'basic' }, resources: { items: { path: '/items', id: 'id' } } };
    const { rows: [row] } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status, config) values ($1, 'http', 'http-basic-flow', 'paused', $2) returning id`,
      [tenant, JSON.stringify(basic)],
    );
    const app = await send('POST', '/oauth-apps', JSON.stringify({
      tenant_id: tenant, name: 'basic-flow', client_id: 'client', client_secret: 'never-echoed-secret',
      authorize_url: 'https://github.com/login/oauth/authorize', token_url: 'https://github.com/login/oauth/access_token', redirect_uri: 'https://synctide.example/oauth/callback',
    }));
    expect(app.status, JSON.stringify(app.body)).toBe(201);
    const states = async () => (await api.db.pool.query<{ n: number }>('select count(*)::int as n from oauth_states')).rows[0]!.n;
    const before = await states();
    const answer = await send('POST', `/connections/${row!.id}/oauth/authorize`, JSON.stringify({ oauth_app_id: app.body.id }));
    expect({ status: answer.status, body: answer.body }).toEqual({
      status: 409,
      body: { error: { code: 'invalid_connection_config', message: "the connection's config sends no token an OAuth 2 grant could give: auth type 'basic' sends a username and password (bearer, header or query send a token)" } },
    });
    expect(await states()).toBe(before);
    // With an auth that sends a token, the flow starts.
    await api.db.pool.query('update connections set config = $2 where id = $1', [row!.id, JSON.stringify({ ...basic, auth: { type: 'bearer' } })]);
    const bearer = await send('POST', `/connections/${row!.id}/oauth/authorize`, JSON.stringify({ oauth_app_id: app.body.id }));
    expect(bearer.status, JSON.stringify(bearer.body)).toBe(200);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
  });

  it('refuses a "__proto__" key anywhere in a JSON body with one 400, storing nothing (an object field took it as its prototype: config {"__proto__":{…},"b":2} was stored as {"b":2}, and the checks read the keys under it as the field\'s own)', async () => {
    const before = await counts();
    const window = '"window":{"start":"2025-01-01T00:00:00Z","end":"2025-01-02T00:00:00Z"}';
    const bodies: [string, string, string][] = [
      ['PATCH', `/connections/${connectionId}`, '{"config":{"__proto__":{"records_per_resource":5},"b":2}}'],
      ['PATCH', `/connections/${connectionId}`, '{"config":{"b":{"c":[{"__proto__":null}]}}}'],
      ['PATCH', `/connections/${connectionId}`, '{"credentials":{"__proto__":{"token":"never-echoed-token"}}}'],
      ['POST', '/jobs/schedule', `{"pairId":"${connectionId}",${window},"payload":{"__proto__":{"resource_types":["items"]}}}`],
      ['POST', `/tenants/${tenant}/api-keys`, '{"__proto__":{"scopes":["read"]}}'],
    ];
    for (const [method, path, body] of bodies) {
      const answer = await send(method, path, body);
      expect({ status: answer.status, body: answer.body }, body).toEqual({
        status: 400,
        body: { error: { code: 'invalid_request', message: 'body: must not contain the key "__proto__" (a JavaScript object takes it as its prototype, not as a key)' } },
      });
    }
    expect(await counts()).toEqual(before);
    const { rows } = await api.db.pool.query('select config, credentials from connections where id = $1', [connectionId]);
    expect(rows[0]).toEqual({ config: {}, credentials: null });
    // In a string it is text like any other.
    const text = await send('PATCH', `/connections/${connectionId}`, '{"config":{"note":"__proto__","__proto":1}}');
    expect(text.status, JSON.stringify(text.body)).toBe(200);
    await api.db.pool.query(`update connections set config = '{}' where id = $1`, [connectionId]);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
  });

  it('refuses a JSON body nested deeper than 64 levels with one 400 naming the rule, writing nothing (never a 500 from a stack overflow)', async () => {
    const before = await counts();
    const window = '"window":{"start":"2025-01-01T00:00:00Z","end":"2025-01-02T00:00:00Z"}';
    const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
    const bodies: [string, string][] = [
      ['/connections', `{"tenant_id":"${tenant}","app_key":"deep-config","provider":"demo","status":"paused","config":${nested(5_000)}}`],
      ['/connections', '['.repeat(100_000) + ']'.repeat(100_000)],
      ['/jobs/schedule', `{"pairId":"${connectionId}",${window},"payload":${nested(8_000)}}`],
      // Deep enough for no stack to matter, shallow enough for every check to take it whole.
      ['/jobs/schedule', `{"pairId":"${connectionId}",${window},"payload":${nested(64)}}`],
    ];
    for (const [path, body] of bodies) {
      const answer = await send('POST', path, body);
      expect(answer.status, body.slice(0, 80)).toBe(400);
      expect(answer.body, body.slice(0, 80)).toEqual({ error: { code: 'invalid_request', message: 'body: must not nest arrays or objects more than 64 levels deep' } });
    }
    const patched = await send('PATCH', `/connections/${connectionId}`, `{"config":${nested(3_000)}}`);
    expect(patched.status).toBe(400);
    expect(await counts()).toEqual(before);
    const { rows } = await api.db.pool.query('select config from connections where id = $1', [connectionId]);
    expect(rows[0].config).toEqual({});
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
    // 64 levels in all (the body's own object is one) pass to the route: the connection is paused.
    const fits = await send('POST', '/jobs/schedule', `{"pairId":"${connectionId}",${window},"payload":${nested(63)}}`);
    expect([fits.status, fits.body.error?.code]).toEqual([409, 'connection_paused']);
  });

  it('refuses a list of event types or key scopes longer than there are names with one 400 naming the rule, writing nothing (never a 500 from a list of a hundred thousand bad names)', async () => {
    const before = await counts();
    const { rows: hooks } = await api.db.pool.query<{ n: number }>('select count(*)::int as n from webhooks');
    // Names that are not event types or scopes: each was one issue, which overflowed the stack.
    const many = `[${Array(200_000).fill('0').join(',')}]`;
    const bodies: [string, string, string][] = [
      ['/webhooks', `{"tenant_id":"${tenant}","url":"https://example.com/hook","event_types":${many}}`, 'event_types: must name at most 7 event types'],
      [`/tenants/${tenant}/api-keys`, `{"scopes":${many}}`, 'scopes: must name at most 2 scopes'],
      ['/webhooks', JSON.stringify({ tenant_id: tenant, url: 'https://example.com/hook', event_types: Array(8).fill('sync.failed') }), 'event_types: must name at most 7 event types'],
      [`/tenants/${tenant}/api-keys`, JSON.stringify({ scopes: ['read', 'write', 'read'] }), 'scopes: must name at most 2 scopes'],
    ];
    for (const [path, body, message] of bodies) {
      const answer = await send('POST', path, body);
      expect(answer.status, `${path}: ${JSON.stringify(answer.body).slice(0, 300)}`).toBe(400);
      expect(answer.body).toEqual({ error: { code: 'invalid_request', message } });
    }
    expect(await counts()).toEqual(before);
    expect((await api.db.pool.query<{ n: number }>('select count(*)::int as n from webhooks')).rows).toEqual(hooks);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
    // Each name once (or fewer, repeated) still passes.
    const every = ['sync.completed', 'sync.failed', 'sync.cancelled', 'connection.breaker_opened', 'connection.breaker_closed', 'connection.disabled', 'connection.credentials_invalid'];
    expect((await send('POST', '/webhooks', JSON.stringify({ tenant_id: tenant, url: 'https://example.com/hook', event_types: every }))).status).toBe(201);
    expect((await send('POST', `/tenants/${tenant}/api-keys`, JSON.stringify({ scopes: ['read', 'read'] }))).status).toBe(201);
  });

  it("refuses a tenant limit override beyond what the column takes (2147483647) with one 400 naming the field, changing nothing", async () => {
    for (const field of ['max_connections', 'max_webhooks', 'max_immediate_syncs', 'max_running_jobs', 'max_redeliveries_per_hour', 'max_oauth_apps']) {
      const answer = await send('PATCH', `/tenants/${tenant}/limits`, JSON.stringify({ [field]: 2_147_483_648 }));
      expect(answer.status, `${field}: ${JSON.stringify(answer.body)}`).toBe(400);
      expect(answer.body.error.code).toBe('invalid_request');
      expect(answer.body.error.message).toBe(`${field}: must be an integer from 0 to 2147483647, or null for the default`);
    }
    const largest = await send('PATCH', `/tenants/${tenant}/limits`, JSON.stringify({ max_connections: 2_147_483_647 }));
    expect(largest.status, JSON.stringify(largest.body)).toBe(200);
    expect(largest.body.limits.max_connections).toBe(2_147_483_647);
    await send('PATCH', `/tenants/${tenant}/limits`, JSON.stringify({ max_connections: null }));
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
  });

  it("refuses a backfill whose payload.resource_types is not 1–50 resource type names with one 400 naming it, writing nothing (it was taken as 'every resource type')", async () => {
    const before = await counts();
    const window = { start: '2025-01-01T00:00:00Z', end: '2025-01-02T00:00:00Z' };
    for (const resourceTypes of ['items', [], [1], [{ name: 'items' }], [''], ['x'.repeat(101)], Array.from({ length: 51 }, (_, i) => `t${i}`), null]) {
      const body = JSON.stringify({ pairId: connectionId, window, payload: { resource_types: resourceTypes } });
      const answer = await send('POST', '/jobs/schedule', body);
      expect(answer.status, body.slice(0, 200)).toBe(400);
      expect(answer.body.error.code).toBe('invalid_request');
      expect(answer.body.error.message, body.slice(0, 200)).toMatch(/^payload\.resource_types(\.\d+)?: /);
    }
    expect(await counts()).toEqual(before);
    // Names (and other payload fields) pass to the route: the connection is paused.
    const fits = await send('POST', '/jobs/schedule', JSON.stringify({ pairId: connectionId, window, payload: { resource_types: ['items'], reason: 'replay' } }));
    expect([fits.status, fits.body.error?.code]).toEqual([409, 'connection_paused']);
  });

  it('answers a tenant path whose percent-escapes are not UTF-8 without a 500 (the tenant id is taken as it came)', async () => {
    for (const [method, path] of [['POST', '/tenants/%ZZ/api-keys'], ['POST', '/tenants/%ED%A0%80/api-keys'], ['PATCH', '/tenants/%E0%A4/limits'], ['DELETE', `/tenants/%ZZ/api-keys/${connectionId}`]] as const) {
      const answer = await send(method, path, '{}');
      expect(answer.status, `${method} ${path}: ${JSON.stringify(answer.body)}`).toBeLessThan(500);
    }
    // Audited under the tenant id as it came.
    const { rows } = await api.db.pool.query(`select tenant_id from audit_log where path = '/tenants/%ZZ/api-keys'`);
    expect(rows).toEqual([{ tenant_id: '%ZZ' }]);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
  });

  it("refuses a tenant id longer than a connection's tenant_id may be (128) on the tenant routes, so no key is made for a tenant that could never have a connection", async () => {
    const before = await counts();
    const long = 't'.repeat(129);
    for (const [method, path] of [['POST', `/tenants/${long}/api-keys`], ['PATCH', `/tenants/${long}/limits`]] as const) {
      const answer = await send(method, path, method === 'PATCH' ? JSON.stringify({ max_connections: 1 }) : '{}');
      expect(answer.status, `${method}: ${JSON.stringify(answer.body)}`).toBe(400);
      expect(answer.body.error).toEqual({ code: 'invalid_request', message: 'tenant_id: must be at most 128 characters' });
    }
    expect(await counts()).toEqual(before);
    expect((await send('POST', `/tenants/${'t'.repeat(128)}/api-keys`, '{}')).status).toBe(201);
  });

  it('answers a body that is not declared JSON with 415 and a JSON error naming the content type it needs', async () => {
    const res = await api.app.request(`/connections/${connectionId}`, {
      method: 'PATCH', headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'text/plain' }, body: '{"config":{}}',
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toEqual({ error: { code: 'unsupported_media_type', message: expect.stringContaining('application/json') } });
  });

  it('audits every mutating call whatever tenant id or path it names: one no tenant can have (longer than any route takes, or with a NUL) is recorded as null, a path with an escaped NUL as it was sent', async () => {
    const { key, secret } = await createApiKey(api.db, tenant);
    // Random text does not compress: far past what an index entry of the audit log holds.
    const junk = randomBytes(3000).toString('base64');
    const hook = { url: 'https://example.com/hook', event_types: ['sync.failed'] };
    const calls: [string, string, string, unknown?][] = [
      [secret, 'POST', '/webhooks', { tenant_id: junk, ...hook }],
      [secret, 'POST', '/webhooks', { tenant_id: 'other\u0000tenant', ...hook }],
      [TEST_API_KEY, 'POST', '/connections', { tenant_id: junk, app_key: 'junk', provider: 'demo' }],
      [secret, 'POST', '/connections/%00/pause'],
      [TEST_API_KEY, 'POST', '/tenants/a%00b/api-keys'],
    ];
    const { last } = (await api.db.pool.query<{ last: string }>('select coalesce(max(id), 0)::text as last from audit_log')).rows[0]!;
    const statuses: number[] = [];
    for (const [bearer, method, path, body] of calls) {
      const headers: Record<string, string> = { authorization: `Bearer ${bearer}` };
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await api.app.request(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      statuses.push(res.status);
    }
    expect(statuses).toEqual([404, 404, 400, 400, 400]);
    const { rows } = await api.db.pool.query(
      'select actor, tenant_id, target_tenant_id, method, path, status from audit_log where id > $1 order by id', [last],
    );
    const actor = `key:${key.id}`;
    expect(rows).toEqual([
      { actor, tenant_id: tenant, target_tenant_id: null, method: 'POST', path: '/webhooks', status: 404 },
      { actor, tenant_id: tenant, target_tenant_id: null, method: 'POST', path: '/webhooks', status: 404 },
      { actor: 'admin', tenant_id: null, target_tenant_id: null, method: 'POST', path: '/connections', status: 400 },
      { actor, tenant_id: tenant, target_tenant_id: null, method: 'POST', path: '/connections/%00/pause', status: 400 },
      { actor: 'admin', tenant_id: null, target_tenant_id: null, method: 'POST', path: '/tenants/a%00b/api-keys', status: 400 },
    ]);
    expect(logs.lines.filter((line) => line.msg === 'audit log write failed')).toEqual([]);
  });
  it('answers a body with thousands of problems with a 400 of a few KiB that names the first and counts the rest (it quoted every one: a 1 MiB body answered about 1 MiB)', async () => {
    const before = await counts();
    const keys = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`not_a_limit_${i}`, 1]));
    const resources = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`r${i}`, 7]));
    const answers = [
      await send('PATCH', `/tenants/${tenant}/limits`, JSON.stringify(keys)),
      await send('POST', '/connections', JSON.stringify({ tenant_id: tenant, app_key: 'many-problems', provider: 'http', status: 'paused', config: { base_url: 'https://api.example.com', resources } })),
      await send('POST', `/tenants/${tenant}/api-keys`, JSON.stringify({ ...keys, name: 'k' })),
    ];
    for (const answer of answers) {
      expect(answer.status).toBe(400);
      const message = String(answer.body.error.message);
      expect({ length: message.length < 4096, counted: /and \d+ more/.test(message) }, message.slice(0, 200)).toEqual({ length: true, counted: true });
    }
    expect(await counts()).toEqual(before);
  });

  it('refuses a page size that is not decimal digits from 1 to its maximum with one 400 on every listing (JavaScript Number() read "0x10" as 16, "1e2" as 100, " 5" as 5, "" as 0)', async () => {
    const { rows: [hook] } = await api.db.pool.query<{ id: string }>(
      `insert into webhooks (tenant_id, url, event_types, secret) select $1, 'https://example.com/page-' || n, '{sync.completed}', 's' from generate_series(1, 2) n returning id`,
      [tenant],
    );
    const listings: [string, number][] = [
      [`/connections?tenant_id=${tenant}&`, 200],
      [`/jobs?tenant_id=${tenant}&`, 200],
      [`/webhooks?tenant_id=${tenant}&`, 200],
      [`/webhooks/${hook!.id}/deliveries?`, 200],
      [`/audit?tenant_id=${tenant}&`, 200],
      [`/oauth-apps?tenant_id=${tenant}&`, 200],
      [`/connections/${connectionId}/records?`, 1000],
    ];
    // As sent on the wire: a space is %20, a plus sign %2B; U+FF15 is a fullwidth 5, U+0665 an Arabic-Indic 5.
    const notPageSizes = ['0x10', '0X10', '0b1', '0o7', '1e2', '1E2', '%205', '5%20', '%0A5', '', '%2B5', '-0', '-5', '0', '00', '5.0', '5.', '.5', 'Infinity', 'NaN', '1_0', '5,6', '%EF%BC%95', '%D9%A5', '5&limit=6'];
    for (const [listing, max] of listings) {
      const rule = { error: { code: 'invalid_request', message: `limit: must be an integer between 1 and ${max}` } };
      for (const limit of [...notPageSizes, String(max + 1), '9'.repeat(400)]) {
        const answer = await callApi(server.url, TEST_API_KEY, 'GET', `${listing}limit=${limit}`);
        expect({ status: answer.status, body: answer.body }, `${listing}limit=${limit}`).toEqual({ status: 400, body: rule });
      }
      for (const path of [listing.slice(0, -1), `${listing}limit=1`, `${listing}limit=${max}`, `${listing}limit=01`]) {
        const answer = await callApi(server.url, TEST_API_KEY, 'GET', path);
        expect(answer.status, `${path}: ${answer.text}`).toBe(200);
      }
    }
    // The digits are the page size: one webhook of the two, then the other.
    const first = await callApi(server.url, TEST_API_KEY, 'GET', `/webhooks?tenant_id=${tenant}&limit=001`);
    expect([first.body.items.length, typeof first.body.next_cursor]).toEqual([1, 'string']);
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
  });

  it("refuses a backfill window time finer than the millisecond with one 400 naming the field, writing nothing (a Date keeps the millisecond: the window stored records changed before its start)", async () => {
    const before = await counts();
    const schedule = (start: string, end: string) => callApi(server.url, TEST_API_KEY, 'POST', '/jobs/schedule', { pairId: connectionId, window: { start, end } });
    const rule = 'must have at most millisecond precision (no non-zero digit after the third of its fractional seconds)';
    const refused: [string, string, string][] = [
      ['2026-01-01T00:00:00.0004Z', '2026-01-02T00:00:00Z', `window.start: ${rule}`],
      ['2026-01-01T00:00:00.123000001Z', '2026-01-02T00:00:00Z', `window.start: ${rule}`],
      ['2026-01-01T00:00:00Z', '2026-01-02T01:00:00.999999+01:00', `window.end: ${rule}`],
      // Within one millisecond: each time named, not "start must be before end".
      ['2026-01-01T00:00:00.0001Z', '2026-01-01T00:00:00.0009Z', `window.start: ${rule}; window.end: ${rule}`],
    ];
    for (const [start, end, message] of refused) {
      const answer = await schedule(start, end);
      expect({ status: answer.status, body: answer.body }, `${start} ${end}`).toEqual({ status: 400, body: { error: { code: 'invalid_request', message } } });
    }
    expect(await counts()).toEqual(before);
    // Trailing zeros name the millisecond: they pass to the route (the connection is paused).
    for (const [start, end] of [['2026-01-01T00:00:00.000000Z', '2026-01-02T00:00:00.123000Z'], ['2026-01-01T00:00:00.5Z', '2026-01-01T00:00:00.50100+00:00'], ['2026-01-01T00:00:00.0010Z', '2026-01-01T00:00:00.002Z']]) {
      const answer = await schedule(start!, end!);
      expect([answer.status, answer.body.error?.code], `${start} ${end}: ${answer.text}`).toEqual([409, 'connection_paused']);
    }
    expect(logs.lines.filter((line) => line.msg === 'request error')).toEqual([]);
  });

  it('refuses a feed modified_after finer than the millisecond with one 400 (it was cut to the millisecond, so the feed served changes written before it)', async () => {
    const rule = 'modified_after: must have at most millisecond precision (no non-zero digit after the third of its fractional seconds)';
    for (const time of ['2026-01-01T00:00:00.0004Z', '2026-01-01T00:00:00.123000001%2B01:00']) {
      const answer = await callApi(server.url, TEST_API_KEY, 'GET', `/connections/${connectionId}/records?modified_after=${time}`);
      expect({ status: answer.status, body: answer.body }, time).toEqual({ status: 400, body: { error: { code: 'invalid_request', message: rule } } });
    }
    for (const time of ['2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.5Z', '2026-01-01T00:00:00.123000%2B01:00']) {
      const answer = await callApi(server.url, TEST_API_KEY, 'GET', `/connections/${connectionId}/records?modified_after=${time}`);
      expect(answer.status, `${time}: ${answer.text}`).toBe(200);
    }
  });
});
