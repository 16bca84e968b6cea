import type { Client } from '@temporalio/client';
import type { CommandDeps } from '../../commands/deps';
import { Registry } from 'prom-client';
import type { ActivityDeps, ConnectorSettings, RateLimitSettings } from '../../activities/deps';
import { DEFAULT_PROVIDER_POLICY, type ProviderPolicy } from '../../connectors/provider-http';
import type { Pool } from '../../db/pool';
import { parseKeyring, sealCredentials, type Keyring } from '../../lib/credentials';
import { DeliveryShares } from '../../lib/delivery-shares';
import { createSyncMetrics } from '../../lib/metrics';
import { DEFAULT_DELIVERY_SLOTS } from '../../policy/delivery-shares';
import { DEFAULT_RATE_LIMIT_POLICY, DEFAULT_RATE_LIMIT_RETRY_CAP } from '../../policy/rate-limit';
import { DEFAULT_SCHEDULE_SETTINGS } from '../../policy/schedule';
import type { TenantLimits } from '../../policy/tenant-limits';
import { capturingLogger, type LogLines } from './logs';

/** The provider policy of tests: the defaults, plus the opt-in for fake providers on 127.0.0.1. */
export const TEST_PROVIDER_POLICY: ProviderPolicy = { ...DEFAULT_PROVIDER_POLICY, allowPrivate: true };

/** The credentials key of tests (a fixed, public test key: 32 bytes of 0x2a). */
export const TEST_CREDENTIALS_KEY = Buffer.alloc(32, 42).toString('base64');

/** The keyring of test processes: TEST_CREDENTIALS_KEY as key `default`. */
export const TEST_KEYRING: Keyring = parseKeyring({ CREDENTIALS_KEY: TEST_CREDENTIALS_KEY })!;

/**
 * `credentials` as the API stores them for connection `id`: sealed with TEST_KEYRING, as the JSON
 * text of the envelope (a jsonb string). Activities refuse an unsealed credentials object.
 */
export function sealedTestCredentials(id: string, credentials: Record<string, unknown> | null): string | null {
  return credentials === null ? null : JSON.stringify(sealCredentials(TEST_KEYRING, id, credentials));
}

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
  providers?: ProviderPolicy;
  credentials?: Keyring;
  connectors?: ConnectorSettings | undefined;
  tenantLimits?: TenantLimits | undefined;
  /** Webhook delivery settings (private addresses allowed, DEFAULT_DELIVERY_SLOTS places, the default timeout when omitted). */
  webhooks?: ActivityDeps['webhooks'];
}): { deps: ActivityDeps; lines: LogLines; registry: Registry } {
  const { logger, lines } = capturingLogger();
  const registry = new Registry();
  const deps: ActivityDeps = {
    pool: opts.pool,
    logger,
    metrics: createSyncMetrics(registry),
    credentials: opts.credentials ?? TEST_KEYRING,
    temporal: opts.temporal ?? (undefined as never),
    taskQueue: opts.taskQueue ?? 'test',
    settings: DEFAULT_SCHEDULE_SETTINGS,
    rateLimit: opts.rateLimit ?? DEFAULT_RATE_LIMIT_SETTINGS,
    reconcile: { tickSeconds: 60, retentionDays: 7 },
    tombstoneRetentionDays: 30,
    auditRetentionDays: 365,
    webhooks: opts.webhooks ?? { allowPrivate: true, shares: new DeliveryShares(DEFAULT_DELIVERY_SLOTS) },
    providers: opts.providers ?? TEST_PROVIDER_POLICY,
    ...(opts.connectors && { connectors: opts.connectors }),
    ...(opts.tenantLimits && { tenantLimits: opts.tenantLimits }),
  };
  return { deps, lines, registry };
}

/** Command dependencies for a test: `pool`, `temporal` (a real client or a stand-in), the test keyring and provider policy. */
export function testCommandDeps(pool: Pool, temporal: Client): CommandDeps {
  return {
    pool,
    temporal,
    taskQueue: 'test',
    credentials: TEST_KEYRING,
    metrics: createSyncMetrics(new Registry()),
    maxIntervalSeconds: 86_400,
    immediateSyncTimeoutMs: 60_000,
    providers: TEST_PROVIDER_POLICY,
  };
}
