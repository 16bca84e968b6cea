// The one boot of every Synctide process (`npm start`, `npm run api`, `npm run worker`): logger
// and signal handling, the SDK runtime, Postgres (DATABASE_URL or the embedded server), Temporal
// (TEMPORAL_ADDRESS or the CLI dev server), migrations, the pool, the one Temporal client and the
// metrics registry. Each entry point then adds only what is its own.
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { countActiveJobsByStatus } from '../db/models/jobs';
import { migrate } from '../db/migrate';
import { createPool, type Pool } from '../db/pool';
import type { Config } from '../lib/config';
import { createLogger, type Logger } from '../lib/logger';
import { createMetricsRegistry, createSyncMetrics, registerQueueDepthGauge, type SyncMetrics } from '../lib/metrics';
import { Shutdown } from '../lib/shutdown';
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
  pool: Pool;
  temporal: Client;
  temporalAddress: string;
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
}

/**
 * Boots a process and runs `main` with it. Any failure logs `start failed` and stops everything
 * already started, in reverse order, exiting 1; SIGINT/SIGTERM stop it and exit 0.
 */
export function runProcess(config: Config, options: BootOptions, main: (proc: Process) => Promise<void>): void {
  const logger = createLogger(config.LOG_LEVEL, { process: options.name });
  const shutdown = new Shutdown(logger).onSignals();
  boot(config, options, logger, shutdown)
    .then(main)
    .catch((err: Error) => {
      logger.error({ err }, 'start failed');
      process.stderr.write(`start failed: ${err.message}\n`);
      void shutdown.run('start failed', 1);
    });
}

async function boot(config: Config, options: BootOptions, logger: Logger, shutdown: Shutdown): Promise<Process> {
  // Before any NativeConnection: the SDK's Runtime is installed once per process.
  const sdkMetrics = options.sdkRuntime ? await installSdkMetrics({ globalTags: { process: options.name }, logger }) : undefined;
  const database = await openDatabase(config, logger);
  if (database.kind === 'embedded') shutdown.add('postgres', () => database.stop());

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
    });
    const started = devServer;
    shutdown.add('temporal-dev-server', () => started.stop());
    temporalAddress = devServer.address;
  }

  const applied = await migrate(database.url, (msg) => logger.debug({ component: 'migrate' }, msg));
  logger.info({ applied }, 'database ready');
  const pool = createPool(database.url, config.DATABASE_POOL_MAX);
  shutdown.add('pool', () => pool.end());
  const temporal = await connectTemporal(temporalAddress, config.TEMPORAL_NAMESPACE);
  shutdown.add('temporal-client', () => temporal.connection.close());

  const registry = createMetricsRegistry({ process: options.name });
  registerQueueDepthGauge(registry, () => countActiveJobsByStatus(pool));
  const metrics = createSyncMetrics(registry);
  return { config, logger, shutdown, database, pool, temporal, temporalAddress, devServer, registry, metrics, sdkMetrics };
}
