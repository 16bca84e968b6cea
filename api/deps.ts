import type { Registry } from 'prom-client';
import { BackgroundStarts } from '../commands/background-starts';
import type { CommandDeps } from '../commands/deps';
import type { Shutdown } from '../lib/shutdown';
import { immediateTaskQueue, providerPolicy, type Config } from '../lib/config';
import type { Logger } from '../lib/logger';

/** What the API needs from the process: the commands' dependencies, a metrics registry, a logger. */
export interface ApiDeps extends CommandDeps {
  registry: Registry;
  logger: Logger;
  /** The admin API key every route but health, metrics and docs requires. */
  adminApiKey: string;
  /** Whether `/metrics` also requires the key (METRICS_REQUIRE_AUTH). */
  metricsRequireAuth?: boolean;
  /** Extra metrics text appended to `/metrics` (the Temporal SDK's own worker metrics). */
  extraMetrics?: () => Promise<string>;
}

/** The API settings taken from configuration. */
export function apiSettings(
  config: Config,
): Pick<ApiDeps, 'taskQueue' | 'metricsRequireAuth' | 'maxIntervalSeconds' | 'immediateSyncTimeoutMs' | 'webhookAllowPrivate' | 'defaultIntervalSeconds' | 'immediateTaskQueue' | 'providers'> {
  return {
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    metricsRequireAuth: config.METRICS_REQUIRE_AUTH,
    maxIntervalSeconds: config.MAX_OVERRIDDEN_INTERVAL_SECONDS,
    immediateSyncTimeoutMs: config.IMMEDIATE_SYNC_TIMEOUT_SECONDS * 1000,
    webhookAllowPrivate: config.WEBHOOK_ALLOW_PRIVATE,
    defaultIntervalSeconds: config.DEFAULT_INTERVAL_SECONDS,
    immediateTaskQueue: immediateTaskQueue(config),
    providers: providerPolicy(config),
  };
}

/**
 * The API's background workflow starts (requested jobs start after the answer), drained on
 * shutdown after the HTTP server stopped taking requests: register before the server.
 */
export function backgroundStarts(logger: Logger, shutdown: Shutdown): BackgroundStarts {
  const starts = new BackgroundStarts((err, what) => logger.warn({ err, what }, 'background workflow start failed; the reconcile tick adopts the job'));
  shutdown.add('background-starts', () => starts.drain());
  return starts;
}
