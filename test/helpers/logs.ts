import { Writable } from 'node:stream';
import { pino } from 'pino';
import { LINE_SHAPE } from '../../lib/logger';

/** Log lines captured from a test worker, parsed. */
export type LogLines = Record<string, unknown>[];

/** A pino logger that keeps its JSON lines in memory for assertions, shaped as the process logger's. */
export function capturingLogger() {
  const lines: LogLines = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ ...LINE_SHAPE, level: 'debug' }, stream), lines };
}
