// `npm run worker`: a production worker process. Run any number of them against one database and
// Temporal namespace; each also serves /metrics and /healthz on WORKER_METRICS_PORT: its own
// metrics followed by the Temporal SDK's, read from the SDK's exporter on a loopback port.
import { Hono } from 'hono';
import { metricsRoutes } from '../api/routes/metrics';
import { listen } from '../api/server';
import { loadConfigOrExit, requireServers } from '../lib/config';
import { connectServers } from '../lib/connect-servers';
import { parseRateLimitConfig } from '../lib/rate-limit-config';
import { createLogger } from '../lib/logger';
import { createMetricsRegistry, createSyncMetrics, registerQueueDepthGauge } from '../lib/metrics';
import { installSdkMetrics } from '../lib/sdk-metrics';
import { Shutdown } from '../lib/shutdown';
import { runWorker } from './run-worker';

const config = loadConfigOrExit(process.env, (c) => requireServers(c, 'npm run worker'));
const rateLimit = loadConfigOrExit(process.env, () => parseRateLimitConfig(process.env));
const logger = createLogger(config.LOG_LEVEL, { process: 'worker' });
const shutdown = new Shutdown(logger).onSignals();

async function main(): Promise<void> {
  // Before any NativeConnection: the SDK's Runtime is installed once per process.
  const sdkMetrics = await installSdkMetrics({ globalTags: { process: 'worker' }, logger });
  const { pool, temporal } = await connectServers({
    databaseUrl: config.DATABASE_URL,
    temporalAddress: config.TEMPORAL_ADDRESS,
    config,
    logger,
    shutdown,
  });
  const registry = createMetricsRegistry({ process: 'worker' });
  registerQueueDepthGauge(registry, pool);
  await runWorker({ config, address: config.TEMPORAL_ADDRESS, pool, temporal, metrics: createSyncMetrics(registry), logger, shutdown, rateLimit });

  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.route('/', metricsRoutes(registry, sdkMetrics.scrape));
  const server = await listen(app, config.API_HOST, config.WORKER_METRICS_PORT);
  shutdown.add('metrics-server', () => server.close());
  logger.info({ metrics: `${server.url}/metrics` }, 'worker started');
}

main().catch((err: Error) => {
  logger.error({ err }, 'worker start failed');
  void shutdown.run('start failed', 1);
});
