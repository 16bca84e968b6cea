import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { singleFlight } from './single-flight';
import { ACTIVE_JOB_STATUSES, BUDGET_WAIT_REASONS, FINISHED_JOB_STATUSES } from '../policy/vocabulary';

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

/**
 * Synctide's own metrics, registered on one registry. `providers` are the provider slugs the
 * process serves (the connector registry's): their series of the provider counters are exported
 * at 0 from the start, so the first job a process counts as failed (or the first reserve wait) is
 * an increase from 0. Prometheus' increase() and rate() ignore a series' first sample, so a
 * series that first appeared at 1 would never count that first event.
 */
export function createSyncMetrics(registry: Registry, providers: readonly string[] = []) {
  const registers = [registry];
  const metrics = {
    jobsScheduled: new Counter({
      name: 'sync_scheduler_jobs_scheduled_total',
      help: 'Jobs enqueued by connection workflows (scheduled runs and sync-now)',
      labelNames: ['provider', 'tenant_id'] as const,
      registers,
    }),
    jitterSeconds: new Histogram({
      name: 'sync_scheduler_jitter_seconds',
      help: 'Jitter added to scheduled runs',
      buckets: [0, 5, 15, 30, 60, 120, 180, 300, 600, 1800, 3600],
      registers,
    }),
    tickDurationSeconds: new Histogram({
      name: 'sync_scheduler_tick_duration_seconds',
      help: 'Duration of reconcile ticks and enqueue transactions in seconds',
      labelNames: ['operation'] as const,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    jobRetries: new Counter({
      name: 'sync_job_retries_total',
      help: 'Retries of sync jobs (failures and rate limits)',
      labelNames: ['provider'] as const,
      registers,
    }),
    webhookDeliveriesDeferred: new Counter({
      name: 'synctide_webhook_deliveries_deferred_total',
      help: 'Webhook delivery attempts deferred without calling the receiver: the worker ran its WEBHOOK_DELIVERY_SLOTS attempts, or the tenant its share of them',
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
      labelNames: ['status', 'provider'] as const,
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
  for (const provider of providers) {
    for (const status of ['queued', ...FINISHED_JOB_STATUSES]) metrics.jobs.inc({ status, provider }, 0);
    metrics.jobRetries.inc({ provider }, 0);
    metrics.rateLimited.inc({ provider }, 0);
    metrics.connectorRequests.inc({ provider }, 0);
    for (const reason of BUDGET_WAIT_REASONS) metrics.connectorBudgetWaits.inc({ provider, reason }, 0);
  }
  return metrics;
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

/** What the latest reconcile tick counted, as it stored it in the database. */
export interface ScheduleCounts {
  /** When the tick counted (the tick's time). */
  counted_at: Date;
  /** Active connections overdue for their scheduled run. */
  overdue: number;
  /** Active connections whose last success is older than twice their interval, by provider (only those with some). */
  stale: Map<string, number>;
}

/** What the state gauges read from the database at scrape time (each one statement). */
export interface StateCounts {
  /** Connections whose circuit-breaker pause is in force now, by provider. */
  openBreakers(): Promise<Map<string, number>>;
  /** Webhook deliveries still pending, and the age in seconds of the oldest (0 when none). */
  webhookBacklog(): Promise<{ pending: number; oldestSeconds: number }>;
  /** The counts the latest reconcile tick stored (one row), null before the first tick. */
  scheduleCounts(): Promise<ScheduleCounts | null>;
  /** Deselections config changes left to the reconcile tick, and the age in seconds of the oldest (0 when none). */
  deselectionBacklog(): Promise<{ pending: number; oldestSeconds: number }>;
}

/**
 * Registers the gauges read from the database at scrape time, like `sync_jobs_queue_depth`, so
 * every process reports the same values whichever process changed the rows or ran the tick:
 * `sync_breakers_open{provider}`, `webhook_deliveries_pending`,
 * `webhook_deliveries_oldest_pending_seconds`, and the latest reconcile tick's stored counts
 * `sync_scheduler_backlog` and `synctide_stale_connections{provider}` (and when that tick counted,
 * `sync_scheduler_last_tick_timestamp_seconds`), and the deselections left
 * to the tick (`synctide_deselections_pending`, `synctide_deselections_oldest_pending_seconds`). Gauges of one statement
 * each have their own collect() sharing it (prom-client collects every metric of a scrape at
 * once), so they come from the same answer in every scrape. Each answer is reused for `cacheMs`
 * and shared by concurrent scrapes; a failed or slow read leaves the previous values.
 */
export function registerStateGauges(registry: Registry, counts: StateCounts, cacheMs = QUEUE_DEPTH_CACHE_MS): void {
  const read = <T>(query: () => Promise<T>) => {
    const shared = singleFlight(query, cacheMs);
    return () => withTimeout(shared(), QUEUE_DEPTH_TIMEOUT_MS).catch(() => null);
  };
  const breakers = read(counts.openBreakers);
  const webhooks = read(counts.webhookBacklog);
  const schedule = read(counts.scheduleCounts);
  const deselections = read(counts.deselectionBacklog);
  const registers = [registry];
  new Gauge({
    name: 'sync_breakers_open',
    help: 'Connections whose circuit breaker holds them paused now, by provider (counted in the database at scrape time)',
    labelNames: ['provider'] as const,
    registers,
    async collect() {
      const open = await breakers();
      if (!open) return;
      this.reset();
      for (const [provider, n] of open) this.set({ provider }, n);
    },
  });
  /** A gauge of one number of a shared answer (the previous value stays when the read failed). */
  const valueGauge = <T>(name: string, help: string, answer: () => Promise<T | null>, value: (a: T) => number) =>
    new Gauge({
      name,
      help,
      registers,
      async collect() {
        const latest = await answer();
        if (latest) this.set(value(latest));
      },
    });
  valueGauge('webhook_deliveries_oldest_pending_seconds', 'Age of the oldest webhook delivery still pending, 0 when none is (read at scrape time)', webhooks, (b) => b.oldestSeconds);
  valueGauge('webhook_deliveries_pending', 'Webhook deliveries not yet delivered nor given up (counted in the database at scrape time)', webhooks, (b) => b.pending);
  valueGauge(
    'synctide_deselections_pending',
    'Units (a resource type, or a repository\'s records of one) a config change stopped selecting whose records the reconcile tick has not all tombstoned yet (counted in the database at scrape time)',
    deselections,
    (b) => b.pending,
  );
  valueGauge('synctide_deselections_oldest_pending_seconds', 'Age of the oldest deselection the reconcile tick has not finished, 0 when none (read at scrape time)', deselections, (b) => b.oldestSeconds);
  valueGauge(
    'sync_scheduler_backlog',
    'Active connections that are overdue: next run passed with no active job, or a queued job more than 30 s past its scheduled time and not waiting behind a running job of its type (counted by the latest reconcile tick, read from the database at scrape time)',
    schedule,
    (latest) => latest.overdue,
  );
  // While no tick ends, the two gauges above keep the last tick's counts: this tells how old they are.
  valueGauge(
    'sync_scheduler_last_tick_timestamp_seconds',
    'When the latest reconcile tick counted sync_scheduler_backlog and synctide_stale_connections, in Unix seconds (read from the database at scrape time; 0 before the first tick): while no tick ends, those gauges keep that tick\'s counts',
    schedule,
    (latest) => latest.counted_at.getTime() / 1000,
  );
  new Gauge({
    name: 'synctide_stale_connections',
    help: 'Active connections whose last successful sync is older than twice their interval, by provider (counted by the latest reconcile tick, read from the database at scrape time)',
    labelNames: ['provider'] as const,
    registers,
    async collect() {
      const latest = await schedule();
      if (!latest) return;
      this.reset();
      for (const [provider, n] of latest.stale) this.set({ provider }, n);
    },
  });
}

/**
 * Registers `sync_scheduler_tick_interval_seconds`: the reconcile tick period this process is
 * configured with (SCHEDULER_TICK_SECONDS, which every process reads from the same environment).
 * A tick ends about once a period, so how old `sync_scheduler_last_tick_timestamp_seconds` may
 * grow before no tick ending means a stall depends on it (SynctideReconcileTickStalled).
 */
export function registerTickIntervalGauge(registry: Registry, tickSeconds: number): Gauge {
  const gauge = new Gauge({
    name: 'sync_scheduler_tick_interval_seconds',
    help: 'The configured reconcile tick period (SCHEDULER_TICK_SECONDS) in seconds: a tick ends about once a period',
    registers: [registry],
  });
  gauge.set(tickSeconds);
  return gauge;
}

/** Seconds buckets of `http_request_duration_seconds`. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * The API's request metrics: `http_requests_total{method,route,status}` and
 * `http_request_duration_seconds{method,route,status}`. `route` is the matched route's template
 * (`/connections/:id`), never the path itself, so ids do not multiply series. Returns the ones
 * already on `registry` when an app was built on it before.
 */
export function httpMetrics(registry: Registry) {
  const labelNames = ['method', 'route', 'status'] as const;
  const requests =
    (registry.getSingleMetric('http_requests_total') as Counter<(typeof labelNames)[number]> | undefined) ??
    new Counter({ name: 'http_requests_total', help: 'HTTP requests the API answered, by method, route template and status', labelNames, registers: [registry] });
  const duration =
    (registry.getSingleMetric('http_request_duration_seconds') as Histogram<(typeof labelNames)[number]> | undefined) ??
    new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time from a request reaching the API to its answer, by method, route template and status',
      labelNames,
      buckets: HTTP_BUCKETS,
      registers: [registry],
    });
  return { requests, duration };
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
  /** The connection's provider slug: `provider` of `sync_jobs_total`. */
  provider: string;
  /** `started_at`, or `created_at` for a job that never started. */
  began_at: Date;
  finished_at: Date;
}

/**
 * Counts a job's end in `sync_jobs_total{status,provider}` and observes its duration in
 * `sync_job_duration_seconds{outcome}`. Call after the ending transaction committed, once per row
 * the UPDATE changed: a retried activity finds the job already ended and changes nothing, so the
 * job is counted exactly once.
 */
export function recordJobEnded(metrics: SyncMetrics, job: EndedJobFacts): void {
  metrics.jobs.inc({ status: job.status, provider: job.provider });
  // Clock skew between a workflow's time and the database's created_at must not go negative.
  const seconds = Math.max(0, (job.finished_at.getTime() - job.began_at.getTime()) / 1000);
  metrics.jobDurationSeconds.observe({ outcome: job.status }, seconds);
}

/** The metric handles activities and routes record to. */
export type SyncMetrics = ReturnType<typeof createSyncMetrics>;

