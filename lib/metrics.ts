import { Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Creates a Prometheus registry with Node's default process metrics. Each process (API, worker)
 * owns one registry and serves it on its own `/metrics`.
 */
export function createMetricsRegistry(labels: Record<string, string> = {}): Registry {
  const registry = new Registry();
  registry.setDefaultLabels(labels);
  collectDefaultMetrics({ register: registry });
  return registry;
}
