// A credential a provider echoes back percent-encoded in its own way (lower-case hex, `/` left as
// it is in a path, `+` for a space next to `%2B`) is redacted from what leaves a provider call as
// surely as one it echoes as it is: the failure of the sync activity (sync_jobs, the Temporal
// history, the log) must carry no secret in any of its URL encodings. Runs the http connector's
// page fetch against a fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { httpConnector } from '../connectors/http';
import { credentialSecrets, redactSecrets } from '../connectors/provider-http';
import { toActivityFailure } from '../services/connector-failure';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';

afterEach(closeFakeServers);

const PASSWORD = 'pa ss/word+1=';
const CREDENTIALS = { username: 'ann', password: PASSWORD };

/** Each way a provider may write PASSWORD into a URL: none of them is `encodeURIComponent`'s or a form's. */
const ECHOES = ['pa%20ss%2fword%2b1%3d', 'pa%20ss/word%2B1%3D', 'pa+ss/word%2B1=', 'p%61 ss%2Fword+1='];

describe('secrets in the URL encodings a provider writes', () => {
  it('redactSecrets redacts each encoding of a credential and leaves other text as it is', () => {
    for (const echo of ECHOES) expect(redactSecrets(`next: https://x.example/a?p=${echo}&page=2`, credentialSecrets(CREDENTIALS)), echo).toBe('next: https://x.example/a?p=[redacted]&page=2');
    expect(redactSecrets('pa ss/word+2 and pa%20ss', credentialSecrets(CREDENTIALS))).toBe('pa ss/word+2 and pa%20ss');
  });

  it("a next URL to another origin echoing the password in the provider's own encoding fails the activity with no encoding of it", async () => {
    let echo = '';
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: [{ id: 'a' }], next: `https://elsewhere.example/items?p=${echo}&page=2` }));
    });
    const config = { base_url: fake.url, auth: { type: 'basic' }, pagination: { type: 'next_url', path: 'next' }, resources: { items: { path: '/items', records: 'data', id: 'id' } } };
    for (echo of ECHOES) {
      const err = await httpConnector.fetchPage({ resource: 'items', since: null, until: null, pageToken: null, config, credentials: CREDENTIALS, policy: TEST_PROVIDER_POLICY }).catch((e: unknown) => e);
      const message = (toActivityFailure(err, credentialSecrets(CREDENTIALS)) as Error).message;
      expect(message, echo).toBe(`http connector: refusing to follow body 'next' URL 'https://elsewhere.example/items?p=[redacted]&page=2' outside ${fake.url}`);
    }
  });
});
