// A token endpoint (aimed by a tenant) echoing what it was sent into its `error`: the request's
// Authorization header (HTTP Basic: the base64 of the client id and secret) or its form body (the
// refresh token form-encoded, as a token with `/`, `+` or `=` always is). The quoted error must
// carry no secret in any form the request sent it in. Against a fake token endpoint on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { refreshGrant, type TokenRequestPolicy } from '../lib/oauth-client';
import { closeFakeServers, serve } from './helpers/fake-server';

afterEach(closeFakeServers);

const CLIENT_SECRET = 'cs/0123+4567=';
const REFRESH_TOKEN = 'rt/abcd+efgh=';
const POLICY: TokenRequestPolicy = { allowPrivate: true, timeoutMs: 5_000, maxResponseBytes: 1 << 20 };

describe('a token endpoint echoing the request into its error', () => {
  it('the error quoted holds neither the Basic credentials nor the refresh token as the request sent them', async () => {
    let echo: 'authorization' | 'body' = 'authorization';
    const sent: string[] = [];
    const endpoint = await serve((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const quoted = echo === 'authorization' ? (req.headers.authorization ?? '') : (body.match(/refresh_token=[^&]*/)?.[0] ?? '');
        sent.push(quoted);
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `invalid_request ${quoted}` }));
      });
    });
    const app = { clientId: 'client-1', clientSecret: CLIENT_SECRET, tokenUrl: `${endpoint.url}/token` };
    for (echo of ['authorization', 'body'] as const) {
      const err = await refreshGrant(app, REFRESH_TOKEN, POLICY).then(() => null, (e: Error) => e);
      const quoted = sent.at(-1)!;
      expect(quoted, echo).toMatch(echo === 'authorization' ? /^Basic [A-Za-z0-9+/=]{20,}$/ : /^refresh_token=rt%2Fabcd%2Befgh%3D$/);
      expect(err?.message, echo).toMatch(/^the token endpoint answered 400 invalid_request /);
      const value = quoted.slice(quoted.indexOf(echo === 'authorization' ? ' ' : '=') + 1);
      expect(err!.message, echo).not.toContain(value);
      expect(err!.message, echo).toContain('[redacted]');
    }
  });
});
