import type { Client } from '@temporalio/client';
import type { Registry } from 'prom-client';
import type { Pool } from '../db/pool';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/logger';
import type { SyncMetrics } from '../lib/metrics';

/** What the API needs from the process: one pool, one Temporal client, one metrics registry. */
export interface ApiDeps {
  pool: Pool;
  temporal: Client;
  registry: Registry;
  /** SPEC §8 metrics on `registry` (the API counts the jobs it creates). */
  metrics: SyncMetrics;
  logger: Logger;
  /** Task queue of the Synctide workers (where requested jobs and immediate syncs run). */
  taskQueue: string;
  /** The admin API key every route but health, metrics and docs requires. */
  adminApiKey: string;
  /** Whether `/metrics` also requires the key (METRICS_REQUIRE_AUTH). */
  metricsRequireAuth?: boolean;
  /** MAX_OVERRIDDEN_INTERVAL_SECONDS: the largest interval a schedule may ask for. */
  maxIntervalSeconds: number;
  /** Extra metrics text appended to `/metrics` (the Temporal SDK's own worker metrics). */
  extraMetrics?: () => Promise<string>;
}

/** The API settings taken from configuration. */
export function apiSettings(config: Config): Pick<ApiDeps, 'taskQueue' | 'metricsRequireAuth' | 'maxIntervalSeconds'> {
  return {
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    metricsRequireAuth: config.METRICS_REQUIRE_AUTH,
    maxIntervalSeconds: config.MAX_OVERRIDDEN_INTERVAL_SECONDS,
  };
}
