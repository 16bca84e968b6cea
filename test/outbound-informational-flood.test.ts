// The bytes an answer takes on the connection are bounded from its first byte: informational (1xx)
// answers before the final one, each a header section of up to 16 KiB (Node's limit), may come
// without end, and were read for as long as the server sent them, up to the deadline: a provider's
// GET and a webhook receiver's answer alike. A few of them, as servers send (103 Early Hints), are
// read as before. Against a real server on 127.0.0.1.
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
/** What the server sends of informational answers, in all, when nothing stops it: far past the cap. */
const SENT = 64 * 1024 * 1024;
/** One informational answer with a header section of about 15 KB. */
const EARLY_HINTS = Buffer.from(`HTTP/1.1 103 Early Hints\r\nLink: </${'a'.repeat(15_000)}>; rel=preload\r\n\r\n`);
const FINAL = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}';

/**
 * A server answering 103s until `total` bytes of them were sent (then the final 200) or the
 * connection closed: which came first, and what it sent.
 */
async function hintingServer(total: number): Promise<{ url: string; outcome: Promise<string>; sent: () => number }> {
  let sent = 0;
  let settle: (how: string) => void = () => undefined;
  const outcome = new Promise<string>((resolve) => (settle = resolve));
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => settle('connection closed'));
    socket.once('data', () => {
      const pump = () => {
        while (sent < total && !socket.destroyed) {
          sent += EARLY_HINTS.length;
          if (!socket.write(EARLY_HINTS)) return socket.once('drain', pump);
        }
        if (sent >= total && !socket.destroyed) {
          settle('sent it all');
          socket.end(FINAL);
        }
      };
      pump();
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, outcome, sent: () => sent };
}

describe('informational answers without end before the final one', () => {
  it(`a GET fails as too large once the answer's bytes on the connection pass its bound, reading nowhere near the ${SENT} bytes sent`, async () => {
    const server = await hintingServer(SENT);
    const answer = getBounded(server.url, {}, { timeoutMs: 60_000, maxBodyBytes: CAP, allowPrivate: true });
    await expect(answer).rejects.toThrow(ResponseTooLarge);
    await expect(answer).rejects.toThrow(/response exceeds \d+ bytes on the connection/);
    expect(await server.outcome).toBe('connection closed');
    expect(server.sent()).toBeLessThan(SENT);
  }, 60_000);

  it("a webhook receiver sending them has not answered: the delivery fails as too large once the answer's bytes on the connection pass its bound", async () => {
    const server = await hintingServer(SENT);
    await expect(postBounded(server.url, '{}', {}, { timeoutMs: 60_000, maxResponseBytes: CAP, allowPrivate: true })).rejects.toThrow(
      /response exceeds \d+ bytes on the connection/,
    );
    expect(await server.outcome).toBe('connection closed');
    expect(server.sent()).toBeLessThan(SENT);
  }, 60_000);

  it('a few of them (three 103s of 15 KB) before the final answer are read, and the answer is what it says', async () => {
    const get = await hintingServer(3 * EARLY_HINTS.length);
    const answer = await getBounded(get.url, {}, { timeoutMs: 60_000, maxBodyBytes: 2, allowPrivate: true });
    expect([answer.status, answer.body.toString()]).toEqual([200, '{}']);
    const post = await hintingServer(3 * EARLY_HINTS.length);
    await expect(postBounded(post.url, '{}', {}, { timeoutMs: 60_000, maxResponseBytes: 2, allowPrivate: true })).resolves.toEqual({ status: 200 });
  }, 60_000);
});
