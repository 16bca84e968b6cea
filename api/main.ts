// `npm run api`: a production API process. Run any number of them behind a load balancer.
import { connectorSlugs, enableDemoConnector } from '../connectors/registry';
import { loadConfigOrExit, requireAdminKey, requireKeyring, requireServers } from '../lib/config';
import { cancelCheckedOut } from '../db/pool';
import { listen } from '../lib/http';
import { runService } from '../processes/service';
import { createApp } from './app';
import { apiSettings, backgroundStarts } from './deps';

// Parsed once, here, and passed down.
const { config, credentials } = loadConfigOrExit(process.env, (c) => ({
  config: requireAdminKey(requireServers(c, 'npm run api'), 'npm run api'),
  credentials: requireKeyring(c, 'npm run api'),
}));

// Off in production: the demo provider's fault hooks are for `npm start` and tests.
if (config.DEMO_CONNECTOR) enableDemoConnector();

/** The whole shutdown's time, from SIGTERM to the exit. */
const GRACE_MS = config.API_SHUTDOWN_GRACE_SECONDS * 1000;
/** The end of the grace kept for cancelling the statements still running, and the exit. */
const LAST_STEPS_MS = Math.min(1000, GRACE_MS / 2);

runService(config, credentials, { name: 'api', sdkRuntime: false, pool: 'api', providers: connectorSlugs() }, async ({ pool, temporal, registry, metrics, logger, shutdown }) => {
  // Steps stop in reverse order: the server (requests answer within the grace), the background
  // starts, then the statements of requests still running are cancelled, so closing the pool
  // does not wait for them (a statement may run up to API_STATEMENT_TIMEOUT_SECONDS).
  shutdown.add('database-statements', async () => {
    const cancelled = await cancelCheckedOut(pool, Math.max(100, shutdown.remainingMs(GRACE_MS)));
    if (cancelled > 0) logger.warn({ event: 'shutdown', connections: cancelled }, 'grace over: statements still running cancelled');
  });
  const background = backgroundStarts(logger, shutdown, () => shutdown.remainingMs(GRACE_MS - LAST_STEPS_MS));
  const app = createApp({ pool, temporal, registry, metrics, logger, adminApiKey: config.ADMIN_API_KEY, credentials, ...apiSettings(config), background });
  const server = await listen(app, config.API_HOST, config.API_PORT);
  shutdown.add('http', () => {
    // The first step: should a later one still be stuck at the end of the grace, the process
    // exits all the same (1: its shutdown did not complete), before the orchestrator's SIGKILL.
    setTimeout(() => {
      logger.error({ event: 'shutdown', graceSeconds: config.API_SHUTDOWN_GRACE_SECONDS }, 'shutdown grace over with steps unfinished: exiting');
      process.exit(1);
    }, shutdown.remainingMs(GRACE_MS)).unref();
    return server.close(shutdown.remainingMs(GRACE_MS - LAST_STEPS_MS));
  });
  logger.info({ url: server.url }, 'api listening');
});
