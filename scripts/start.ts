// `npm start`: the whole platform on one machine — Postgres (DATABASE_URL or embedded under
// DATA_DIR), Temporal (TEMPORAL_ADDRESS or the CLI dev server with its Web UI, persisted under
// DATA_DIR), migrations, one worker and the API. Ctrl-C / SIGTERM stops everything it started,
// in reverse order, and leaves no process behind.
import path from 'node:path';
import { createApp } from '../api/app';
import { apiSettings } from '../api/deps';
import { listen } from '../api/server';
import { openDatabase } from '../db/database';
import { localAdminKey } from '../lib/admin-key';
import { loadConfigOrExit } from '../lib/config';
import { connectServers } from '../lib/connect-servers';
import { parseRateLimitConfig } from '../lib/rate-limit-config';
import { createDemoConnectionIfEmpty } from '../lib/demo-connection';
import { createLogger } from '../lib/logger';
import { createMetricsRegistry, createSyncMetrics, registerQueueDepthGauge } from '../lib/metrics';
import { installSdkMetrics } from '../lib/sdk-metrics';
import { Shutdown } from '../lib/shutdown';
import { resolveTemporalBinary } from '../lib/temporal-binaries';
import { startDevServer, type DevServer } from '../lib/temporal-dev-server';
import { runWorker } from '../workers/run-worker';

const config = loadConfigOrExit();
const rateLimit = loadConfigOrExit(process.env, () => parseRateLimitConfig(process.env));
const logger = createLogger(config.LOG_LEVEL, { process: 'start' });
const shutdown = new Shutdown(logger).onSignals();

async function main(): Promise<void> {
  // Before any NativeConnection: the SDK's Runtime is installed once per process.
  const sdkMetrics = await installSdkMetrics({ globalTags: { process: 'start' }, logger });
  const db = await openDatabase(config, logger);
  shutdown.add('postgres', () => db.stop());

  let address = config.TEMPORAL_ADDRESS;
  let devServer: DevServer | undefined;
  if (!address) {
    const cli = await resolveTemporalBinary('cli', { allowSdkDownload: false });
    devServer = await startDevServer({
      cliPath: cli.path!,
      dbFilename: path.join(config.DATA_DIR, 'temporal.db'),
      port: config.TEMPORAL_DEV_PORT,
      uiPort: config.TEMPORAL_UI_PORT,
      namespace: config.TEMPORAL_NAMESPACE,
      onLog: (line) => logger.debug({ component: 'temporal' }, line),
    });
    shutdown.add('temporal-dev-server', () => devServer!.stop());
    address = devServer.address;
  }

  const { pool, temporal } = await connectServers({ databaseUrl: db.url, temporalAddress: address, config, logger, shutdown });
  const registry = createMetricsRegistry({ process: 'start' });
  registerQueueDepthGauge(registry, pool);
  const metrics = createSyncMetrics(registry);
  await runWorker({ config, address, pool, temporal, metrics, logger, shutdown, rateLimit });

  const demoId = config.START_DEMO ? await createDemoConnectionIfEmpty(pool, temporal, config.TEMPORAL_TASK_QUEUE) : null;
  if (demoId) logger.info({ connection_id: demoId }, 'created the demo connection');

  const admin = await localAdminKey(config.ADMIN_API_KEY, config.DATA_DIR);
  // One process, one /metrics (the API's): the registry's metrics followed by the SDK's.
  const app = createApp({
    pool,
    temporal,
    registry,
    metrics,
    logger,
    adminApiKey: admin.key,
    ...apiSettings(config),
    extraMetrics: sdkMetrics.scrape,
  });
  const api = await listen(app, config.API_HOST, config.API_PORT);
  shutdown.add('api', () => api.close());

  process.stdout.write(
    [
      '',
      'Synctide is running.',
      `  API          ${api.url}`,
      `  API docs     ${api.url}/docs`,
      admin.file ? `  API key      in ${admin.file} (Authorization: Bearer $(cat ${admin.file}))` : '  API key      ADMIN_API_KEY',
      `  Readiness    ${api.url}/readyz`,
      `  Metrics      ${api.url}/metrics`,
      devServer ? `  Temporal UI  ${devServer.uiUrl}` : `  Temporal     ${address} (TEMPORAL_ADDRESS)`,
      `  Postgres     ${db.kind === 'embedded' ? db.url : '(DATABASE_URL)'}`,
      ...(demoId ? [`  Demo         connection ${demoId}: workflow connection:${demoId} syncs every minute`] : []),
      '',
      'Press Ctrl-C to stop.',
      '',
    ].join('\n'),
  );
}

main().catch((err: Error) => {
  logger.error({ err }, 'start failed');
  process.stderr.write(`start failed: ${err.message}\n`);
  void shutdown.run('start failed', 1);
});
