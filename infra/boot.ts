// The one boot of every Synctide process (`npm start`, `npm run api`, `npm run worker`): logger
// and signal handling, the SDK runtime, Postgres (DATABASE_URL or the embedded server), Temporal
// (TEMPORAL_ADDRESS or the CLI dev server), migrations, the pool, the one Temporal client and the
// metrics registry. Each entry point then adds only what is its own.
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { countOpenBreakersByProvider } from '../db/models/breaker';
import { findScheduleCounts } from '../db/models/connections';
import { countActiveJobsByStatus } from '../db/models/jobs';
import { findWebhookBacklog } from '../db/models/webhooks';
import { findDeselectionBacklog } from '../db/models/deselections';
import { migrate } from '../db/migrate';
import { createPool, type Pool, type PoolLimits } from '../db/pool';
import { shownValue, temporalSecurity, type Config, type TemporalSecurity } from '../lib/config';
import { createLogger, type Logger } from '../lib/logger';
import { createMetricsRegistry, createSyncMetrics, registerQueueDepthGauge, registerStateGauges, registerTickIntervalGauge, type StateCounts, type SyncMetrics } from '../lib/metrics';
import { Shutdown } from '../lib/shutdown';
import { startTracing } from '../lib/tracing';
import type { Registry } from 'prom-client';
import { openDatabase, type Database } from './database';
import { installSdkMetrics, type SdkMetrics } from './sdk-runtime';
import { resolveTemporalBinary } from './temporal-binaries';
import { connectTemporal } from './temporal-connection';
import { startDevServer, type DevServer } from './temporal-dev-server';

/** A started process: its servers, clients and observability, each registered for shutdown. */
export interface Process {
  config: Config;
  logger: Logger;
  shutdown: Shutdown;
  database: Database;
  /** The pool of the process's own role (BootOptions.pool); it also serves readiness and metrics. */
  pool: Pool;
  /** The role whose limits `pool` has. */
  poolRole: PoolRole;
  /** Opens another pool with the limits of `role` (closed at shutdown): `npm start`'s worker pool, a worker's immediate-sync pool. */
  openPool(role: PoolRole): Pool;
  temporal: Client;
  temporalAddress: string;
  /** TLS and API key for TEMPORAL_ADDRESS (empty for the dev server `npm start` runs). */
  temporalSecurity: TemporalSecurity;
  /** The dev server `npm start` runs when TEMPORAL_ADDRESS is unset. */
  devServer?: DevServer;
  registry: Registry;
  metrics: SyncMetrics;
  /** The Temporal SDK's exporter, when the process runs a worker. */
  sdkMetrics?: SdkMetrics;
}

/** What differs between processes at boot. */
export interface BootOptions {
  /** `process` label of logs and metrics: start, api, worker. */
  name: string;
  /** Install the SDK runtime with its Prometheus exporter (processes that run a worker). */
  sdkRuntime: boolean;
  /** Whose limits the process's pool gets: `api` (short statements) or `worker`. */
  pool: PoolRole;
  /** The provider slugs the process serves (the connector registry's): their counter series are exported from 0. */
  providers: readonly string[];
}

/**
 * Which part of a process a pool serves: API requests and probes, the worker's activities, the
 * worker's local activities (the bookkeeping its workflow tasks wait for, apart from the paging
 * activities that may hold every connection of theirs), or the worker's immediate syncs (apart
 * from the scheduled work, for the same reason).
 */
export type PoolRole = 'api' | 'worker' | 'local' | 'immediate';

/**
 * Connections of a pool of `role`: DATABASE_POOL_MAX, except the immediate syncs' pool, which has
 * two for each immediate sync a worker runs at once (IMMEDIATE_SYNC_SLOTS): a page's write and a
 * rate-budget update may overlap; and the local activities' pool, which has half of
 * DATABASE_POOL_MAX (at least 2): each of its statements is one short bookkeeping transaction.
 */
