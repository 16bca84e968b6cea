import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Pool } from '../db/pool';

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
    jobs: new Counter({
      name: 'sync_jobs_total',
      help: 'Sync jobs reaching a status: queued when enqueued, completed/failed/cancelled when they end',
      labelNames: ['status', 'connector_id'] as const,
      registers,
    }),
    jobDurationSeconds: new Histogram({
      name: 'sync_job_duration_seconds',
      help: 'Duration of finished sync jobs, from their first start (or creation, if never started) to the end',
      labelNames: ['outcome'] as const,
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600],
      registers,
    }),
  };
}

/** The statuses of a job that has not finished, each reported by `sync_jobs_queue_depth`. */
export const ACTIVE_JOB_STATUSES = ['queued', 'running', 'retrying'] as const;

/** A scrape waits at most this long for the queue-depth query before reporting the last values. */
const QUEUE_DEPTH_TIMEOUT_MS = 2000;

/**
 * Registers the gauge `sync_jobs_queue_depth{status}`: the number of queued, running and retrying
 * jobs, read from the database at each scrape, so it is right whichever process changed the jobs.
 * Call once per registry (API and worker processes each own one). A failed or slow query leaves
 * the previous values: the rest of `/metrics` must still be served when the database is down.
 */
export function registerQueueDepthGauge(registry: Registry, pool: Pick<Pool, 'query'>): Gauge<'status'> {
  return new Gauge({
    name: 'sync_jobs_queue_depth',
    help: 'Sync jobs not yet finished, by status (counted in the database at scrape time)',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const counts = await countActiveJobs(pool).catch(() => null);
      if (!counts) return;
      for (const status of ACTIVE_JOB_STATUSES) this.set({ status }, counts.get(status) ?? 0);
    },
  });
}

/** One grouped count of the active jobs; null when it takes longer than the scrape can wait. */
async function countActiveJobs(pool: Pick<Pool, 'query'>): Promise<Map<string, number> | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), QUEUE_DEPTH_TIMEOUT_MS);
  });
  const query = pool
    .query<{ status: string; n: number }>(
      'select status, count(*)::int as n from sync_jobs where status = any($1::text[]) group by status',
      [ACTIVE_JOB_STATUSES],
    )
    .then(({ rows }) => new Map(rows.map((r) => [r.status, r.n])));
  // A query that fails after the timeout won must not become an unhandled rejection.
  query.catch(() => undefined);
  try {
    return await Promise.race([query, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The metric handles activities and routes record to. */
export type SyncMetrics = ReturnType<typeof createSyncMetrics>;
