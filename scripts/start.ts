// `npm start`: the whole platform on one machine — Postgres (DATABASE_URL or embedded under
// DATA_DIR), Temporal (TEMPORAL_ADDRESS or the CLI dev server with its Web UI, persisted under
// DATA_DIR), migrations, one worker and the API. Ctrl-C / SIGTERM stops everything it started,
// in reverse order, and leaves no process behind.
import { createApp } from '../api/app';
import { apiSettings } from '../api/deps';
import { createDemoConnectionIfEmpty } from '../commands/demo-connection';
import { connectorSlugs, enableDemoConnector } from '../connectors/registry';
import { localAdminKey, localCredentialsKey } from '../lib/admin-key';
import { loadConfigOrExit, orExit, requireKeyring } from '../lib/config';
import { parseRateBudgetConfig } from '../lib/rate-budget-config';
import { parseRateLimitConfig } from '../lib/rate-limit-config';
import { runWorker } from '../workers/run-worker';
import { runService } from '../processes/service';
import { serveApi } from '../infra/api-serving';

// The one-machine quickstart: webhooks may go to receivers on this machine unless told otherwise,
// and the demo provider is there for the demo connection.
process.env.WEBHOOK_ALLOW_PRIVATE ??= 'true';
process.env.DEMO_CONNECTOR ??= 'true';
process.env.PROVIDER_ALLOW_PRIVATE ??= 'true';
// Parsed once, here, and passed down.
const { config, rateLimit, rateBudget } = loadConfigOrExit(process.env, (c) => ({
  config: c,
  rateLimit: parseRateLimitConfig(process.env),
  rateBudget: parseRateBudgetConfig(process.env),
}));

if (config.DEMO_CONNECTOR) enableDemoConnector();

// No key configured: one is generated into DATA_DIR (like the admin key) before anything starts.
const localKey = config.CREDENTIALS_KEY || config.CREDENTIALS_KEYS ? null : await localCredentialsKey(config.DATA_DIR);
const credentials = orExit(() => requireKeyring(localKey ? { ...config, CREDENTIALS_KEY: localKey.key } : config, 'npm start'));

// The process's own pool is the API's; the worker opens its own (separate limits, no contention).
runService(config, credentials, { name: 'start', sdkRuntime: true, pool: 'api', providers: connectorSlugs() }, async (proc) => {
  const { pool, temporal, registry, metrics, logger, shutdown } = proc;
  await runWorker(proc, rateLimit, credentials, rateBudget);

  const settings = apiSettings(config);
  if (config.START_DEMO && !config.DEMO_CONNECTOR) logger.info('START_DEMO ignored: DEMO_CONNECTOR=false');
  const demoId = config.START_DEMO && config.DEMO_CONNECTOR ? await createDemoConnectionIfEmpty({ pool, temporal, metrics, credentials, ...settings }) : null;
  if (demoId) logger.info({ connection_id: demoId }, 'created the demo connection');

  const admin = await localAdminKey(config.ADMIN_API_KEY, config.DATA_DIR);
  // Stopped first, by the API's shutdown rule (API_SHUTDOWN_GRACE_SECONDS), as `npm run api`
  // stops: then the worker drains, and the servers this process started stop.
  // One process, one /metrics (the API's): the registry's metrics followed by the SDK's.
  const api = await serveApi({ pool, logger, shutdown }, { host: config.API_HOST, port: config.API_PORT, graceSeconds: config.API_SHUTDOWN_GRACE_SECONDS }, (background, stopping) =>
    createApp({ pool, temporal, registry, metrics, logger, adminApiKey: admin.key, credentials, ...settings, extraMetrics: proc.sdkMetrics?.scrape, background, stopping }),
  );

  process.stdout.write(
    [
      '',
      'Synctide is running.',
      `  API          ${api.url}`,
      `  API docs     ${api.url}/docs`,
      admin.file ? `  API key      in ${admin.file} (Authorization: Bearer $(cat ${admin.file}))` : '  API key      ADMIN_API_KEY',
      `  Readiness    ${api.url}/readyz`,
      `  Metrics      ${api.url}/metrics${config.METRICS_PUBLIC ? '' : ' (with the API key)'}`,
      localKey ? `  Credentials  sealed with the key in ${localKey.file} (back it up with the data)` : '  Credentials  sealed with CREDENTIALS_KEY(S)',
      proc.devServer ? `  Temporal UI  ${proc.devServer.uiUrl}` : `  Temporal     ${proc.temporalAddress} (TEMPORAL_ADDRESS)`,
      `  Postgres     ${proc.database.kind === 'embedded' ? `${withoutPassword(proc.database.url)} (password in ${proc.database.passwordFile})` : '(DATABASE_URL)'}`,
      ...(demoId ? [`  Demo         connection ${demoId}: workflow connection:${demoId} syncs every minute`] : []),
      '',
      'Press Ctrl-C to stop.',
      '',
    ].join('\n'),
  );
});

/** `url` with its password left out, for showing. */
function withoutPassword(url: string): string {
  const parsed = new URL(url);
  parsed.password = '';
  return parsed.toString();
}
