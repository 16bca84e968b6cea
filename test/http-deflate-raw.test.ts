// A `Content-Encoding: deflate` body sent as raw DEFLATE data without the zlib wrapper: RFC 9110
// names the wrapped form, but some servers (older IIS among them) send it raw, and browsers and
// curl read both. The http connector failed every page of such a provider as unreadable.
import { deflateRawSync, deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { httpConnector } from '../connectors/http';
import { pagesOf } from '../connectors/pages';
import { type ConnectorRecord } from '../connectors/types';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { serve } from './helpers/fake-server';

const ITEMS = [{ id: 'a', updated_at: '2025-03-01T00:00:00Z' }, { id: 'b', updated_at: '2025-03-01T00:01:00Z' }];

const config = (baseUrl: string) => ({
  base_url: baseUrl,
  auth: { type: 'bearer' },
  resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at', records: 'items' } },
});

async function read(cfg: Record<string, unknown>, credentials: Record<string, unknown>): Promise<ConnectorRecord[]> {
  const records: ConnectorRecord[] = [];
  const request = { resource: 'items', since: null, until: null, config: cfg, credentials, policy: TEST_PROVIDER_POLICY };
  for await (const page of pagesOf(httpConnector, request, null)) records.push(...page.records);
  return records;
}

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
