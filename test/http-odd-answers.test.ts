// Two things real providers do that the http connector used to fail on. A credential sent in a
// header (bearer, or a header of its own) holding a line break, which no header can carry: the
// request could never be sent, yet the failure was retried as transient on every run and counted
// toward the connection's circuit breaker; it now fails for good before any request, naming the
// credential, never echoing it. A `Content-Encoding: deflate` body sent as raw DEFLATE data without
// the zlib wrapper: RFC 9110 names the wrapped form, but some servers (older IIS among them) send it
// raw, and browsers and curl read both; every page of such a provider failed as unreadable.
import { deflateRawSync, deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { httpConnector } from '../connectors/http';
import { pagesOf } from '../connectors/pages';
import { Permanent, type ConnectorRecord } from '../connectors/types';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { serve } from './helpers/fake-server';

const ITEMS = [{ id: 'a', updated_at: '2025-03-01T00:00:00Z' }, { id: 'b', updated_at: '2025-03-01T00:01:00Z' }];

const config = (baseUrl: string, auth: Record<string, unknown> = { type: 'bearer' }) => ({
  base_url: baseUrl,
  auth,
  resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at', records: 'items' } },
});

async function read(cfg: Record<string, unknown>, credentials: Record<string, unknown>): Promise<ConnectorRecord[]> {
  const records: ConnectorRecord[] = [];
  const request = { resource: 'items', since: null, until: null, config: cfg, credentials, policy: TEST_PROVIDER_POLICY };
  for await (const page of pagesOf(httpConnector, request, null)) records.push(...page.records);
  return records;
}

describe('the http connector and a credential no header can carry', () => {
  it.each([
    ['a bearer token', { type: 'bearer' }, { token: 'token-01234\n56789' }],
    ['a header value', { type: 'header', name: 'x-api-key' }, { token: 'token-01234\r\nx-evil: 1' }],
  ] as const)('fails for good, sending nothing, on %s holding a line break, and never echoes it', async (_what, auth, credentials) => {
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items: ITEMS }));
    });
    const err = (await read(config(fake.url, auth), credentials).catch((e: Error) => e)) as Error;
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/credential/i);
    for (const secret of Object.values(credentials)) expect(err.message).not.toContain(secret.split(/[\r\n]/)[0]);
    expect(fake.requests).toEqual([]);
  });
});

describe('the http connector and a deflate body', () => {
  it.each([
    ['zlib-wrapped', deflateSync],
    ['raw', deflateRawSync],
  ] as const)('reads a deflate body sent %s', async (_form, deflate) => {
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'deflate' });
      res.end(deflate(Buffer.from(JSON.stringify({ items: ITEMS }))));
    });
    const records = await read(config(fake.url), { token: 'token-0123456789' });
    expect(records.map((r) => r.externalId)).toEqual(['a', 'b']);
  });

});
