import { Writable } from 'node:stream';
import { pino } from 'pino';

/** Log lines captured from a test worker, parsed. */
export type LogLines = Record<string, unknown>[];

/** A pino logger that keeps its JSON lines in memory for assertions. */
export function capturingLogger() {
  const lines: LogLines = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}
