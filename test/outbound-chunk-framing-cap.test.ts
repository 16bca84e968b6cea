// An answer's body is held to its cap on the connection, its chunked framing included, not only in
// the bytes the framing carries: a chunk size line may go on without end (leading zeros), and a
// chunk may carry 16 KiB of extensions for each byte of body, read for as long as the server sent
// them, up to the deadline: a provider's GET and a webhook receiver's answer alike. Against a real
// server on 127.0.0.1.
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { getBounded, postBounded, ResponseTooLarge } from '../lib/outbound';

const servers: net.Server[] = [];
const sockets = new Set<net.Socket>();
afterEach(async () => {
  // Kept-alive connections included: closing a server waits for its connections.
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

const CAP = 64 * 1024;
/** What the server sends of framing, in all, when nothing stops it: far past the cap. */
const SENT = 64 * 1024 * 1024;

/** Each way of sending framing that carries (next to) no body: its name and the unit it repeats. */
const framings: [string, Buffer][] = [
  // One chunk size line of endless leading zeros (it ends `1\r\nx\r\n` once all was sent).
  ['a chunk size of endless leading zeros', Buffer.alloc(64 * 1024, '0')],
  // Chunks of one byte, each with 16,000 bytes of chunk extensions (under Node's limit of a chunk's).
  ['one-byte chunks with 16,000 bytes of extensions each', Buffer.from(`1;a=${'b'.repeat(16_000)}\r\nx\r\n`.repeat(4))],
];

/**
 * A server answering 200 chunked, then `unit` until SENT bytes of it were sent (then the body's
 * end) or the connection closed: which came first, and what it sent.
 */
async function framingServer(unit: Buffer): Promise<{ url: string; outcome: Promise<string>; sent: () => number }> {
  let sent = 0;
  let settle: (how: string) => void = () => undefined;
  const outcome = new Promise<string>((resolve) => (settle = resolve));
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => settle('connection closed'));
    socket.once('data', () => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      const pump = () => {
        while (sent < SENT && !socket.destroyed) {
          sent += unit.length;
          if (!socket.write(unit)) return socket.once('drain', pump);
        }
        if (sent >= SENT && !socket.destroyed) {
          settle('sent it all');
          socket.write('1\r\nx\r\n0\r\n\r\n');
        }
      };
      pump();
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, outcome, sent: () => sent };
}

describe('an answer whose chunked framing goes on while carrying next to no body', () => {
  for (const [form, unit] of framings) {
    it(`${form}: a GET fails as too large once the body's bytes on the connection pass its bound, reading nowhere near the ${SENT} bytes sent`, async () => {
      const server = await framingServer(unit);
      const answer = getBounded(server.url, {}, { timeoutMs: 60_000, maxBodyBytes: CAP, allowPrivate: true });
      await expect(answer).rejects.toThrow(ResponseTooLarge);
      await expect(answer).rejects.toThrow(/response exceeds \d+ bytes on the connection/);
      expect(await server.outcome).toBe('connection closed');
      expect(server.sent()).toBeLessThan(SENT);
    }, 60_000);

    it(`${form}: a webhook receiver's answer is its status, its connection closed once the body's bytes on the connection pass its bound`, async () => {
      const server = await framingServer(unit);
      await expect(postBounded(server.url, '{}', {}, { timeoutMs: 60_000, maxResponseBytes: CAP, allowPrivate: true })).resolves.toEqual({ status: 200 });
      expect(await server.outcome).toBe('connection closed');
      expect(server.sent()).toBeLessThan(SENT);
    }, 60_000);
  }

  it('a body of one-byte chunks just within the cap is read whole: plain chunked framing adds five bytes to each', async () => {
    const body = Buffer.alloc(CAP, 'y');
    const server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n');
        socket.end(Buffer.concat([Buffer.from('1\r\ny\r\n'.repeat(CAP)), Buffer.from('0\r\n\r\n')]));
      });
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const answer = await getBounded(url, {}, { timeoutMs: 60_000, maxBodyBytes: CAP, allowPrivate: true });
    expect(answer.body.equals(body)).toBe(true);
  }, 60_000);
});
