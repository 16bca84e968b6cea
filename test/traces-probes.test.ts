// Probes and metrics scrapes make no span: `/healthz`, `/readyz` and `/metrics` of the API are
// called every few seconds by the orchestrator and Prometheus, and a trace of each (with the
// scrape's database reads under it) would be most of what a process exports. A request of any
// other route is traced. The real API app, with the gauges a process reads from Postgres at scrape
// time, on a real database; spans land in an in-memory exporter.
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { countActiveJobsByStatus } from '../db/models/jobs';
import { databaseStateCounts } from '../infra/boot';
import { createSyncMetrics, registerQueueDepthGauge, registerStateGauges } from '../lib/metrics';
import { startTracing } from '../lib/tracing';
import { apiAppWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';

// Started before the API app is built (it takes its request-span middleware from it).
const exporter = new InMemorySpanExporter();
const tracing = await startTracing({ process: 'test', processor: new SimpleSpanProcessor(exporter) });

describe('request spans of probes and scrapes', () => {
  const db = useTestDatabase();
  afterAll(async () => {
    await tracing.shutdown();
  });

  it('GET /healthz, /readyz and /metrics make no span, nor do their queries; another route is traced', async () => {
    // The API process's registry: its gauges read Postgres at scrape time (infra/boot.ts).
    const registry = new Registry();
    registerQueueDepthGauge(registry, () => countActiveJobsByStatus(db.pool), 0);
    registerStateGauges(registry, databaseStateCounts(db.pool), 0);
    const app = apiAppWithoutTemporal(db.pool, 'traces-probes', { registry, metrics: createSyncMetrics(registry) });
    const get = (path: string) => app.request(`http://127.0.0.1${path}`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    exporter.reset();

    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^sync_jobs_queue_depth\{status="queued"\} 0$/m);
    expect((await get('/healthz')).status).toBe(200);
    // No Temporal behind this app: 503, after its Postgres check ran.
    expect((await get('/readyz')).status).toBe(503);
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual([]);

    expect((await get('/connections')).status).toBe(200);
    const names = exporter.getFinishedSpans().map((s) => s.name);
    expect(names).toContain('GET /connections');
    expect(names.some((name) => name.startsWith('pg.query'))).toBe(true);
  });
});
