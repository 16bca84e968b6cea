// `npm run api`: a production API process. Run any number of them behind a load balancer.
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { loadConfigOrExit, requireServers } from '../lib/config';
import { createLogger } from '../lib/logger';
import { createMetricsRegistry } from '../lib/metrics';
import { Shutdown } from '../lib/shutdown';
import { connectTemporal } from '../lib/temporal-connection';
import { createApp } from './app';
import { listen } from './server';

const config = loadConfigOrExit(process.env, (c) => requireServers(c, 'npm run api'));
const logger = createLogger(config.LOG_LEVEL, { process: 'api' });
const shutdown = new Shutdown(logger).onSignals();

async function main(): Promise<void> {
  await migrate(config.DATABASE_URL, (msg) => logger.debug({ component: 'migrate' }, msg));
  const pool = createPool(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  shutdown.add('pool', () => pool.end());
  const temporal = await connectTemporal(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE);
  shutdown.add('temporal-client', () => temporal.connection.close());
  const registry = createMetricsRegistry({ process: 'api' });
  const server = await listen(createApp({ pool, temporal, registry, logger }), config.API_HOST, config.API_PORT);
  shutdown.add('http', () => server.close());
  logger.info({ url: server.url }, 'api listening');
}

main().catch((err: Error) => {
  logger.error({ err }, 'api start failed');
  void shutdown.run('start failed', 1);
});
