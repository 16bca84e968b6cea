// `npm run api`: a production API process. Run any number of them behind a load balancer.
import { connectorSlugs, enableDemoConnector } from '../connectors/registry';
import { loadConfigOrExit, requireAdminKey, requireKeyring, requireServers } from '../lib/config';
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

runService(config, credentials, { name: 'api', sdkRuntime: false, pool: 'api', providers: connectorSlugs() }, async ({ pool, temporal, registry, metrics, logger, shutdown }) => {
  const background = backgroundStarts(logger, shutdown);
  const app = createApp({ pool, temporal, registry, metrics, logger, adminApiKey: config.ADMIN_API_KEY, credentials, ...apiSettings(config), background });
  const server = await listen(app, config.API_HOST, config.API_PORT);
  shutdown.add('http', () => server.close());
  logger.info({ url: server.url }, 'api listening');
});
