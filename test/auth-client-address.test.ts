// Failed tenant-key lookups are limited per client: behind a trusted reverse proxy the client is the
// rightmost X-Forwarded-For entry that is not a trusted proxy, so one client's bad keys do not lock
// out another client of the same proxy (another tenant); without TRUSTED_PROXIES (or from a peer
// outside it) X-Forwarded-For is never believed, so a forged one does not escape the limit; IPv6
// clients are counted per /64. Over real HTTP on 127.0.0.1, against the real API app and Postgres.
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { apiAppWithoutTemporal } from './helpers/api';
import { countingQueries, useTestDatabase } from './helpers/database';
import { listen, type HttpServer } from '../lib/http';
import { addressBucket, clientAddress, parseTrustedProxies } from '../lib/client-address';
import { ConfigError, loadConfig } from '../lib/config';
import type { ApiDeps } from '../api/deps';

const bogus = (i: number) => `stk_${'7'.repeat(10)}${String(i).padStart(2, '0')}_${'C'.repeat(43)}`;

/** GET /connections with `key`, from `localAddress` (a loopback address of this host), with these headers; its status. */
function get(server: HttpServer, key: string, headers: Record<string, string> = {}, localAddress = '127.0.0.1'): Promise<number> {
  const url = new URL('/connections', server.url);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'GET', localAddress, agent: false, headers: { authorization: `Bearer ${key}`, ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the failed-lookup limit counts per client (real API app over HTTP, real Postgres)', () => {
  const db = useTestDatabase();

  async function serve(overrides: Partial<ApiDeps>): Promise<HttpServer> {
    return listen(apiAppWithoutTemporal(db.pool, 'auth-client-address', { authFailureLimit: { ratePerSecond: 0.001, burst: 3 }, ...overrides }), '127.0.0.1', 0);
  }

  it("behind a trusted proxy, one forwarded client's bad keys do not lock out another forwarded client's good key", async () => {
    const server = await serve({ trustedProxies: parseTrustedProxies('127.0.0.1') });
    try {
      const { secret } = await createApiKey(db, 'proxied-tenant');
      // The proxy appends the address it took each request from; the client's own entries come first.
      const attacker = { 'x-forwarded-for': '198.51.100.23, 203.0.113.5' };
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push(await get(server, bogus(i), attacker));
      expect(statuses).toEqual([401, 401, 401, 429, 429]);
      // The attacker rotating what it writes itself changes nothing: the proxy's entry is the one read.
      expect(await get(server, bogus(8), { 'x-forwarded-for': '192.0.2.77, 203.0.113.5' })).toBe(429);
      // Another client of the same proxy, another tenant: its key is looked up and answered.
      expect(await get(server, secret, { 'x-forwarded-for': '203.0.113.6' })).toBe(200);
      // A client behind a second trusted hop is still the rightmost untrusted entry.
      expect(await get(server, secret, { 'x-forwarded-for': '203.0.113.7, 127.0.0.1' })).toBe(200);
    } finally {
      await server.close();
    }
  });

  it('behind a trusted proxy, IPv6 clients of one /64 share a bucket; another /64 has its own', async () => {
    const server = await serve({ trustedProxies: parseTrustedProxies('127.0.0.0/8') });
    try {
      const { secret } = await createApiKey(db, 'six-tenant');
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push(await get(server, bogus(20 + i), { 'x-forwarded-for': `2001:db8:1:2::${i + 1}` }));
      expect(statuses).toEqual([401, 401, 401, 429]);
      expect(await get(server, secret, { 'x-forwarded-for': '2001:db8:1:2:ffff:ffff:ffff:ffff' })).toBe(429);
      expect(await get(server, secret, { 'x-forwarded-for': '2001:db8:1:3::1' })).toBe(200);
    } finally {
      await server.close();
    }
  });

  it('without TRUSTED_PROXIES, or from a peer it does not name, a forged X-Forwarded-For does not escape the limit', async () => {
    for (const trustedProxies of [parseTrustedProxies(''), parseTrustedProxies('127.0.0.2')]) {
      const server = await serve({ trustedProxies });
      try {
        const statuses = [];
        for (let i = 0; i < 5; i++) statuses.push(await get(server, bogus(40 + i), { 'x-forwarded-for': `203.0.113.${100 + i}` }));
        expect(statuses).toEqual([401, 401, 401, 429, 429]);
      } finally {
        await server.close();
      }
    }
    // The peer the setting names is believed: from 127.0.0.2 the forwarded client is counted.
    const server = await serve({ trustedProxies: parseTrustedProxies('127.0.0.2') });
    try {
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push(await get(server, bogus(60 + i), { 'x-forwarded-for': `203.0.113.${i + 1}` }, '127.0.0.2'));
      expect(statuses).toEqual([401, 401, 401, 401]);
    } finally {
      await server.close();
    }
  });
});

