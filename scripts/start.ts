// `npm start`: the whole platform on one machine — Postgres (DATABASE_URL or embedded under
// DATA_DIR), Temporal (TEMPORAL_ADDRESS or the CLI dev server with its Web UI, persisted under
// DATA_DIR), migrations, one worker and the API. Ctrl-C / SIGTERM stops everything it started,
// in reverse order, and leaves no process behind.
import { createApp } from '../api/app';
import { apiSettings, backgroundStarts } from '../api/deps';
import { createDemoConnectionIfEmpty } from '../commands/demo-connection';
import { runProcess } from '../infra/boot';
import { localAdminKey } from '../lib/admin-key';
import { loadConfigOrExit } from '../lib/config';
import { listen } from '../lib/http';
import { parseRateBudgetConfig } from '../lib/rate-budget-config';
import { parseRateLimitConfig } from '../lib/rate-limit-config';
import { runWorker } from '../workers/run-worker';

// The one-machine quickstart: webhooks may go to receivers on this machine unless told otherwise.
process.env.WEBHOOK_ALLOW_PRIVATE ??= 'true';
const config = loadConfigOrExit();
const rateLimit = loadConfigOrExit(process.env, () => parseRateLimitConfig(process.env));
const rateBudget = loadConfigOrExit(process.env, () => parseRateBudgetConfig(process.env));

runProcess(config, { name: 'start', sdkRuntime: true }, async (proc) => {
  const { pool, temporal, registry, metrics, logger, shutdown } = proc;
  await runWorker(proc, rateLimit, rateBudget);

  const settings = apiSettings(config);
  const demoId = config.START_DEMO ? await createDemoConnectionIfEmpty({ pool, temporal, metrics, ...settings }) : null;
  if (demoId) logger.info({ connection_id: demoId }, 'created the demo connection');

  const admin = await localAdminKey(config.ADMIN_API_KEY, config.DATA_DIR);
  // One process, one /metrics (the API's): the registry's metrics followed by the SDK's.
  const background = backgroundStarts(logger, shutdown);
  const app = createApp({ pool, temporal, registry, metrics, logger, adminApiKey: admin.key, ...settings, extraMetrics: proc.sdkMetrics?.scrape, background });
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
      proc.devServer ? `  Temporal UI  ${proc.devServer.uiUrl}` : `  Temporal     ${proc.temporalAddress} (TEMPORAL_ADDRESS)`,
      `  Postgres     ${proc.database.kind === 'embedded' ? proc.database.url : '(DATABASE_URL)'}`,
      ...(demoId ? [`  Demo         connection ${demoId}: workflow connection:${demoId} syncs every minute`] : []),
      '',
      'Press Ctrl-C to stop.',
      '',
    ].join('\n'),
  );
});
