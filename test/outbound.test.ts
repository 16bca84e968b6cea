// Outbound requests a user can aim (webhook URLs): the address rules, and the POST's bounds, against
// real HTTP servers on 127.0.0.1 only.
import { lookup } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { CertificateRefused, getBounded, HeadersTooLarge, isPublicAddress, MalformedAnswer, outboundUrlProblem, parseHostsFile, postBounded, resolveName, TLS_HANDSHAKE_FAILED } from '../lib/outbound';
import { closeFakeServers, serve, serveRaw, serveTls, TLS_FIXTURES } from './helpers/fake-server';
import { trustingClient } from './helpers/tls-trusting-client';

describe('which addresses outbound requests may reach', () => {
  it('classifies loopback, private, link-local, CGNAT, unique-local, mapped and unspecified addresses as not public', () => {
    const internal = ['127.0.0.1', '10.0.0.1', '172.16.5.4', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:10.0.0.1', '::ffff:127.0.0.1', '224.0.0.1', '::7f00:1', '::a00:1', '::808:808'];
    for (const address of internal) expect(isPublicAddress(address), address).toBe(false);
    for (const address of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111']) expect(isPublicAddress(address), address).toBe(true);
    expect(isPublicAddress('not-an-address')).toBe(false);
  });

  it('refuses every address of ::/8 (reserved by the IETF; some stacks route parts of it to an embedded IPv4 address) but the IPv4-mapped and NAT64 ones, judged by their IPv4 address', () => {
    for (const address of ['::1:7f00:1', '::1:a00:1', '::1:0:0:1', '0:0:1::', '::ffff:1:808:808', '0:1::8.8.8.8', '1::', 'ff::1', 'ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '::ffff:0:808:808', '64:ff9b:1::808:808']) {
      expect(isPublicAddress(address), address).toBe(false);
    }
    for (const address of ['::ffff:8.8.8.8', '::ffff:101:101', '64:ff9b::808:808']) expect(isPublicAddress(address), address).toBe(true);
    // The block's edge: 100::/64 is the discard prefix, 2000::/3 global unicast.
    expect(isPublicAddress('100::1')).toBe(false);
    expect(outboundUrlProblem('http://[::1:7f00:1]/hook', false)).toMatch(/loopback, private or link-local/);
    expect(outboundUrlProblem('http://[::1:7f00:1]/hook', true)).toBeNull();
  });

  it('judges an address of the NAT64 well-known prefix (64:ff9b::/96, what DNS64 answers on an IPv6-only network) by the IPv4 address it carries', () => {
    for (const address of ['64:ff9b::8.8.8.8', '64:ff9b::101:101']) expect(isPublicAddress(address), address).toBe(true);
    for (const address of ['64:ff9b::127.0.0.1', '64:ff9b::a00:1', '64:ff9b::169.254.169.254', '64:ff9b::192.168.1.1', '64:ff9b::100.64.0.1']) {
      expect(isPublicAddress(address), address).toBe(false);
    }
    expect(outboundUrlProblem('http://[64:ff9b::a9fe:a9fe]/latest/meta-data', false)).toMatch(/loopback, private or link-local/);
    expect(outboundUrlProblem('https://[64:ff9b::808:808]/hook', false)).toBeNull();
  });

  it('refuses non-http(s) URLs, credentials in the URL, and internal hosts unless allowed', () => {
    expect(outboundUrlProblem('https://example.com/hook', false)).toBeNull();
    expect(outboundUrlProblem('ftp://example.com/hook', false)).toMatch(/http/);
    expect(outboundUrlProblem('https://user:pw@example.com/hook', false)).toMatch(/credentials/);
    expect(outboundUrlProblem('not a url', false)).toMatch(/absolute/);
    // Nothing can be reached there, whether private addresses are allowed or not.
    for (const allowPrivate of [false, true]) {
      expect(outboundUrlProblem('http://example.com:0/hook', allowPrivate)).toMatch(/port 0/);
      for (const url of ['http://hooks..example.com/', 'http://.example.com/', 'https://a..b:8443/x']) expect(outboundUrlProblem(url, allowPrivate), url).toMatch(/empty label/);
    }
    for (const url of ['http://127.0.0.1/', 'http://[::1]/', 'http://[::ffff:a00:1]/', 'http://[::7f00:1]/', 'http://localhost:8080/', 'http://api.localhost/', 'http://localhost./', 'http://api.localhost../', 'http://LOCALHOST.:8080/']) {
      expect(outboundUrlProblem(url, false), url).toMatch(/loopback, private or link-local/);
      expect(outboundUrlProblem(url, true), url).toBeNull();
    }
  });
});

describe('how outbound requests resolve names', () => {
  it('reads a hosts file as the system does: each name (any case, absolute or not) with its addresses in file order; comments and lines of no address are left out', () => {
    const names = parseHostsFile('# comment\n127.0.0.1 localhost Box.example.\n::1\tlocalhost ip6-localhost # loopback\n\nnot-an-address foo\n10.0.0.5 box.example\n');
    expect(Object.fromEntries(names)).toEqual({ localhost: ['127.0.0.1', '::1'], 'box.example': ['127.0.0.1', '10.0.0.5'], 'ip6-localhost': ['::1'] });
  });

  it("resolves a name of /etc/hosts (the machine's own) to its addresses there, an address to itself, and a name that does not resolve to ENOTFOUND", async () => {
    const name = hostname().toLowerCase();
    const hosts = parseHostsFile(await readFile('/etc/hosts', 'utf8')).get(name);
    expect(hosts, `${name} is in /etc/hosts`).toBeDefined();
    expect((await resolveName(name.toUpperCase(), 0)).map((a) => a.address).sort()).toEqual([...hosts!].sort());
    expect(await resolveName('10.1.2.3', 0)).toEqual([{ address: '10.1.2.3', family: 4 }]);
    expect(await resolveName('10.1.2.3', 6).catch((err: NodeJS.ErrnoException) => err.code)).toBe('ENOTFOUND');
    expect(await resolveName('no-such-host.invalid', 0).catch((err: NodeJS.ErrnoException) => err.code)).toBe('ENOTFOUND');
  });
});

describe('postBounded', () => {
  afterEach(async () => {
    await closeFakeServers();
  });

  it('refuses, at connect time, a host name that resolves to a loopback address, and sends nothing', async () => {
    const server = await serve((_req, res) => res.end('ok'));
    const { port } = server;
    // The machine's own name resolves to a loopback address (/etc/hosts) yet passes the URL check
    // (a name, not `localhost`): only the check of the resolved address stops it.
    const name = hostname().toLowerCase();
    const resolved = await lookup(name);
    expect(isPublicAddress(resolved.address), `${name} resolves to ${resolved.address}`).toBe(false);
    expect(outboundUrlProblem(`http://${name}:${port}/`, false)).toBeNull();
    await expect(postBounded(`http://${name}:${port}/`, '{}', {}, { timeoutMs: 5000, maxResponseBytes: 1024, allowPrivate: false })).rejects.toThrow(
      'host not found or not allowed',
    );
    // The same words as a name that does not resolve: errors are no oracle of internal DNS.
    await expect(postBounded('http://no-such-host.invalid/', '{}', {}, { timeoutMs: 5000, maxResponseBytes: 1024, allowPrivate: false })).rejects.toThrow(
      /^host not found or not allowed$/,
    );
    expect(server.requests).toHaveLength(0);
    // Allowed, the same request arrives.
    await expect(postBounded(`http://${name}:${port}/`, '{}', {}, { timeoutMs: 5000, maxResponseBytes: 1024, allowPrivate: true })).resolves.toEqual({ status: 200 });
    expect(server.requests).toHaveLength(1);
  });

  it('answers the status without following a redirect, reads at most the cap of a large answer, and times out a silent receiver', async () => {
    const redirecting = await serve((_req, res) => res.writeHead(302, { location: 'http://127.0.0.1:9/' }).end());
    await expect(postBounded(`${redirecting.url}/`, '{}', {}, { timeoutMs: 5000, maxResponseBytes: 1024, allowPrivate: true })).resolves.toEqual({ status: 302 });
    expect(redirecting.requests).toHaveLength(1);
    await redirecting.close();

    let written = 0;
    const large = await serve((_req, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 'x');
      const pump = () => {
        while (written < 64 * 1024 * 1024 && res.write(chunk)) written += chunk.length;
        if (written < 64 * 1024 * 1024 && !res.destroyed) res.once('drain', pump);
      };
      res.on('close', () => undefined);
      pump();
    });
    await expect(postBounded(`${large.url}/`, '{}', {}, { timeoutMs: 10_000, maxResponseBytes: 256 * 1024, allowPrivate: true })).resolves.toEqual({ status: 200 });
    // The receiver stopped well short of its 64 MiB: the reader hung up after the cap.
    expect(written).toBeLessThan(16 * 1024 * 1024);
    await large.close();

    const silent = await serve(() => undefined); // never answers
    await expect(postBounded(`${silent.url}/`, '{}', {}, { timeoutMs: 300, maxResponseBytes: 1024, allowPrivate: true })).rejects.toThrow('timed out');
  });

  it('settles by its timeout whatever the receiver does: a 101 upgrade answer is a non-2xx status, never a promise left pending', async () => {
    // Node emits neither 'response' nor 'error' for a 101 without an 'upgrade' listener, and the
    // timeout's abort then finds the request destroyed already: the promise stayed pending.
    const server = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const outcome = await postBounded(url, '{}', {}, { timeoutMs: 2_000, maxResponseBytes: 1024, allowPrivate: true }).then(
        (answer) => `answered ${answer.status}`,
        (err: Error) => `failed: ${err.message}`,
      );
      expect(outcome).toBe('answered 101');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('a receiver answering oversized or malformed headers fails with what was wrong (the limit, or the parser\'s finding and code), not a vague network error', async () => {
    const huge = await serve((_req, res) => res.writeHead(200, { 'x-padding': 'p'.repeat(20 * 1024) }).end());
    const malformed = await serveRaw('HTTP/1.1 200 OK\r\nBad Header: x\r\ncontent-length: 0\r\n\r\n');
    const opts = { timeoutMs: 5000, maxResponseBytes: 1024, allowPrivate: true };
    const [tooLarge, invalid] = await Promise.all([huge, malformed].map((server) => postBounded(`${server.url}/hook`, '{}', {}, opts).catch((err: Error) => err)));
    expect(tooLarge).toBeInstanceOf(HeadersTooLarge);
    expect((tooLarge as Error).message).toBe("its response headers exceed 16384 bytes (16 KiB), Node's limit on a response's header section (--max-http-header-size)");
    expect(invalid).toBeInstanceOf(MalformedAnswer);
    expect((invalid as Error).message).toBe('its response is not valid HTTP: a header name or value holds a character HTTP does not allow (HPE_INVALID_HEADER_TOKEN)');
  });

  it('a receiver whose status line and headers were read has answered: a malformed body after them (an invalid chunk, bytes past its Content-Length) does not undo its status', async () => {
    const opts = { timeoutMs: 5000, maxResponseBytes: 1024, allowPrivate: true };
    for (const answer of ['HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n', 'HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\nxx']) {
      const raw = await serveRaw(answer);
      const outcome = await postBounded(`${raw.url}/hook`, '{}', {}, opts).then((a) => `answered ${a.status}`, (err: Error) => `failed: ${err.message}`);
      expect(outcome, answer).toBe(`answered ${answer.slice(9, 12)}`);
    }
  });

  it('a receiver whose status line and headers were read has answered: a body it never finishes (short of its Content-Length, or a chunked stream left open) does not undo its status at the timeout', async () => {
    const opts = { timeoutMs: 300, maxResponseBytes: 1024, allowPrivate: true };
    const shortOfLength = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('{"ok":');
    });
    const openStream = await serve((_req, res) => {
      res.writeHead(202, { 'content-type': 'text/plain' });
      res.write('accepted');
    });
    for (const [server, status] of [[shortOfLength, 200], [openStream, 202]] as const) {
      const outcome = await postBounded(`${server.url}/hook`, '{}', {}, opts).then((a) => `answered ${a.status}`, (err: Error) => `failed: ${err.message}`);
      expect(outcome).toBe(`answered ${status}`);
      expect(server.requests).toHaveLength(1);
    }
  });

  it("keeps its connections to itself: a socket it opened is never reused by another caller's plain http.request (Node's global agent), nor does it reuse one of theirs", async () => {
    const server = await serve((_req, res) => res.end('ok'));
    const opts = { timeoutMs: 5000, maxResponseBytes: 1024, allowPrivate: true };
    const plain = () =>
      new Promise<number>((resolve, reject) => {
        http.get(`${server.url}/plain`, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        }).on('error', reject);
      });
    // The receiver keeps connections alive: a pooled socket would carry the next request.
    await expect(postBounded(`${server.url}/hook`, '{}', {}, opts)).resolves.toEqual({ status: 200 });
    await expect(plain()).resolves.toBe(200);
    expect(server.connections).toBe(2);
    await expect(postBounded(`${server.url}/hook`, '{}', {}, opts)).resolves.toEqual({ status: 200 });
    expect(server.connections).toBe(2);
    expect(server.requests.map((r) => r.url)).toEqual(['/hook', '/plain', '/hook']);
  });

  it('names no address or port when the receiver is unreachable', async () => {
    const gone = await serve(() => undefined);
    await gone.close();
    const failure = await postBounded(`${gone.url}/`, '{}', {}, { timeoutMs: 5000, maxResponseBytes: 1024, allowPrivate: true }).catch((err: Error) => err);
    expect((failure as Error).message).toBe('connection refused');
  });
});

describe('TLS certificates of outbound requests (real HTTPS on 127.0.0.1, the test-only certificates of test/fixtures/tls/)', () => {
  afterEach(async () => {
    await closeFakeServers();
  });

  const opts = { timeoutMs: 5000, allowPrivate: true };
  const UNTRUSTED = 'is signed by an issuer that is not trusted (or the server does not send its intermediate certificates) (UNABLE_TO_VERIFY_LEAF_SIGNATURE)';

  it('an expired, a self-signed and an untrusted certificate each fail POST and GET with their reason in words, the host and Node\'s code, not a vague network error; nothing is sent', async () => {
    const cases = [
      { certificate: 'expired', words: 'has expired (CERT_HAS_EXPIRED)', code: 'CERT_HAS_EXPIRED' },
      { certificate: 'self-signed', words: 'is self-signed, not trusted (DEPTH_ZERO_SELF_SIGNED_CERT)', code: 'DEPTH_ZERO_SELF_SIGNED_CERT' },
      // Signed by the test CA, which this process does not trust.
      { certificate: 'valid', words: UNTRUSTED, code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' },
    ] as const;
    for (const { certificate, words, code } of cases) {
      const server = await serveTls(certificate, (_req, res) => res.end('ok'));
      expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const post = await postBounded(`${server.url}/hook`, '{}', {}, { ...opts, maxResponseBytes: 1024 }).catch((err: unknown) => err);
      const get = await getBounded(`${server.url}/items`, {}, { ...opts, maxBodyBytes: 1024 }).catch((err: unknown) => err);
      for (const err of [post, get]) {
        expect(err, certificate).toBeInstanceOf(CertificateRefused);
        expect((err as CertificateRefused).message, certificate).toBe(`the certificate of 127.0.0.1 ${words}`);
        expect((err as CertificateRefused).tlsCode, certificate).toBe(code);
      }
      expect(server.requests, certificate).toHaveLength(0);
    }
  });

  it('an https URL whose server does not speak TLS (plain HTTP on that port) fails POST and GET as a TLS handshake failure in words, not a vague network error', async () => {
    // What a plain HTTP server answers a TLS client hello (a 400), written as soon as the hello
    // arrives; the connection stays open, so the client reads the answer, never a reset.
    const sockets = new Set<net.Socket>();
    const server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.once('data', () => socket.write('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const post = await postBounded(`${url}/hook`, '{}', {}, { ...opts, maxResponseBytes: 1024 }).catch((err: unknown) => err);
      const get = await getBounded(`${url}/items`, {}, { ...opts, maxBodyBytes: 1024 }).catch((err: unknown) => err);
      for (const err of [post, get]) {
        expect((err as Error).message).toBe(TLS_HANDSHAKE_FAILED);
        expect((err as Error).message).not.toMatch(/127\.0\.0\.1|:\d{2,5}/);
      }
      expect(sockets.size).toBe(2);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('in a process trusting the test CA: a certificate for another host name fails with that reason, an expired one still as expired, and a valid one is answered (POST and a connector\'s GET, which fails for good)', async () => {
    const ok = (_req: unknown, res: http.ServerResponse) => res.end('ok');
    const [wrongName, expired, valid] = await Promise.all([serveTls('wrong-name', ok), serveTls('expired', ok), serveTls('valid', ok)]);
    const [onWrongName, onExpired, onValid] = await trustingClient([wrongName, expired, valid].map((s) => `${s.url}/x`), TLS_FIXTURES);
    const refused = (words: string) => ({ error: 'CertificateRefused', message: `the certificate of 127.0.0.1 ${words}` });
    const permanent = (words: string) => ({ error: 'Permanent', message: `tls test: refusing the provider's TLS certificate: the certificate of 127.0.0.1 ${words}` });
    expect(onWrongName).toEqual({ post: refused('is not valid for this host name (ERR_TLS_CERT_ALTNAME_INVALID)'), get: permanent('is not valid for this host name (ERR_TLS_CERT_ALTNAME_INVALID)') });
    expect(onExpired).toEqual({ post: refused('has expired (CERT_HAS_EXPIRED)'), get: permanent('has expired (CERT_HAS_EXPIRED)') });
    expect(onValid).toEqual({ post: { status: 200 }, get: { status: 200 } });
    expect(valid.requests.map((r) => r.method)).toEqual(['POST', 'GET']);
    expect(wrongName.requests).toHaveLength(0);
  });
});