describe('the OAuth callback, the one open route that looks something up, is held to the same per-address limit', () => {
  const db = useTestDatabase();

  /** GET the callback with this query from 127.0.0.1; its status. */
  async function callback(server: HttpServer, query: string): Promise<number> {
    const res = await fetch(new URL(`/oauth/callback?${query}`, server.url));
    await res.text();
    return res.status;
  }

  it('unknown states spend the address\'s failed-lookup bucket (shared with tenant keys): past it, 429 before any lookup; a state that was found spends nothing', async () => {
    // The callback's state lookup is the consuming delete.
    const counting = countingQueries(db.pool, 'delete from oauth_states where state_hash');
    const server = await listen(apiAppWithoutTemporal(counting.pool, 'auth-client-address', { authFailureLimit: { ratePerSecond: 0.001, burst: 3 } }), '127.0.0.1', 0);
    try {
      // A flow under way: its state is found (and consumed) by the callback, here one the person refused.
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status) values ('callback-tenant', 'demo', 'callback', 'paused') returning id`,
      );
      const app = await db.pool.query<{ id: string }>(
        `insert into oauth_apps (tenant_id, name, client_id, client_secret, authorize_url, token_url, redirect_uri)
         values ('callback-tenant', 'app', 'client', 'unused', 'https://example.com/authorize', 'https://example.com/token', 'https://example.com/callback') returning id`,
      );
      const state = 'a-state-the-flow-handed-out';
      await db.pool.query(
        `insert into oauth_states (state_hash, tenant_id, connection_id, oauth_app_id, code_verifier, expires_at)
         values (encode(sha256(convert_to($1, 'UTF8')), 'hex'), 'callback-tenant', $2, $3, 'unused', now() + interval '10 minutes')`,
        [state, rows[0]!.id, app.rows[0]!.id],
      );
      expect(await callback(server, `state=${state}&error=access_denied`)).toBe(502);
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push(await callback(server, `state=guessed-${i}&code=x`));
      expect(statuses).toEqual([400, 400, 400, 429, 429]);
      expect(counting.count()).toBe(1 + 3);
      // One bucket of failed lookups per address: a made-up tenant key from it is refused too.
      expect(await get(server, bogus(80))).toBe(429);
    } finally {
      await server.close();
    }
  });
});

describe('client address and bucket (pure)', () => {
  it('counts IPv6 addresses per /64 and IPv4 addresses (also IPv4-mapped) on their own', () => {
    expect(addressBucket('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:db8:1:2:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:DB8:1:2:0:0:0:9')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressBucket('203.0.113.5')).toBe('203.0.113.5');
    expect(addressBucket('::ffff:203.0.113.5')).toBe('203.0.113.5');
    expect(addressBucket('unknown')).toBe('unknown');
  });

  it('takes the rightmost X-Forwarded-For entry that is not a trusted proxy, and only from a trusted peer', () => {
    const trusted = parseTrustedProxies('10.0.0.0/8, 192.0.2.10, fd00::/8');
    expect(clientAddress('10.1.2.3', '1.1.1.1, 203.0.113.5, 192.0.2.10', trusted)).toBe('203.0.113.5');
    expect(clientAddress('::ffff:10.1.2.3', '203.0.113.5', trusted)).toBe('203.0.113.5');
    expect(clientAddress('fd00::1', '2001:db8::5', trusted)).toBe('2001:db8::5');
    // An untrusted peer is the client, whatever it says.
    expect(clientAddress('198.51.100.1', '203.0.113.5', trusted)).toBe('198.51.100.1');
    expect(clientAddress('10.1.2.3', '203.0.113.5', [])).toBe('10.1.2.3');
    // No entry, or one that is not an address: the last trusted hop is counted, never text a client chose.
    expect(clientAddress('10.1.2.3', undefined, trusted)).toBe('10.1.2.3');
    expect(clientAddress('10.1.2.3', 'nonsense, 192.0.2.10', trusted)).toBe('192.0.2.10');
    // Every entry trusted: the leftmost is the client.
    expect(clientAddress('10.1.2.3', '10.9.9.9, 192.0.2.10', trusted)).toBe('10.9.9.9');
  });

  it('refuses a TRUSTED_PROXIES entry that is not an address or CIDR range, naming the variable', () => {
    expect(loadConfig({}).TRUSTED_PROXIES).toEqual([]);
    expect(loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8, ::1' }).TRUSTED_PROXIES).toHaveLength(2);
    expect(() => loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8,proxy.internal' })).toThrow(ConfigError);
    expect(() => loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8,proxy.internal' })).toThrow(/TRUSTED_PROXIES: must be a comma-separated list of IP addresses or CIDR ranges.*"proxy\.internal"/);
    expect(() => loadConfig({ TRUSTED_PROXIES: '10.0.0.0/33' })).toThrow(/TRUSTED_PROXIES: /);
  });
});
