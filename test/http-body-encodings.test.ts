// How the http connector reads the bytes of a provider's JSON body. JSON is UTF-8 (RFC 8259), and
// a body that is valid UTF-8 is read so whatever its Content-Type's charset says (servers stamp
// `charset=ISO-8859-1` on everything by default). But a body that is not UTF-8 and names the
// charset it is in (an older API answering `application/json; charset=iso-8859-1` in Latin-1) is
// read in that charset: read as UTF-8, every accented letter became U+FFFD and was stored so, the
// provider's text lost. A byte order mark (RFC 8259 lets a reader ignore one; .NET servers send it)
// is no part of the JSON: read as a character, it made every page unreadable, retried for ever.
// A UTF-16 body is known by its byte order mark. A body in windows-1252 (or iso-8859-1, latin1,
// us-ascii: WHATWG reads them all as windows-1252) has its bytes 0x80-0x9F read as windows-1252
// has them: Node 20's TextDecoder read 0x80 as U+0080, not the euro sign the provider sent. A
// page body that is not UTF-8 and names no charset a decoder knows (or one that does not hold its
// bytes) fails for good, naming the resource: it was read as UTF-8, each such byte stored as
// U+FFFD, the provider's text silently lost.
// A provider that answers in another charset and never names it (`application/json` over
// windows-1252 bytes) had no way through: its operator names the charset in the config
// (`charset`, per resource or for the connection), read only for bodies whose Content-Type names
// none and that are not UTF-8; a label no decoder knows is refused with the config.
import { describe, expect, it } from 'vitest';
import { configProblem } from '../commands/provider-configs';
import { httpConnector } from '../connectors/http';
import { pagesOf } from '../connectors/pages';
import { Permanent, Transient, type ConnectorRecord } from '../connectors/types';
import { TEST_PROVIDER_POLICY } from './helpers/deps';
import { serve } from './helpers/fake-server';

const BODY = JSON.stringify({ items: [{ id: 'a', name: 'Café Müller', updated_at: '2025-03-01T00:00:00Z' }, { id: 'b', name: '€ 5', updated_at: '2025-03-01T00:01:00Z' }] });

async function read(contentType: string, body: Buffer, settings: { resource?: Record<string, unknown>; connection?: Record<string, unknown> } = {}): Promise<ConnectorRecord[]> {
  const fake = await serve((_req, res) => {
    res.writeHead(200, { 'content-type': contentType });
    res.end(body);
  });
  const config = {
    base_url: fake.url,
    resources: { items: { path: '/items', id: 'id', updated_at: 'updated_at', records: 'items', ...settings.resource } },
    ...settings.connection,
  };
  const records: ConnectorRecord[] = [];
  const request = { resource: 'items', since: null, until: null, config, credentials: null, policy: TEST_PROVIDER_POLICY };
  for await (const page of pagesOf(httpConnector, request, null)) records.push(...page.records);
  return records;
}

const names = (records: ConnectorRecord[]) => records.map((r) => r.data.name);

