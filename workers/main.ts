// `npm run worker`: a production worker process. Run any number of them against one database and
// Temporal namespace; each also serves /metrics and /healthz on WORKER_METRICS_PORT: its own
// metrics followed by the Temporal SDK's, read from the SDK's exporter on a loopback port.
import { Hono } from 'hono';
import { runProcess } from '../infra/boot';
import { loadConfigOrExit, requireServers } from '../lib/config';
import { listen, metricsRoutes } from '../lib/http';
import { parseRateBudgetConfig } from '../lib/rate-budget-config';
import { parseRateLimitConfig } from '../lib/rate-limit-config';
import { runWorker } from './run-worker';

const config = loadConfigOrExit(process.env, (c) => requireServers(c, 'npm run worker'));
const rateLimit = loadConfigOrExit(process.env, () => parseRateLimitConfig(process.env));
const rateBudget = loadConfigOrExit(process.env, () => parseRateBudgetConfig(process.env));

runProcess(config, { name: 'worker', sdkRuntime: true }, async (proc) => {
  await runWorker(proc, rateLimit, rateBudget);
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.route('/', metricsRoutes(proc.registry, proc.sdkMetrics?.scrape));
  const server = await listen(app, config.API_HOST, config.WORKER_METRICS_PORT);
  proc.shutdown.add('metrics-server', () => server.close());
  proc.logger.info({ metrics: `${server.url}/metrics` }, 'worker started');
});
