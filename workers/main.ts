// `npm run worker`: a production worker process. Run any number of them against one database and
// Temporal namespace; each also serves on WORKER_METRICS_PORT /metrics (its own metrics followed
// by the Temporal SDK's, read from the SDK's exporter on a loopback port), /healthz (the process
// answers: liveness) and /readyz (200 while its workers are running and Temporal answers their
// connection, 503 before, while it does not, and from the moment shutdown begins: readiness).
import { Hono } from 'hono';
import { connectorSlugs, enableDemoConnector } from '../connectors/registry';
import { runService } from '../processes/service';
import { loadConfigOrExit, requireKeyring, requireServers } from '../lib/config';
import { listen, metricsRoutes } from '../lib/http';
import { parseRateBudgetConfig } from '../lib/rate-budget-config';
import { parseRateLimitConfig } from '../lib/rate-limit-config';
import { runWorker, type WorkerReadiness } from './run-worker';

// Parsed once, here, and passed down.
const { config, rateLimit, rateBudget, credentials } = loadConfigOrExit(process.env, (c) => ({
  config: requireServers(c, 'npm run worker'),
  rateLimit: parseRateLimitConfig(process.env),
  rateBudget: parseRateBudgetConfig(process.env),
  credentials: requireKeyring(c, 'npm run worker'),
}));

// Off in production: the demo provider's fault hooks are for `npm start` and tests.
if (config.DEMO_CONNECTOR) enableDemoConnector();

runService(config, credentials, { name: 'worker', sdkRuntime: true, pool: 'worker', providers: connectorSlugs() }, async (proc) => {
  // Set once the workers run; until then /readyz answers 503.
  const started: { readiness?: () => Promise<WorkerReadiness> } = {};
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const now = (await started.readiness?.()) ?? { ready: false, workers: {} };
    return c.json({ status: now.ready ? 'ready' : 'not_ready', ...(now.temporal && { temporal: now.temporal }), workers: now.workers }, now.ready ? 200 : 503);
  });
  // Behind the admin key when one is configured, unless METRICS_PUBLIC (tenant ids are in the labels).
  const metricsKey = config.METRICS_PUBLIC ? undefined : config.ADMIN_API_KEY;
  if (!metricsKey && !config.METRICS_PUBLIC) proc.logger.warn('worker /metrics is open: set ADMIN_API_KEY to require it, or METRICS_PUBLIC=true to say so');
  app.route('/', metricsRoutes(proc.registry, proc.sdkMetrics?.scrape, metricsKey));
  // Listening before the workers start and closed after they stopped (shutdown runs its steps in
  // reverse order), so /readyz answers 503 through start-up and the whole drain.
  const server = await listen(app, config.API_HOST, config.WORKER_METRICS_PORT);
  proc.shutdown.add('metrics-server', () => server.close());
  started.readiness = await runWorker(proc, rateLimit, credentials, rateBudget);
  proc.logger.info({ metrics: `${server.url}/metrics` }, 'worker started');
});
