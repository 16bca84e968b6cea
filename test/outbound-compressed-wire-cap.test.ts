// A compressed answer is held to its cap as sent, not only once decoded: a gzip, deflate or brotli
// stream may go on and on while decoding to nothing (empty gzip members, empty stored DEFLATE
// blocks, brotli metadata blocks), and was read, and decompressed, for as long as the server sent
// it, up to the deadline. Against a real server on 127.0.0.1.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { getBounded, ResponseTooLarge } from '../lib/outbound';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

const CAP = 1024 * 1024;
/** What the server sends, in all, when nothing stops it: far past the cap. */
const SENT = 64 * CAP;

const hex = (text: string) => Buffer.from(text, 'hex');
/** `unit` repeated to about 64 KiB. */
const filler = (unit: Buffer) => Buffer.concat(Array<Buffer>(Math.ceil((64 * 1024) / unit.length)).fill(unit));

/**
 * Each coding's stream that decodes to no byte at all however long it goes on: its start, the unit
 * it repeats, and its end.
 */
const empty: [string, string, Buffer, Buffer, Buffer][] = [
  // Empty gzip members, one after another.
  ['gzip', 'gzip', Buffer.alloc(0), zlib.gzipSync(Buffer.alloc(0)), Buffer.alloc(0)],
  // A zlib header, then empty stored blocks that are not the last.
  ['deflate', 'deflate', hex('789c'), hex('000000ffff'), Buffer.alloc(0)],
  // The same blocks as raw DEFLATE data.
  ['deflate (raw)', 'deflate', Buffer.alloc(0), hex('000000ffff'), Buffer.alloc(0)],
  // A brotli stream header, then empty metadata blocks, then an empty last block.
  ['br', 'br', hex('0c'), hex('06'), hex('03')],
];

describe('a compressed answer that goes on while decoding to nothing', () => {
  for (const [form, coding, start, unit, end] of empty) {
    it(`${form}: fails as too large once its bytes as sent pass the cap, reading nowhere near the ${SENT} bytes sent`, async () => {
      let sent = 0;
      let settle: (how: string) => void = () => undefined;
      const outcome = new Promise<string>((resolve) => (settle = resolve));
      const chunk = filler(unit);
      const server = http.createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': coding });
        res.write(start);
        const pump = () => {
          while (sent < SENT && !res.destroyed) {
            sent += chunk.length;
            if (!res.write(chunk)) return res.once('drain', pump);
          }
          if (sent >= SENT) {
            settle('sent it all');
            res.end(end);
          }
        };
        res.on('close', () => settle('connection closed'));
        pump();
      });
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      const answer = getBounded(`http://127.0.0.1:${port}/`, {}, { timeoutMs: 60_000, maxBodyBytes: CAP, allowPrivate: true });
      await expect(answer).rejects.toThrow(ResponseTooLarge);
      await expect(answer).rejects.toThrow(/compressed response body exceeds \d+ bytes as sent/);
      expect(await outcome).toBe('connection closed');
      expect(sent).toBeLessThan(SENT);
    }, 60_000);
  }

  it('a compressed body of incompressible bytes just within the cap is read whole: compression adds a little to it as sent', async () => {
    const body = Buffer.alloc(CAP);
    // Bytes no coding shrinks (a xorshift sequence): sent compressed, they take a little more than the cap.
    let x = 2463534242;
    for (let i = 0; i < body.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      body[i] = x & 0xff;
    }
    for (const [coding, compressed] of [['gzip', zlib.gzipSync(body, { level: 9 })], ['br', zlib.brotliCompressSync(body)]] as const) {
      expect(compressed.length, coding).toBeGreaterThan(CAP);
      const server = http.createServer((_req, res) => res.writeHead(200, { 'content-encoding': coding }).end(compressed));
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      const answer = await getBounded(`http://127.0.0.1:${port}/`, {}, { timeoutMs: 60_000, maxBodyBytes: CAP, allowPrivate: true });
      expect(answer.body.equals(body), coding).toBe(true);
    }
  }, 60_000);
});
