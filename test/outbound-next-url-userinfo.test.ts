// A provider's next URL carrying userinfo (user:password@): never a page token. No provider
// request may carry credentials in its URL, so such a URL cannot be fetched; stored as the page
// token, it put what the provider echoed there (the connection's own password, percent-encoded)
// into sync_tasks and the Temporal heartbeat before the next page failed on it. Runs the
// connector's page fetch against a fake provider on 127.0.0.1.
import { afterEach, describe, expect, it } from 'vitest';
import { httpConnector } from '../connectors/http';
import { Permanent } from '../connectors/types';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';

afterEach(closeFakeServers);

const PASSWORD = 'pa ss/word+1';

describe('http connector: a next URL with userinfo', () => {
  it('fails for good, quoting the URL without its userinfo, and is never made a page token', async () => {
    let nextUrl = '';
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: [{ id: 'a' }], next: nextUrl }));
    });
    const config = { base_url: fake.url, auth: { type: 'basic' }, pagination: { type: 'next_url', path: 'next' }, resources: { items: { path: '/items', records: 'data', id: 'id' } } };
    const host = new URL(fake.url).host;
    // The password as the URL parser writes it in userinfo, and someone else's userinfo.
    for (const userinfo of [`ann:${encodeURIComponent(PASSWORD)}`, 'ann:pa%20ss%2fword%2b1', 'other:hunter22']) {
      nextUrl = `http://${userinfo}@${host}/items?page=12`;
      const outcome = await httpConnector
        .fetchPage({ resource: 'items', since: null, until: null, pageToken: null, config, credentials: { username: 'ann', password: PASSWORD }, policy: TEST_PROVIDER_POLICY })
        .then((page) => `page token ${Buffer.from(page.nextPageToken ?? '', 'base64url').toString('utf8')}`, (err: unknown) => err);
      expect(outcome, userinfo).toBeInstanceOf(Permanent);
      expect((outcome as Error).message).toBe(`http connector: the next URL from body 'next' carries credentials (user:password@; not stored, not followed): '${fake.url}/items?page=12'`);
    }
  });
});
