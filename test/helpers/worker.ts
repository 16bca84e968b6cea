import { readFile } from 'node:fs/promises';
import type { Client } from '@temporalio/client';
import { inject } from 'vitest';
import type { NativeConnection, WorkflowBundle } from '@temporalio/worker';
import type { Pool } from '../../db/pool';
import { createWorker } from '../../workers/create-worker';
import type { LaneGate } from '../../workers/lane-gate';
import type { ActivityDeps, ConnectorSettings, RateLimitSettings } from '../../activities/deps';
import type { Keyring } from '../../lib/credentials';
import type { TenantLimits } from '../../policy/tenant-limits';
import { testActivityDeps } from './deps';

export { capturingLogger, type LogLines } from './logs';

const bundles = new Map<string, Promise<WorkflowBundle>>();
/**
 * A workflow bundle the global setup built once for the whole run: Synctide's workflows
 * (`workflowBundlePath`), the smoke workflows of test/fixtures (`smokeBundlePath`), or Synctide's
 * with the patches-off shim (`patchesOffBundlePath`).
 */
export function prebuiltBundle(which: 'workflowBundlePath' | 'smokeBundlePath' | 'patchesOffBundlePath'): Promise<WorkflowBundle> {
  let bundle = bundles.get(which);
  if (!bundle) bundles.set(which, (bundle = readFile(inject(which), 'utf8').then((code) => ({ code }))));
  return bundle;
}

/** The real Synctide workflows, as the global setup bundled them for the whole run. */
export function synctideBundle(): Promise<WorkflowBundle> {
  return prebuiltBundle('workflowBundlePath');
}

/** Creates a Synctide worker on a test environment with the real activities. */
export async function createTestWorker(opts: {
  connection: NativeConnection;
  client: Client;
  pool: Pool;
  taskQueue: string;
  rateLimit?: RateLimitSettings;
  /** Paging bounds and rate budget of connectors (defaults when omitted). */
  connectors?: ConnectorSettings;
  /** How long in-flight activities may finish on shutdown (default 5 s). */
  shutdownGraceSeconds?: number;
  /** Workflow runs kept in memory between tasks (the SDK's default when omitted). */
  maxCachedWorkflows?: number;
  /** The credentials keyring of the activities (default: the tests' one key). */
  credentials?: Keyring;
  /** The default per-tenant limits of the activities (DEFAULT_TENANT_LIMITS when omitted). */
  tenantLimits?: TenantLimits;
  /** Activities run at once (the SDK's default when omitted). */
  activitySlots?: number;
  /** The process's lanes (fixed slots when omitted). */
  lanes?: LaneGate;
  /** Webhook delivery settings (testActivityDeps' when omitted). */
  webhooks?: ActivityDeps['webhooks'];
  /** The provider policy of the activities (TEST_PROVIDER_POLICY when omitted). */
  providers?: ActivityDeps['providers'];
  /** The workflows it runs (synctideBundle() when omitted; e.g. the patches-off bundle). */
  workflowBundle?: WorkflowBundle;
}) {
  const { deps, lines, registry } = testActivityDeps({
    pool: opts.pool,
    temporal: opts.client,
    taskQueue: opts.taskQueue,
    rateLimit: opts.rateLimit,
    credentials: opts.credentials,
    connectors: opts.connectors,
    tenantLimits: opts.tenantLimits,
    webhooks: opts.webhooks,
    providers: opts.providers,
  });
  const worker = await createWorker({
    connection: opts.connection,
    namespace: 'default',
    shutdownGraceSeconds: opts.shutdownGraceSeconds ?? 5,
    ...(opts.maxCachedWorkflows !== undefined && { maxCachedWorkflows: opts.maxCachedWorkflows }),
    ...(opts.activitySlots !== undefined && { activitySlots: opts.activitySlots }),
    ...(opts.lanes && { lanes: opts.lanes }),
    workflowBundle: opts.workflowBundle ?? (await synctideBundle()),
    activities: deps,
  });
  return { worker, lines, registry, metrics: deps.metrics };
}

/**
 * Polls `check` until it returns a value other than undefined. Gives up after `timeoutMs` (real
 * time, well inside the test timeout) with `describe()` in the message, so a stuck test says
 * where it stuck instead of polling on after its timeout.
 */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  opts: { timeoutMs?: number; describe?: () => Promise<unknown> } = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 45_000);
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      const last = opts.describe ? JSON.stringify(await opts.describe().catch((e) => String(e))) : '';
      throw new Error(`condition not met within ${opts.timeoutMs ?? 45_000} ms ${last}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
