import type { Client } from '@temporalio/client';
import type { ProviderPolicy } from '../connectors/types';
import type { Pool } from '../db/pool';
import type { Keyring } from '../lib/credentials';
import type { SyncMetrics } from '../lib/metrics';
import type { TenantLimits } from '../policy/tenant-limits';
import type { BackgroundStarts } from '../lib/background-starts';
import { DEFAULT_TEMPORAL_TIMEOUT_MS, withTemporalBudget, withTemporalDeadline } from '../temporal/client';

/** What commands need from their process. */
export interface CommandDeps {
  pool: Pool;
  temporal: Client;
  /** Task queue of the Synctide workers (where requested jobs and immediate syncs run). */
  taskQueue: string;
  /** The credentials keyring: commands seal credentials and webhook secrets before they write them. */
  credentials: Keyring;
  /** The process's metrics (commands count the jobs they create). */
  metrics: SyncMetrics;
  /** MAX_OVERRIDDEN_INTERVAL_SECONDS: the largest interval a schedule may ask for. */
  maxIntervalSeconds: number;
  /**
   * API_TEMPORAL_TIMEOUT_SECONDS in milliseconds: how long one request's calls to Temporal may
   * take together, from the first of them (the API runs each request under that deadline), and each attempt of a workflow
   * start after the answer; DEFAULT_TEMPORAL_TIMEOUT_MS when unset.
   */
  temporalTimeoutMs?: number;
  /** IMMEDIATE_SYNC_TIMEOUT_SECONDS in milliseconds: how long an immediate sync may run. */
  immediateSyncTimeoutMs: number;
  /**
   * Where a requested job's workflow is started after the answer. Without it the start happens
   * before the answer (the request waits for Temporal).
   */
  background?: BackgroundStarts;
  /** WEBHOOK_ALLOW_PRIVATE: webhook URLs may name loopback and private addresses (default false). */
  webhookAllowPrivate?: boolean;
  /**
   * The task queue of immediate syncs, their workflows and activities (IMMEDIATE_SYNC_TASK_QUEUE),
   * served by workers with their own slots; unset, they run on `taskQueue`.
   */
  immediateTaskQueue?: string;
  /**
   * Which provider hosts a connection may name (PROVIDER_HOSTS, PROVIDER_ALLOW_PRIVATE); the strict
   * default (api.github.com, https only) when unset.
   */
  providers?: ProviderPolicy;
  /** DEFAULT_INTERVAL_SECONDS: the interval of a connection without its own (readiness's freshness count). */
  defaultIntervalSeconds?: number;
  /**
   * FEED_PAGE_MAX_BYTES: the byte budget of one page of a connection's change feed (its records'
   * data); DEFAULT_FEED_PAGE_MAX_BYTES when unset.
   */
  feedPageMaxBytes?: number;
  /** The default per-tenant limits (TENANT_MAX_*); DEFAULT_TENANT_LIMITS when unset. */
  tenantLimits?: TenantLimits;
  /**
   * TENANT_MAX_OAUTH_STATES: connect flows under way one tenant may hold at once;
   * DEFAULT_TENANT_MAX_OAUTH_STATES when unset.
   */
  oauthStatesPerTenant?: number;
}

/** How long `deps`' calls to Temporal may take: API_TEMPORAL_TIMEOUT_SECONDS, or its default. */
export function temporalTimeoutMs(deps: Pick<CommandDeps, 'temporalTimeoutMs'>): number {
  return deps.temporalTimeoutMs ?? DEFAULT_TEMPORAL_TIMEOUT_MS;
}

/**
 * Runs `fn` with every call to Temporal it makes failing with DEADLINE_EXCEEDED once
 * temporalTimeoutMs from now have passed (replacing any deadline of the caller's context).
 */
export function underTemporalDeadline<T>(deps: Pick<CommandDeps, 'temporal' | 'temporalTimeoutMs'>, fn: () => Promise<T>): Promise<T> {
  return withTemporalDeadline(deps.temporal, temporalTimeoutMs(deps), fn);
}

/**
 * Runs `fn`, a request, with its calls to Temporal failing with DEADLINE_EXCEEDED once
 * temporalTimeoutMs have passed from the first of them: the request's waits on the database (a row
 * lock, a statement) before it calls Temporal are not Temporal's time.
 */
export function underRequestTemporalDeadline<T>(deps: Pick<CommandDeps, 'temporal' | 'temporalTimeoutMs'>, fn: () => Promise<T>): Promise<T> {
  return withTemporalBudget(deps.temporal, temporalTimeoutMs(deps), fn);
}

/**
 * Runs the workflow start `start` after the answer (`background`), each attempt under a deadline
 * for Temporal of its own (temporalTimeoutMs from the attempt), never the request's: that one may
 * have passed already (the start tried in the request ran out of it), which would fail every
 * attempt at once.
 */
export function startAfterAnswer(deps: Pick<CommandDeps, 'temporal' | 'temporalTimeoutMs'>, background: BackgroundStarts, what: string, start: () => Promise<unknown>): void {
  background.run(what, () => underTemporalDeadline(deps, start));
}
