// `npm run api`: a production API process. Run any number of them behind a load balancer.
import { loadConfigOrExit, requireAdminKey, requireServers } from '../lib/config';
import { connectServers } from '../lib/connect-servers';
import { createLogger } from '../lib/logger';
import { createMetricsRegistry, createSyncMetrics, registerQueueDepthGauge } from '../lib/metrics';
import { Shutdown } from '../lib/shutdown';
import { createApp } from './app';
import { apiSettings } from './deps';
import { listen } from './server';

const config = loadConfigOrExit(process.env, (c) => requireAdminKey(requireServers(c, 'npm run api'), 'npm run api'));
const logger = createLogger(config.LOG_LEVEL, { process: 'api' });
const shutdown = new Shutdown(logger).onSignals();

async function main(): Promise<void> {
  const { pool, temporal } = await connectServers({
    databaseUrl: config.DATABASE_URL,
    temporalAddress: config.TEMPORAL_ADDRESS,
    config,
    logger,
    shutdown,
  });
  const registry = createMetricsRegistry({ process: 'api' });
  registerQueueDepthGauge(registry, pool);
  const app = createApp({ pool, temporal, registry, metrics: createSyncMetrics(registry), logger, adminApiKey: config.ADMIN_API_KEY, ...apiSettings(config) });
  const server = await listen(app, config.API_HOST, config.API_PORT);
  shutdown.add('http', () => server.close());
  logger.info({ url: server.url }, 'api listening');
}

main().catch((err: Error) => {
  logger.error({ err }, 'api start failed');
  void shutdown.run('start failed', 1);
});
