// Activity dependencies as a production worker builds them (workers/run-worker.ts), with a silent
// logger and a metrics registry of their own. Kept free of heavy imports, so the worker child
// process of worker-memory.bench.ts loads only what a production worker loads.
import type { Client } from '@temporalio/client';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { ActivityDeps } from '../activities/deps';
import { enableDemoConnector } from '../connectors/registry';
import { DEFAULT_PROVIDER_POLICY } from '../connectors/provider-http';
import type { Pool } from '../db/pool';
import { parseKeyring } from '../lib/credentials';
import { createSyncMetrics } from '../lib/metrics';
import { DeliveryShares } from '../lib/delivery-shares';
import { DEFAULT_DELIVERY_SLOTS } from '../policy/delivery-shares';
import { DEFAULT_RATE_LIMIT_POLICY, DEFAULT_RATE_LIMIT_RETRY_CAP } from '../policy/rate-limit';
import { DEFAULT_TENANT_LIMITS, type TenantLimits } from '../policy/tenant-limits';
import { DEFAULT_SCHEDULE_SETTINGS, type ScheduleSettings } from '../policy/schedule';

// Every benchmark syncs demo connections: the provider production leaves off (DEMO_CONNECTOR).
enableDemoConnector();

/** Schedule settings with no jitter, so that `scheduled_at` is exactly the due time. */
/** The credentials keyring of benchmarks: a fixed key. */
export const BENCH_KEYRING = parseKeyring({ CREDENTIALS_KEY: Buffer.alloc(32, 7).toString('base64') })!;

export const NO_JITTER: ScheduleSettings = { ...DEFAULT_SCHEDULE_SETTINGS, jitterPctMin: 0, jitterPctMax: 0 };

export function benchActivityDeps(opts: {
  pool: Pool;
  client: Client;
  taskQueue: string;
  settings?: ScheduleSettings;
  /** Default per-tenant limits; unset, every bench tenant may run any number of jobs (one tenant holds all of a bench's connections). */
  tenantLimits?: TenantLimits;
}): ActivityDeps {
  return {
    pool: opts.pool,
    logger: pino({ level: 'silent' }),
    metrics: createSyncMetrics(new Registry()),
    credentials: BENCH_KEYRING,
    temporal: opts.client,
    taskQueue: opts.taskQueue,
    settings: opts.settings ?? DEFAULT_SCHEDULE_SETTINGS,
    rateLimit: { defaults: DEFAULT_RATE_LIMIT_POLICY, overrides: {}, retryCap: DEFAULT_RATE_LIMIT_RETRY_CAP },
    reconcile: { tickSeconds: 60, retentionDays: 7 },
    tombstoneRetentionDays: 30,
    auditRetentionDays: 365,
    webhooks: { allowPrivate: true, shares: new DeliveryShares(DEFAULT_DELIVERY_SLOTS) },
    providers: { ...DEFAULT_PROVIDER_POLICY, allowPrivate: true },
    tenantLimits: opts.tenantLimits ?? { ...DEFAULT_TENANT_LIMITS, runningJobs: Number.MAX_SAFE_INTEGER },
  };
}