export function poolSize(config: Config, role: PoolRole): number {
  if (role === 'immediate') return 2 * config.IMMEDIATE_SYNC_SLOTS;
  if (role === 'local') return Math.max(2, Math.ceil(config.DATABASE_POOL_MAX / 2));
  return config.DATABASE_POOL_MAX;
}

/**
 * What an idle worker process takes before it caches a workflow run, and what a cached run may
 * add (both rounded up from BENCHMARKS.md's figures).
 */
const IDLE_WORKER_BYTES = 256 * 2 ** 20;
const BYTES_PER_CACHED_RUN = 2 * 2 ** 20;
/**
 * The cache's bounds: above the 40 workflow tasks a worker runs at once (a run evicted while its
 * task waits is replayed), and the size without a memory limit.
 */
const MIN_CACHED_RUNS = 50;
const MAX_CACHED_RUNS = 250;

/**
 * Workflow runs a worker keeps cached: WORKER_MAX_CACHED_WORKFLOWS when set; otherwise sized to
 * the process's memory limit (a container's cgroup limit, as Node reads it), one run for each
 * 2 MiB above an idle worker's 256 MiB, within 50–250; 250 without a limit. So a worker in a
 * 300 MiB container caches 50 runs and one in 768 MiB (the Helm chart's) 250.
 */
export function workflowCacheSize(config: Pick<Config, 'WORKER_MAX_CACHED_WORKFLOWS'>, memoryLimitBytes: number | undefined = process.constrainedMemory()): number {
  if (config.WORKER_MAX_CACHED_WORKFLOWS !== undefined) return config.WORKER_MAX_CACHED_WORKFLOWS;
  // Node answers 0 or 2^64 when nothing limits the process.
  if (!memoryLimitBytes || memoryLimitBytes >= Number.MAX_SAFE_INTEGER) return MAX_CACHED_RUNS;
  const runs = Math.floor((memoryLimitBytes - IDLE_WORKER_BYTES) / BYTES_PER_CACHED_RUN);
  return Math.min(MAX_CACHED_RUNS, Math.max(MIN_CACHED_RUNS, runs));
}

/**
 * The server-side limits of a pool of `role`: API requests get a short statement timeout, the
 * worker and its immediate syncs a long one (its full-sync deletions and retention clean-ups are
 * its longest statements); all end sessions left idle inside a transaction. 0 in the
 * configuration turns a limit off.
 */
export function poolLimits(config: Config, role: PoolRole): PoolLimits {
  const statementSeconds = role === 'api' ? config.API_STATEMENT_TIMEOUT_SECONDS : config.WORKER_STATEMENT_TIMEOUT_SECONDS;
  return {
    statementTimeoutMs: statementSeconds * 1000,
    idleInTransactionTimeoutMs: config.IDLE_IN_TRANSACTION_TIMEOUT_SECONDS * 1000,
    applicationName: `synctide-${role}`,
  };
}

/** What the state gauges read from the database, each one statement on `pool`. */
export function databaseStateCounts(pool: Pool): StateCounts {
  return {
    openBreakers: () => countOpenBreakersByProvider(pool),
    webhookBacklog: () => findWebhookBacklog(pool),
    scheduleCounts: () => findScheduleCounts(pool),
    deselectionBacklog: () => findDeselectionBacklog(pool),
  };
}

/**
 * Boots a process and runs `main` with it. Any failure logs `start failed` and stops everything
 * already started, in reverse order, exiting 1; SIGINT/SIGTERM stop it and exit 0.
 */