describe('the http connector and the bytes of a body', () => {
  it('reads a body in the charset its Content-Type names when it is not UTF-8', async () => {
    const latin1 = Buffer.from(BODY.replace('€', 'EUR'), 'latin1');
    expect(names(await read('application/json; charset=iso-8859-1', latin1))).toEqual(['Café Müller', 'EUR 5']);
    // A quoted charset, named in another case.
    expect(names(await read('application/json;charset="Windows-1252"', latin1))).toEqual(['Café Müller', 'EUR 5']);
  });

  it('reads bytes 0x80-0x9F of a body in windows-1252 (or a label WHATWG reads as it) as windows-1252 has them, not as Latin-1 controls', async () => {
    // '€ 5' as windows-1252 writes it (0x80), and curly quotes, a dash and letters of 0x80-0x9F.
    const cp1252 = Buffer.from(JSON.stringify({ items: [
      { id: 'a', name: 'Café Müller', updated_at: '2025-03-01T00:00:00Z' },
      { id: 'b', name: '\x80 5', updated_at: '2025-03-01T00:01:00Z' },
      { id: 'c', name: '\x93Š\x94 \x96 \x8c\x9f\x99', updated_at: '2025-03-01T00:02:00Z' },
      // The five bytes windows-1252 leaves undefined: the C1 controls of their value (WHATWG), each byte kept.
      { id: 'd', name: '\x81\x8d\x8f\x90\x9d', updated_at: '2025-03-01T00:03:00Z' },
    ] }).replace('Š', '\x8a'), 'latin1');
    const expected = ['Café Müller', '€ 5', '\u201cŠ\u201d \u2013 ŒŸ™', '\u0081\u008d\u008f\u0090\u009d'];
    for (const charset of ['windows-1252', 'iso-8859-1', 'latin1', 'us-ascii']) {
      expect(names(await read(`application/json; charset=${charset}`, cp1252)), charset).toEqual(expected);
    }
  });

  it('reads a UTF-8 body as UTF-8 whatever charset its Content-Type names', async () => {
    expect(names(await read('application/json; charset=ISO-8859-1', Buffer.from(BODY, 'utf8')))).toEqual(['Café Müller', '€ 5']);
    expect(names(await read('application/json', Buffer.from(BODY, 'utf8')))).toEqual(['Café Müller', '€ 5']);
  });

  it('reads a body that begins with a byte order mark, UTF-8 or UTF-16', async () => {
    expect(names(await read('application/json', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(BODY, 'utf8')])))).toEqual(['Café Müller', '€ 5']);
    expect(names(await read('application/json; charset=utf-8', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(BODY, 'utf16le')])))).toEqual(['Café Müller', '€ 5']);
    // Without one, UTF-16 as the Content-Type names it (ASCII in UTF-16 is valid UTF-8, NULs between the letters).
    const ascii = BODY.replace('Café Müller', 'Cafe').replace('€', 'EUR');
    expect(names(await read('application/json; charset=utf-16le', Buffer.from(ascii, 'utf16le')))).toEqual(['Cafe', 'EUR 5']);
    const be = Buffer.from(BODY, 'utf16le').swap16();
    expect(names(await read('application/json', Buffer.concat([Buffer.from([0xfe, 0xff]), be])))).toEqual(['Café Müller', '€ 5']);
  });

  it('fails the page for good, naming the resource, when a body is not UTF-8 and names no charset a decoder knows: nothing is stored with U+FFFD for its bytes', async () => {
    const latin1 = Buffer.from(BODY.replace('€', 'EUR'), 'latin1');
    const fails = async (contentType: string, problem: RegExp) => {
      const error = await read(contentType, latin1).then(() => null, (err: unknown) => err);
      expect(error, contentType).toBeInstanceOf(Permanent);
      expect((error as Error).message, contentType).toMatch(problem);
      expect((error as Error).message, contentType).toMatch(/^http connector: 'items' \(\/items\): /);
    };
    await fails('application/json', /the body is not UTF-8 and its Content-Type \('application\/json'\) names no charset/);
    await fails('application/json; charset=no-such-charset', /the body is not UTF-8 and its Content-Type names a charset no decoder here knows \('no-such-charset'\)/);
    // Named UTF-8, it is not: the same.
    await fails('application/json; charset=utf-8', /the body is not UTF-8, the charset its Content-Type names/);
    // A charset a decoder knows that cannot read a byte of the body: that byte is not replaced either.
    await fails('application/json; charset=shift_jis', /the body is not UTF-8 and not valid shift_jis, the charset its Content-Type names/);
  });

  it("reads a body that is not UTF-8 and whose Content-Type names no charset in the charset configured for it (the resource's, else the connection's)", async () => {
    const cp1252 = Buffer.from(JSON.stringify({ items: [{ id: 'a', name: 'Café \x805', updated_at: '2025-03-01T00:00:00Z' }] }), 'latin1');
    expect(names(await read('application/json', cp1252, { resource: { charset: 'windows-1252' } }))).toEqual(['Café €5']);
    // An alias of windows-1252 is read as it too (0x80 the euro sign, not a C1 control).
    expect(names(await read('application/json', cp1252, { resource: { charset: 'ISO-8859-1' } }))).toEqual(['Café €5']);
    // The connection's, for every resource that names none; a resource's own comes first.
    expect(names(await read('application/json', cp1252, { connection: { charset: 'cp1252' } }))).toEqual(['Café €5']);
    expect(names(await read('application/json', cp1252, { connection: { charset: 'utf-8' }, resource: { charset: 'windows-1252' } }))).toEqual(['Café €5']);
    // Another charset TextDecoder knows.
    const koi8 = Buffer.from([...Buffer.from('{"items":[{"id":"a","name":"'), 0xf0, 0xd2, 0xc9, 0xd7, 0xc5, 0xd4, ...Buffer.from('","updated_at":"2025-03-01T00:00:00Z"}]}')]);
    expect(names(await read('application/json', koi8, { resource: { charset: 'koi8-r' } }))).toEqual(['Привет']);
    // A valid UTF-8 body is still UTF-8.
    expect(names(await read('application/json', Buffer.from(BODY, 'utf8'), { resource: { charset: 'windows-1252' } }))).toEqual(['Café Müller', '€ 5']);
    // A charset the Content-Type names still rules: one that does not hold the bytes fails as before.
    const error = await read('application/json; charset=shift_jis', Buffer.from(BODY.replace('€', 'EUR'), 'latin1'), { resource: { charset: 'windows-1252' } }).then(() => null, (err: unknown) => err);
    expect(error).toBeInstanceOf(Permanent);
    expect((error as Error).message).toMatch(/not valid shift_jis, the charset its Content-Type names/);
    // A configured charset that does not hold a byte of the body fails the page too, saying which.
    const utf8Named = await read('application/json', cp1252, { resource: { charset: 'utf-8' } }).then(() => null, (err: unknown) => err);
    expect(utf8Named).toBeInstanceOf(Permanent);
    expect((utf8Named as Error).message).toMatch(/the body is not UTF-8, the charset configured for it \(charset\)/);
  });

  it('still fails such a page without a configured charset, and refuses a charset label no decoder knows with the config', async () => {
    const cp1252 = Buffer.from(JSON.stringify({ items: [{ id: 'a', name: 'Café \x805', updated_at: '2025-03-01T00:00:00Z' }] }), 'latin1');
    const error = await read('application/json', cp1252).then(() => null, (err: unknown) => err);
    expect(error).toBeInstanceOf(Permanent);
    expect((error as Error).message).toMatch(/names no charset/);
    const resource = { path: '/items', id: 'id' };
    expect(configProblem('http', { base_url: 'https://api.example.com', resources: { items: { ...resource, charset: 'no-such-charset' } } }))
      .toMatch(/^http connector: invalid config: resources\.items\.charset: must be a charset label/);
    expect(configProblem('http', { base_url: 'https://api.example.com', charset: 'klingon', resources: { items: resource } }))
      .toMatch(/^http connector: invalid config: charset: must be a charset label/);
    expect(configProblem('http', { base_url: 'https://api.example.com', charset: 'Windows-1252', resources: { items: { ...resource, charset: 'latin1' } } })).toBeNull();
  });

  it('reads an error answer whose body is not UTF-8 as it did: a 503 is still worth another try', async () => {
    const fake = await serve((_req, res) => {
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end(Buffer.from('Dienst vorübergehend nicht verfügbar', 'latin1'));
    });
    const config = { base_url: fake.url, resources: { items: { path: '/items', id: 'id', records: 'items' } } };
    const request = { resource: 'items', since: null, until: null, config, credentials: null, policy: TEST_PROVIDER_POLICY };
    await expect(httpConnector.fetchPage({ ...request, pageToken: null })).rejects.toBeInstanceOf(Transient);
  });
});
