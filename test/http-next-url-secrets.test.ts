// What the declarative http connector keeps of a provider's next URL in its page token: the URL
// exactly as the provider wrote it, less the parameters that carry a credential (the query auth's
// parameter, under its name in any case; a value that is a secret; a value that embeds a secret
// long enough not to be there by chance). A short password that a page number merely contains
// ("1" in `page=12`) takes nothing away: the next request asks for the provider's next page.
// Runs the sync activity against real Postgres and a fake provider on 127.0.0.1, and the
// connector's page fetch against the same kind of provider.
import { afterEach, describe, expect, it } from 'vitest';
import { httpConnector } from '../connectors/http';
import { Permanent } from '../connectors/types';
import { useTestDatabase } from './helpers/database';
import { sealedTestCredentials, TEST_PROVIDER_POLICY, testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

/** A provider of two pages: the first one's next URL is `next`; any other request is the first page again. */
const twoPages = (next: string) =>
  serve((req, res) => {
    const second = new URL(req.url ?? '/', 'http://x').searchParams.get('page') === '12';
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(second ? { data: [{ id: 'b' }], next: null } : { data: [{ id: 'a' }], next }));
  });

const config = (url: string, auth: Record<string, unknown>) => ({
  base_url: url, auth, pagination: { type: 'next_url', path: 'next' }, resources: { items: { path: '/items', records: 'data', id: 'id' } },
});

/** The URL in the page token the first page of `cfg` ends with. */
async function nextTokenUrl(cfg: Record<string, unknown>, credentials: Record<string, unknown>): Promise<string> {
  const page = await httpConnector.fetchPage({ resource: 'items', since: null, until: null, pageToken: null, config: cfg, credentials, policy: TEST_PROVIDER_POLICY });
  return (JSON.parse(Buffer.from(page.nextPageToken!, 'base64url').toString('utf8')) as { url: string }).url;
}

describe('http connector: the secrets of a next URL', () => {
  it('a full sync with basic auth and the one-character password "1" follows the next URL ?page=12 and stores both pages', async () => {
    const fake = await twoPages('/items?page=12');
    const connectionId = await createHttpConnection(db.pool, config(fake.url, { type: 'basic' }), 'short-password');
    await db.pool.query('update connections set credentials = $2::jsonb where id = $1', [connectionId, sealedTestCredentials(connectionId, { username: 'ann', password: '1' })]);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort()).toEqual(['a', 'b']);
    expect(fake.requests.map((r) => r.url)).toEqual(['/items', '/items?page=12']);
  });

  it('keeps the next URL exactly as the provider wrote it when no parameter carries a secret', async () => {
    const fake = await twoPages('/items?page=12&q=a%20b&sort=-updated_at,id&x=tok_live_0');
    expect(await nextTokenUrl(config(fake.url, { type: 'basic' }), { username: 'ann', password: '1' })).toBe(`${fake.url}/items?page=12&q=a%20b&sort=-updated_at,id&x=tok_live_0`);
    // A secret of 4 to 7 characters is looked for as a whole value only.
    expect(await nextTokenUrl(config(fake.url, { type: 'basic' }), { username: 'ann', password: 'p4ss' })).toBe(`${fake.url}/items?page=12&q=a%20b&sort=-updated_at,id&x=tok_live_0`);
  });

  it('drops the parameters that carry a secret, in any encoding, and only those, keeping the others as written', async () => {
    const TOKEN = 'tok_live_0123456789';
    const BASIC = Buffer.from('ann:pa ss/word+1').toString('base64');
    const cases: [string, Record<string, unknown>, Record<string, unknown>][] = [
      // The query auth's parameter echoed, under its name in other letters, and under another name.
      [`/items?API_KEY=${TOKEN}&page=12&key=${TOKEN}&sort=a,b`, { type: 'query', name: 'api_key' }, { token: TOKEN }],
      // A value embedding a long token, as written or percent-encoded.
      [`/items?sig=v1.${TOKEN}.x&page=12&state=${encodeURIComponent(`{"t":"${TOKEN}"}`)}&sort=a,b`, { type: 'bearer' }, { token: TOKEN }],
      // A password as a whole value (form-encoded: `+` for its space), the base64 of basic auth embedded.
      ['/items?p=pa+ss%2Fword%2B1&page=12&a=Basic%20' + encodeURIComponent(BASIC) + '&sort=a,b', { type: 'basic' }, { username: 'ann', password: 'pa ss/word+1' }],
      // A secret of 4 characters is one as a whole value.
      ['/items?pw=p4ss&page=12&sort=a,b', { type: 'basic' }, { username: 'ann', password: 'p4ss' }],
    ];
    for (const [next, auth, credentials] of cases) {
      const fake = await twoPages(next);
      expect(await nextTokenUrl(config(fake.url, auth), credentials), next).toBe(`${fake.url}/items?page=12&sort=a,b`);
    }
  });
});

describe('http connector: the request of a next URL with a query auth', () => {
  it("sends the provider's next URL as written, the secret appended: a provider reading its query strictly (RFC 3986: `+` is a plus) finds its cursor", async () => {
    const TOKEN = 'tok_live_0123456789';
    const fake = await serve((req, res) => {
      const query = (req.url ?? '').split('?')[1] ?? '';
      const params = new Map(query.split('&').map((part) => part.split('=').map(decodeURIComponent) as [string, string]));
      const cursor = params.get('cursor');
      const known = cursor === undefined || cursor === 'a b,c';
      res.writeHead(known ? 200 : 400, { 'content-type': 'application/json' });
      res.end(JSON.stringify(!known ? { error: `unknown cursor ${cursor}` } : cursor ? { data: [{ id: 'b' }], next: null } : { data: [{ id: 'a' }], next: '/items?cursor=a%20b,c&fields=id,name' }));
    });
    const connectionId = await createHttpConnection(db.pool, config(fake.url, { type: 'query', name: 'api_key' }), 'strict-query');
    await db.pool.query('update connections set credentials = $2::jsonb where id = $1', [connectionId, sealedTestCredentials(connectionId, { token: TOKEN })]);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    expect([...(await storedRecords(db.pool, connectionId, 'items')).keys()].sort()).toEqual(['a', 'b']);
    expect(fake.requests.map((r) => r.url)).toEqual([`/items?api_key=${TOKEN}`, `/items?cursor=a%20b,c&fields=id,name&api_key=${TOKEN}`]);
  });
});

describe('http connector: a secret outside a next URL query', () => {
  const TOKEN = 'tok_live_0123456789';
  const fetchFirst = (url: string) =>
    httpConnector.fetchPage({ resource: 'items', since: null, until: null, pageToken: null, config: config(url, { type: 'bearer' }), credentials: { token: TOKEN }, policy: TEST_PROVIDER_POLICY });

  it('a next URL with a secret in its path fails for good, quoting it redacted, and is never made a page token', async () => {
    const fake = await twoPages(`/items/${TOKEN}/next?page=12`);
    const err = (await fetchFirst(fake.url).catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toBe(`http connector: the next URL from body 'next' carries a credential outside its query (not stored, not followed): '${fake.url}/items/[redacted]/next?page=12'`);
  });

  it("a next URL's fragment (never sent) is not kept", async () => {
    const fake = await twoPages(`/items?page=12#${TOKEN}`);
    expect(await nextTokenUrl(config(fake.url, { type: 'bearer' }), { token: TOKEN })).toBe(`${fake.url}/items?page=12`);
  });
});
