// `npm run api`: a production API process. Run any number of them behind a load balancer.
import { connectorSlugs, enableDemoConnector } from '../connectors/registry';
import { serveApi } from '../infra/api-serving';
import { loadConfigOrExit, requireAdminKey, requireKeyring, requireServers } from '../lib/config';
import { runService } from '../processes/service';
import { createApp } from './app';
import { apiSettings } from './deps';

// Parsed once, here, and passed down.
const { config, credentials } = loadConfigOrExit(process.env, (c) => ({
  config: requireAdminKey(requireServers(c, 'npm run api'), 'npm run api'),
  credentials: requireKeyring(c, 'npm run api'),
}));

// Off in production: the demo provider's fault hooks are for `npm start` and tests.
if (config.DEMO_CONNECTOR) enableDemoConnector();

/** The whole shutdown's time, from SIGTERM to the exit. */
const GRACE_MS = config.API_SHUTDOWN_GRACE_SECONDS * 1000;

runService(config, credentials, { name: 'api', sdkRuntime: false, pool: 'api', providers: connectorSlugs() }, async ({ pool, temporal, registry, metrics, logger, shutdown }) => {
  await serveApi({ pool, logger, shutdown }, { host: config.API_HOST, port: config.API_PORT, graceSeconds: config.API_SHUTDOWN_GRACE_SECONDS }, (background, stopping) =>
    createApp({ pool, temporal, registry, metrics, logger, adminApiKey: config.ADMIN_API_KEY, credentials, ...apiSettings(config), background, stopping }),
  );
  // The first step: the API is all this process serves, so the grace bounds the whole shutdown.
  // Should a later step still be stuck at its end, the process exits all the same (1: its
  // shutdown did not complete), before the orchestrator's SIGKILL.
  shutdown.add('grace-deadline', async () => {
    setTimeout(() => {
      logger.error({ event: 'shutdown', graceSeconds: config.API_SHUTDOWN_GRACE_SECONDS }, 'shutdown grace over with steps unfinished: exiting');
      process.exit(1);
    }, shutdown.remainingMs(GRACE_MS)).unref();
  });
});
