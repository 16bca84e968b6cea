// The API as benchmarks run it: createApp over the bench stack's pool and Temporal client, with a
// silent logger, a metrics registry of its own, the bench keyring and one admin key.
import { pino } from 'pino';
import { createApp } from '../api/app';
import type { ApiDeps } from '../api/deps';
import { createMetricsRegistry, createSyncMetrics } from '../lib/metrics';
import { BENCH_KEYRING } from './deps';
import type { BenchStack } from './stack';

/** The admin API key of benchmarks. */
export const BENCH_ADMIN_KEY = 'bench-admin-key-0123456789abcdef';

/** The API app of a benchmark: the task queue, timeouts and limits are the benchmark's to choose. */
export function benchApp(
  stack: BenchStack,
  opts: Pick<ApiDeps, 'taskQueue' | 'immediateSyncTimeoutMs'> &
    Partial<Pick<ApiDeps, 'immediateTaskQueue' | 'tenantLimits' | 'background' | 'rateLimit' | 'authFailureLimit'>>,
) {
  const registry = createMetricsRegistry();
  return createApp({
    pool: stack.pool,
    temporal: stack.client,
    registry,
    metrics: createSyncMetrics(registry),
    logger: pino({ level: 'silent' }),
    adminApiKey: BENCH_ADMIN_KEY,
    credentials: BENCH_KEYRING,
    maxIntervalSeconds: 86_400,
    ...opts,
  });
}
