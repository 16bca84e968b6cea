// `npm run metrics:exposition`: prints the Prometheus text of every metric Synctide itself
// registers (without prom-client's process_* and nodejs_* defaults, which are not ours), as the
// API and worker processes serve it, for `promtool check metrics` in CI.
import { Registry } from 'prom-client';
import { httpMetrics, createSyncMetrics, registerQueueDepthGauge, registerStateGauges, registerTickIntervalGauge } from '../lib/metrics';

const registry = new Registry();
createSyncMetrics(registry, ['github']);
registerQueueDepthGauge(registry, async () => new Map());
registerStateGauges(registry, {
  openBreakers: async () => new Map([['github', 0]]),
  webhookBacklog: async () => ({ pending: 0, oldestSeconds: 0 }),
  scheduleCounts: async () => ({ counted_at: new Date(), overdue: 0, stale: new Map([['github', 0]]) }),
  deselectionBacklog: async () => ({ pending: 0, oldestSeconds: 0 }),
});
registerTickIntervalGauge(registry, 60);
httpMetrics(registry);
process.stdout.write(await registry.metrics());
