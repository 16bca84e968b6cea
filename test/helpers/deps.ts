import type { Client } from '@temporalio/client';
import { Registry } from 'prom-client';
import type { ActivityDeps, ConnectorSettings, RateLimitSettings } from '../../activities/deps';
import type { Pool } from '../../db/pool';
import { createSyncMetrics } from '../../lib/metrics';
import { DEFAULT_RATE_LIMIT_POLICY, DEFAULT_RATE_LIMIT_RETRY_CAP } from '../../policy/rate-limit';
import { DEFAULT_SCHEDULE_SETTINGS } from '../../policy/schedule';
import { capturingLogger, type LogLines } from './logs';

/** The rate-limit settings of an unconfigured worker (the defaults). */
export const DEFAULT_RATE_LIMIT_SETTINGS: RateLimitSettings = {
  defaults: DEFAULT_RATE_LIMIT_POLICY,
  overrides: {},
  retryCap: DEFAULT_RATE_LIMIT_RETRY_CAP,
};

/**
 * Activity dependencies for a test: the given pool, a logger whose lines are kept for assertions,
 * a metrics registry of its own, default schedule and rate-limit settings. Without `temporal`,
 * activities that need a Temporal client must not be called.
 */
export function testActivityDeps(opts: {
  pool: Pool;
  temporal?: Client;
  taskQueue?: string;
  rateLimit?: RateLimitSettings;
  connectors?: ConnectorSettings | undefined;
}): { deps: ActivityDeps; lines: LogLines; registry: Registry } {
  const { logger, lines } = capturingLogger();
  const registry = new Registry();
  const deps: ActivityDeps = {
    pool: opts.pool,
    logger,
    metrics: createSyncMetrics(registry),
    temporal: opts.temporal ?? (undefined as never),
    taskQueue: opts.taskQueue ?? 'test',
    settings: DEFAULT_SCHEDULE_SETTINGS,
    rateLimit: opts.rateLimit ?? DEFAULT_RATE_LIMIT_SETTINGS,
    reconcile: { tickSeconds: 60, retentionDays: 7 },
    tombstoneRetentionDays: 30,
    webhooks: { allowPrivate: true },
    ...(opts.connectors && { connectors: opts.connectors }),
  };
  return { deps, lines, registry };
}
