import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Creates a Prometheus registry with Node's default process metrics. Each process (API, worker)
 * owns one registry and serves it on its own `/metrics`.
 */
export function createMetricsRegistry(labels: Record<string, string> = {}): Registry {
  const registry = new Registry();
  registry.setDefaultLabels(labels);
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** Synctide's own metrics (SPEC §8), registered on one registry. */
export function createSyncMetrics(registry: Registry) {
  const registers = [registry];
  return {
    jobsScheduled: new Counter({
      name: 'sync_scheduler_jobs_scheduled_total',
      help: 'Jobs enqueued by connection workflows (scheduled runs and sync-now)',
      labelNames: ['provider_slug', 'tenant_id'] as const,
      registers,
    }),
    jitterSeconds: new Histogram({
      name: 'sync_scheduler_jitter_seconds',
      help: 'Jitter added to scheduled runs',
      buckets: [0, 5, 15, 30, 60, 120, 180, 300, 600, 1800, 3600],
      registers,
    }),
    backlog: new Gauge({
      name: 'sync_scheduler_backlog_gauge',
      help: 'Active connections whose next run is overdue and that have no active job',
      registers,
    }),
    tickDurationMs: new Histogram({
      name: 'sync_scheduler_tick_duration_ms',
      help: 'Duration of reconcile ticks and enqueue transactions in milliseconds',
      labelNames: ['operation'] as const,
      buckets: [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000],
      registers,
    }),
    jobRetries: new Counter({
      name: 'sync_job_retries_total',
      help: 'Retries of sync jobs (failures and rate limits)',
      labelNames: ['connector_id'] as const,
      registers,
    }),
    rateLimited: new Counter({
      name: 'rate_limited_total',
      help: 'Rate-limit responses from providers that made a job wait',
      labelNames: ['provider'] as const,
      registers,
    }),
    rateLimitBackoffSeconds: new Histogram({
      name: 'rate_limited_backoff_seconds',
      help: 'Waits chosen by the rate-limit policy',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900],
      registers,
    }),
  };
}

/** The metric handles activities and routes record to. */
export type SyncMetrics = ReturnType<typeof createSyncMetrics>;
