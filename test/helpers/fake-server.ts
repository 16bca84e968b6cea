// The one fake HTTP server of the tests: a provider or a webhook receiver on 127.0.0.1, on a free
// port, answering with the test's handler and keeping what it received. Every fake provider and
// receiver of the suite is built on `serve`.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/** What a fake server keeps of a request it received. */
export interface FakeRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

/** A fake server on 127.0.0.1. */
export interface FakeServer {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  port: number;
  /** Requests received, in order. */
  requests: FakeRequest[];
  /** TCP connections accepted (a request refused before connecting leaves this at 0). */
  connections: number;
  /** Requests whose connection closed before an answer was sent. */
  abandoned: number;
  /** Drops open connections and stops listening. */
  close(): Promise<void>;
}

/** Answers one request; `fake` is the server answering it. */
export type FakeHandler = (req: IncomingMessage, res: ServerResponse, fake: FakeServer) => void;

/**
 * A gzip bomb: 64 MiB of one byte compresses to one gzip member of ~64 KiB (`member`); `handler`
 * answers it 16 times as one JSON body, 1 GiB once decompressed.
 */
export function gzipBomb(): { member: Buffer; handler: FakeHandler } {
  const member = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20));
  const handler: FakeHandler = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    let sent = 0;
    const more = () => {
      while (sent < 16) {
        sent += 1;
        if (!res.write(member)) return res.once('drain', more);
      }
      res.end();
    };
    more();
  };
  return { member, handler };
}

const open = new Set<FakeServer>();

/**
 * Starts a fake server answering every request with `handler`. `maxHeaderSize` raises the request
 * head it takes (Node's default, 16 KiB, answers a longer URL 431), for a provider taking URLs of
 * any length.
 */
export async function serve(handler: FakeHandler, opts: { maxHeaderSize?: number } = {}): Promise<FakeServer> {
  const server: Server = createServer({ ...(opts.maxHeaderSize !== undefined && { maxHeaderSize: opts.maxHeaderSize }) }, (req, res) => {
    fake.requests.push({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers });
    res.on('close', () => {
      if (!res.writableEnded) fake.abandoned += 1;
    });
    handler(req, res, fake);
  });
  server.on('connection', () => (fake.connections += 1));
  const fake = await listening(server, () => server.closeAllConnections());
  return fake;
}

/** The test-only certificates of test/fixtures/tls/ (README.md there says how they were made). */
export type FixtureCertificate = 'valid' | 'expired' | 'self-signed' | 'wrong-name';

/** The folder of the TLS fixtures; `ca.pem` in it signed every certificate but the self-signed one. */
export const TLS_FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tls');

/**
 * `serve` over HTTPS, presenting the fixture certificate `certificate` (all for 127.0.0.1 but
 * `wrong-name`); its `url` is `https://127.0.0.1:<port>`. A client trusts `valid`'s only with
 * `ca.pem` (NODE_EXTRA_CA_CERTS in its process).
 */
export async function serveTls(certificate: FixtureCertificate, handler: FakeHandler): Promise<FakeServer> {
  const file = (ext: string) => readFileSync(path.join(TLS_FIXTURES, `${certificate}.${ext}`));
  const server = createHttpsServer({ key: file('key'), cert: file('pem') }, (req, res) => {
    fake.requests.push({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers });
    handler(req, res, fake);
  });
  server.on('secureConnection', () => (fake.connections += 1));
  // A client refusing the certificate ends the handshake: no error of the server's.
  server.on('tlsClientError', () => undefined);
  const fake = await listening(server, () => server.closeAllConnections());
  fake.url = fake.url.replace(/^http:/, 'https:');
  return fake;
}

/**
 * A server on 127.0.0.1 that is no HTTP server: it answers each connection's first request head
 * (up to its blank line) with `answer`, byte for byte, then closes the connection. For answers
 * Node's HTTP server never writes (malformed HTTP, another protocol). `requests` holds the method
 * and URL of each request head it took.
 */
export async function serveRaw(answer: string | Buffer): Promise<FakeServer> {
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    fake.connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      const [method = '', url = ''] = head.slice(0, head.indexOf('\r\n')).split(' ');
      fake.requests.push({ method, url, headers: {} });
      socket.end(answer);
    };
    socket.on('data', onData);
  });
  const fake = await listening(server, () => {
    for (const socket of sockets) socket.destroy();
  });
  return fake;
}

/**
 * Listens with `server` on a free port of 127.0.0.1 and answers its FakeServer, kept among the
 * open ones until closed (`dropConnections` ends the connections it holds, then it closes).
 */
async function listening(server: Server | TcpServer, dropConnections: () => void): Promise<FakeServer> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const fake: FakeServer = {
    url: `http://127.0.0.1:${port}`,
    port,
    requests: [],
    connections: 0,
    abandoned: 0,
    close() {
      open.delete(fake);
      dropConnections();
      return new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
  open.add(fake);
  return fake;
}

/** Closes every fake server still open (for an `afterEach` or `afterAll`). */
export async function closeFakeServers(): Promise<void> {
  await Promise.all([...open].map((fake) => fake.close()));
}

/** One request a receiver took. */
export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** The status it was answered with. */
  answered: number;
  /** When it arrived (Date.now()). */
  at: number;
}

/** A webhook receiver: `url` is its `/hook` address; `received` every request it answered. */
export interface FakeReceiver {
  url: string;
  received: Received[];
  server: FakeServer;
  close(): Promise<void>;
}

/**
 * A webhook receiver that reads each request's body and answers it with the status `answer`
 * gives (from the request and those received before it).
 */
export async function receiver(answer: (request: { headers: IncomingHttpHeaders; body: string }, before: readonly Received[]) => number): Promise<FakeReceiver> {
  const received: Received[] = [];
  const server = await serve((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      const answered = answer({ headers: req.headers, body }, received);
      received.push({ headers: req.headers, body, answered, at: Date.now() });
      res.writeHead(answered).end();
    });
  });
  return { url: `${server.url}/hook`, received, server, close: () => server.close() };
}
