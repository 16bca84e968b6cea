import type { Registry } from 'prom-client';
import type { CommandDeps } from '../commands/deps';
import { immediateTaskQueue, providerPolicy, type Config, tenantLimits } from '../lib/config';
import type { Logger } from '../lib/logger';
import type { TrustedProxies } from '../lib/client-address';
import type { BucketLimits } from '../policy/token-bucket';

/** What the API needs from the process: the commands' dependencies, a metrics registry, a logger. */
export interface ApiDeps extends CommandDeps {
  registry: Registry;
  logger: Logger;
  /** The admin API key: every tenant, every route. Tenant keys are in the database. */
  adminApiKey: string;
  /** METRICS_PUBLIC: `/metrics` without the admin key (its labels carry tenant ids). Default false. */
  metricsPublic?: boolean;
  /** The per-API-key token bucket (API_RATE_LIMIT_PER_SECOND, API_RATE_LIMIT_BURST); unset, no limit. */
  rateLimit?: BucketLimits;
  /** Failed tenant-key lookups per client address (API_AUTH_FAILURES_PER_MINUTE); unset, no limit. */
  authFailureLimit?: BucketLimits;
  /** TRUSTED_PROXIES: the reverse proxies whose X-Forwarded-For names the client that limit counts; unset or empty, none. */
  trustedProxies?: TrustedProxies;
  /** Whether the process's shutdown has begun (then `/readyz` answers 503 `stopping`); unset, never. */
  stopping?: () => boolean;
  /** Extra metrics text appended to `/metrics` (the Temporal SDK's own worker metrics). */
  extraMetrics?: () => Promise<string>;
}

/** The API settings taken from configuration. */
export function apiSettings(
  config: Config,
): Pick<ApiDeps, 'taskQueue' | 'metricsPublic' | 'rateLimit' | 'authFailureLimit' | 'trustedProxies' | 'maxIntervalSeconds' | 'immediateSyncTimeoutMs' | 'webhookAllowPrivate' | 'defaultIntervalSeconds' | 'immediateTaskQueue' | 'providers' | 'tenantLimits' | 'oauthStatesPerTenant' | 'feedPageMaxBytes' | 'temporalTimeoutMs'> {
  return {
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    metricsPublic: config.METRICS_PUBLIC,
    rateLimit: { ratePerSecond: config.API_RATE_LIMIT_PER_SECOND, burst: config.API_RATE_LIMIT_BURST },
    authFailureLimit: { ratePerSecond: config.API_AUTH_FAILURES_PER_MINUTE / 60, burst: config.API_AUTH_FAILURES_PER_MINUTE },
    trustedProxies: config.TRUSTED_PROXIES,
    maxIntervalSeconds: config.MAX_OVERRIDDEN_INTERVAL_SECONDS,
    immediateSyncTimeoutMs: config.IMMEDIATE_SYNC_TIMEOUT_SECONDS * 1000,
    webhookAllowPrivate: config.WEBHOOK_ALLOW_PRIVATE,
    defaultIntervalSeconds: config.DEFAULT_INTERVAL_SECONDS,
    immediateTaskQueue: immediateTaskQueue(config),
    providers: providerPolicy(config),
    tenantLimits: tenantLimits(config),
    oauthStatesPerTenant: config.TENANT_MAX_OAUTH_STATES,
    feedPageMaxBytes: config.FEED_PAGE_MAX_BYTES,
    temporalTimeoutMs: config.API_TEMPORAL_TIMEOUT_SECONDS * 1000,
  };
}
