import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { singleFlight } from './single-flight';
import { ACTIVE_JOB_STATUSES } from '../policy/vocabulary';

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

/** Synctide's own metrics, registered on one registry. */
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
    staleConnections: new Gauge({
      name: 'synctide_stale_connections',
      help: 'Active connections whose last successful sync is older than twice their interval, by provider',
      labelNames: ['provider'] as const,
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
    connectorRequests: new Counter({
      name: 'connector_requests_total',
      help: 'Requests connectors sent to providers through the shared rate budget',
      labelNames: ['provider'] as const,
      registers,
    }),
    connectorBudgetWaits: new Counter({
      name: 'connector_budget_waits_total',
      help: "Requests the shared rate budget held back: 'reserve' (waiting for the provider's reset, durably) or 'ceiling' (the configured requests per second/minute)",
      labelNames: ['provider', 'reason'] as const,
      registers,
    }),
    connectorBudgetRemaining: new Gauge({
      name: 'connector_budget_remaining',
      help: 'Requests left before the reset, as the last provider answer of any credential of this provider stated it (no per-credential label)',
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

/** A scrape waits at most this long for the queue-depth query before reporting the last values. */
const QUEUE_DEPTH_TIMEOUT_MS = 2000;

/** Counts the active jobs by status (one grouped query). */
export type CountActiveJobs = () => Promise<Map<string, number>>;

/** How long a queue-depth count is reused by later scrapes. */
export const QUEUE_DEPTH_CACHE_MS = 5000;

/**
 * Registers the gauge `sync_jobs_queue_depth{status}`: the number of queued, running and retrying
 * jobs, counted by `count` in the database, so it is right whichever process changed the jobs.
 * A count is reused for `cacheMs` and concurrent scrapes share one count, so scraping `/metrics`
 * often costs at most one query per period. Call once per registry (API and worker processes each
 * own one). A failed or slow count leaves the previous values: the rest of `/metrics` must still
 * be served when the database is down.
 */
export function registerQueueDepthGauge(registry: Registry, countNow: CountActiveJobs, cacheMs = QUEUE_DEPTH_CACHE_MS): Gauge<'status'> {
  const count = singleFlight(countNow, cacheMs);
  return new Gauge({
    name: 'sync_jobs_queue_depth',
    help: 'Sync jobs not yet finished, by status (counted in the database at scrape time)',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const counts = await withTimeout(count(), QUEUE_DEPTH_TIMEOUT_MS).catch(() => null);
      if (!counts) return;
      for (const status of ACTIVE_JOB_STATUSES) this.set({ status }, counts.get(status) ?? 0);
    },
  });
}

/** `work`'s value, or null when it takes longer than `ms`; a late rejection is swallowed. */
async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
  });
  work.catch(() => undefined);
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A job that just reached a final status, with what its metrics need. */
export interface EndedJobFacts {
  status: string;
  /** The connection's provider slug: `connector_id` of `sync_jobs_total`. */
  provider: string;
  /** `started_at`, or `created_at` for a job that never started. */
  began_at: Date;
  finished_at: Date;
}

/**
 * Counts a job's end in `sync_jobs_total{status,connector_id}` and observes its duration in
 * `sync_job_duration_seconds{outcome}`. Call after the ending transaction committed, once per row
 * the UPDATE changed: a retried activity finds the job already ended and changes nothing, so the
 * job is counted exactly once.
 */
export function recordJobEnded(metrics: SyncMetrics, job: EndedJobFacts): void {
  metrics.jobs.inc({ status: job.status, connector_id: job.provider });
  // Clock skew between a workflow's time and the database's created_at must not go negative.
  const seconds = Math.max(0, (job.finished_at.getTime() - job.began_at.getTime()) / 1000);
  metrics.jobDurationSeconds.observe({ outcome: job.status }, seconds);
}

/** The metric handles activities and routes record to. */
export type SyncMetrics = ReturnType<typeof createSyncMetrics>;

