import type { Client } from '@temporalio/client';
import type { ProviderPolicy } from '../connectors/types';
import type { Pool } from '../db/pool';
import type { Keyring } from '../lib/credentials';
import type { Logger } from '../lib/logger';
import type { SyncMetrics } from '../lib/metrics';
import type { BudgetSettings } from '../policy/rate-budget';
import type { RateLimitPolicy } from '../policy/rate-limit';
import type { ScheduleSettings } from '../policy/schedule';
import type { TenantLimits } from '../policy/tenant-limits';
import type { DeliveryShares } from '../lib/delivery-shares';
import type { ReconcileSettings } from '../temporal/activities';

/** What activities need from the worker process. */
export interface ActivityDeps {
  pool: Pool;
  /**
   * The pool of activities run as local activities (the connection cycle's and the job's
   * bookkeeping): a workflow task waits for its local activities while holding a workflow-task
   * slot, so they must not queue for a connection behind paging activities. `pool` when absent.
   */
  localPool?: Pool;
  logger: Logger;
  metrics: SyncMetrics;
  /** The credentials keyring: the activities that call a provider or sign a webhook open secrets with it. */
  credentials: Keyring;
  /** Used by the reconcile tick to start and stop connection workflows. */
  temporal: Client;
  taskQueue: string;
  /** Schedule bounds from configuration, handed to workflows with each connection's context. */
  settings: ScheduleSettings;
  /** Rate-limit policy: defaults, per-provider overrides and the separate retry cap. */
  rateLimit: RateLimitSettings;
  /** The reconcile tick's period and retention from configuration, reported to it on every tick. */
  reconcile: ReconcileSettings;
  /** TOMBSTONE_RETENTION_DAYS: tombstones of deleted records older than this are purged by retention cleanup. */
  tombstoneRetentionDays: number;
  /** AUDIT_LOG_RETENTION_DAYS: audit_log entries older than this are deleted by retention cleanup. */
  auditRetentionDays: number;
  /** Webhook deliveries. */
  webhooks: {
    /** WEBHOOK_ALLOW_PRIVATE: deliveries may reach loopback and private addresses (tests, `npm start`). */
    allowPrivate: boolean;
    /** The process's places for delivery attempts (WEBHOOK_DELIVERY_SLOTS), shared equally by tenants. */
    shares: DeliveryShares;
    /** How long a receiver gets to answer one attempt (DELIVERY_TIMEOUT_MS when absent; tests hold a receiver longer). */
    timeoutMs?: number;
  };
  /** Provider requests and paging: allowed hosts, PROVIDER_ALLOW_PRIVATE, byte, time and count caps. */
  providers: ProviderPolicy;
  /** The shared rate budget of connectors' credentials (defaults when absent). */
  connectors?: ConnectorSettings;
  /** The default per-tenant limits (TENANT_MAX_*): claims wait while a tenant runs its limit of jobs. DEFAULT_TENANT_LIMITS when absent. */
  tenantLimits?: TenantLimits;
}

/** How activities drive connectors, besides the provider policy. */
export interface ConnectorSettings {
  /** RATE_BUDGET_RESERVE and RATE_BUDGETS: the shared rate budget per credential (defaults when absent). */
  rateBudget?: BudgetSettings;
  /**
   * RATE_BUDGET_MAX_RESET_SECONDS: the furthest a provider's stated reset or wait is believed (a
   * budget's reset, a rate limit's hint); default DEFAULT_MAX_RESET_SECONDS.
   */
  maxResetSeconds?: number;
}

/** The rate-limit configuration activities hand to job workflows. */
export interface RateLimitSettings {
  defaults: RateLimitPolicy;
  overrides: Record<string, Partial<RateLimitPolicy>>;
  retryCap: number;
}