export function runProcess(config: Config, options: BootOptions, main: (proc: Process) => Promise<void>): void {
  const logger = createLogger(config.LOG_LEVEL, { process: options.name });
  const shutdown = new Shutdown(logger).onSignals();
  // Before the Temporal client and the worker exist: they take their interceptors from it.
  const traced = async () => {
    if (!config.OTEL_EXPORTER_OTLP_ENDPOINT) return;
    if (config.OTEL_SDK_DISABLED) {
      logger.info('tracing is off: OTEL_SDK_DISABLED is true');
      return;
    }
    const tracing = await startTracing({ process: options.name });
    // Registered first, so it runs last: the spans of the shutdown itself are exported too.
    shutdown.add('tracing', () => tracing.shutdown());
    // Its password (a `user:password@` URL) masked, as a config error shows it.
    logger.info({ endpoint: shownValue('OTEL_EXPORTER_OTLP_ENDPOINT', config.OTEL_EXPORTER_OTLP_ENDPOINT) }, 'traces are exported over OTLP');
  };
  traced()
    .then(() => boot(config, options, logger, shutdown))
    .then(main)
    .catch((err: Error) => {
      // Stopped while it started (a signal): its servers stopped under it, which is no failure.
      if (shutdown.stopping) {
        logger.info({ err }, 'start cut short by the shutdown');
        return;
      }
      logger.error({ err }, 'start failed');
      process.stderr.write(`start failed: ${err.message}\n`);
      void shutdown.run('start failed', 1);
    });
}

async function boot(config: Config, options: BootOptions, logger: Logger, shutdown: Shutdown): Promise<Process> {
  // Before any NativeConnection: the SDK's Runtime is installed once per process.
  const sdkMetrics = options.sdkRuntime ? await installSdkMetrics({ globalTags: { process: options.name }, logger }) : undefined;
  // Servers this process starts are stopped from the moment they are spawned: a signal while one
  // starts stops it too.
  const database = await openDatabase(config, logger, (stop) => shutdown.add('postgres', stop));

  let temporalAddress = config.TEMPORAL_ADDRESS;
  let devServer: DevServer | undefined;
  if (!temporalAddress) {
    const cli = await resolveTemporalBinary('cli', { allowSdkDownload: false });
    devServer = await startDevServer({
      cliPath: cli.path!,
      dbFilename: path.join(config.DATA_DIR, 'temporal.db'),
      port: config.TEMPORAL_DEV_PORT,
      uiPort: config.TEMPORAL_UI_PORT,
      namespace: config.TEMPORAL_NAMESPACE,
      onLog: (line) => logger.debug({ component: 'temporal' }, line),
      onSpawn: (stop) => shutdown.add('temporal-dev-server', stop),
    });
    temporalAddress = devServer.address;
  }

  if (config.MIGRATE_ON_START) {
    // The owner role when DATABASE_MIGRATION_URL is set; the runtime role may lack DDL rights.
    const applied = await migrate(config.DATABASE_MIGRATION_URL ?? database.url, (msg) => logger.debug({ component: 'migrate' }, msg));
    logger.info({ applied }, 'database ready');
  }
  const openPool = (role: PoolRole): Pool => {
    const opened = createPool(database.url, poolSize(config, role), poolLimits(config, role));
    shutdown.add(`${role}-pool`, () => opened.end());
    return opened;
  };
  const pool = openPool(options.pool);
  // The dev server `npm start` runs listens on loopback without TLS; TEMPORAL_ADDRESS gets the configured TLS and key.
  const security = config.TEMPORAL_ADDRESS ? temporalSecurity(config) : {};
  // Retried (bounded, logged) while the server or the namespace is not there yet: compose and
  // Kubernetes start Synctide beside Temporal's schema and namespace jobs.
  const temporal = await connectTemporal(temporalAddress, config.TEMPORAL_NAMESPACE, security, { timeoutMs: config.TEMPORAL_STARTUP_WAIT_SECONDS * 1000, logger });
  shutdown.add('temporal-client', () => temporal.connection.close());

  const registry = createMetricsRegistry({ process: options.name });
  registerQueueDepthGauge(registry, () => countActiveJobsByStatus(pool));
  registerStateGauges(registry, databaseStateCounts(pool));
  registerTickIntervalGauge(registry, config.SCHEDULER_TICK_SECONDS);
  const metrics = createSyncMetrics(registry, options.providers);
  return {
    config, logger, shutdown, database, pool, poolRole: options.pool, openPool, temporal, temporalAddress, temporalSecurity: security, devServer, registry, metrics, sdkMetrics,
  };
}
