// A compressed answer whose compressed stream ended while its response goes on (bytes after the
// gzip, deflate or brotli stream's end, never decoded: zeros here) is answered with what was
// decoded, and its connection closed: the bytes after were read and dropped without bound, past
// the size cap and the deadline, for as long as the server sent them. Against a real server on
// 127.0.0.1.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { getBounded } from '../lib/outbound';

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

const CAP = 1024 * 1024;
/** What the server sends after the compressed stream: far past the cap. */
const AFTER = 64 * CAP;

/** Each form of a coding: its name, the coding it is sent as, and how it is made. */
const compressed: [string, string, (body: Buffer) => Buffer][] = [
  ['gzip', 'gzip', zlib.gzipSync],
  ['deflate', 'deflate', zlib.deflateSync],
  // Raw DEFLATE data under the deflate coding, as some servers send it.
  ['deflate (raw)', 'deflate', zlib.deflateRawSync],
  ['br', 'br', zlib.brotliCompressSync],
];

describe('a compressed answer that goes on after its compressed stream', () => {
  for (const [form, coding, compress] of compressed) {
    it(`${form}: answers what was decoded and closes the connection, reading nowhere near the ${AFTER} bytes sent after`, async () => {
      let sent = 0;
      let settle: (how: string) => void = () => undefined;
      const outcome = new Promise<string>((resolve) => (settle = resolve));
      const server = http.createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': coding });
        res.write(compress(Buffer.from('[1,2,3]')));
        const zeros = Buffer.alloc(64 * 1024);
        const pump = () => {
          while (sent < AFTER && !res.destroyed) {
            sent += zeros.length;
            if (!res.write(zeros)) return res.once('drain', pump);
          }
          if (sent >= AFTER) settle('sent it all');
        };
        res.on('close', () => settle('connection closed'));
        pump();
      });
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      const answer = await getBounded(`http://127.0.0.1:${port}/`, {}, { timeoutMs: 60_000, maxBodyBytes: CAP, allowPrivate: true });
      expect(answer.body.toString()).toBe('[1,2,3]');
      expect(await outcome).toBe('connection closed');
      expect(sent).toBeLessThan(AFTER);
    }, 60_000);
  }
});
