// Tracing started again in one process (after a shutdown) records Postgres queries again: test
// files share processes, and a file whose tracing found pg no longer instrumented proved nothing
// about the spans it looked for (traces-probes). Real Postgres, an in-memory exporter.
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { startTracing } from '../lib/tracing';
import { useTestDatabase } from './helpers/database';

describe('tracing started again in one process', () => {
  const db = useTestDatabase();

  it('records a query inside a span at every start, not only the first', async () => {
    const traced: boolean[] = [];
    for (let start = 0; start < 3; start += 1) {
      const exporter = new InMemorySpanExporter();
      const tracing = await startTracing({ process: 'test', processor: new SimpleSpanProcessor(exporter) });
      try {
        await trace.getTracer('test').startActiveSpan('work', async (span) => {
          await db.pool.query('select 1');
          span.end();
        });
        traced.push(exporter.getFinishedSpans().some((s) => s.name.startsWith('pg.query')));
      } finally {
        await tracing.shutdown();
      }
    }
    expect(traced).toEqual([true, true, true]);
  });
});
