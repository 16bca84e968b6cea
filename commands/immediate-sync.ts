import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowFailedError } from '@temporalio/client';
import { findSyncBlockers, type ConnectionRow } from '../db/models/connections';
import { findOpenPurgeLocked } from '../db/models/purges';
import { countImmediateSyncs, immediateSyncsAndOverride, insertImmediateSyncLease, releaseImmediateSyncLease } from '../db/models/tenant-limits';
import { withTransaction } from '../db/transaction';
import { DEFAULT_TENANT_LIMITS, effectiveLimits, fitsUnder, IMMEDIATE_SYNC_RETRY_AFTER_SECONDS } from '../policy/tenant-limits';
import type { SyncMode } from '../policy/vocabulary';
import { cancelImmediateSync, immediateSyncProgress, startImmediateSync, withTemporalDeadline } from '../temporal/client';
import type { ImmediateSyncResult, ResourceCounts } from '../temporal/immediate-sync';
import { temporalTimeoutMs, underTemporalDeadline, type CommandDeps } from './deps';
import { CommandRefused, firstLine } from './errors';
import { refuseUnlessSyncable, resolveResourceTypes } from './jobs';
import { lockedLimits, overLimit } from './tenant-limits';
import type { WaitOutsideTurn } from './turns';

export type { ImmediateSyncResult } from '../temporal/immediate-sync';

/**
 * How long an immediate sync may outlive its caller's deadline before the server ends it: time
 * for the caller to read its progress and cancel it, and for the activity to stop.
 */
const EXECUTION_GRACE_MS = 60_000;

/** Per-resource counts as answers show them, with their total. */
export function countsView(resources: ResourceCounts[]) {
  const list = resources.map((r) => ({ resource_type: r.resourceType, entity_count: r.entityCount, written_count: r.writtenCount, pages: r.pages }));
  return { total_entities: list.reduce((sum, r) => sum + r.entity_count, 0), resources: list };
}

/**
 * Runs a connection's sync now and answers with per-resource counts; no job or task rows are
 * written. Refuses what a queued sync refuses (a connection not active, or paused by its circuit
 * breaker), a second immediate sync of a connection while one runs (`immediate_sync_running`),
 * and one more than the tenant may run at once (`tenant_limit`, 429).
 * Its activity runs on `deps.immediateTaskQueue` when set (workers give that queue its own slots).
 * A provider failure is refused as `sync_failed` with the connector's first line. When
 * `immediateSyncTimeoutMs` passes first, the sync is cancelled and refused as `timeout`, with
 * the counts its activity last reported (`fetched`; none when they cannot be read, which never
 * keeps it from being cancelled); what it stored so far stays stored. From its deadline on it keeps
 * its tenant's place until its workflow has closed, however its caller was answered. The wait for
 * the workflow's answer, which holds no database connection, runs through `outsideTurn`
 * (`WaitOutsideTurn`: the API request's turn at the pool is given up meanwhile).
 */
export async function runImmediately(
  deps: CommandDeps,
  connection: ConnectionRow,
  mode: SyncMode,
  requested?: string[],
  outsideTurn: WaitOutsideTurn = (wait) => wait(),
): Promise<ImmediateSyncResult> {
  await refuseUnlessSyncable(deps, connection);
  const resourceTypes = resolveResourceTypes(connection, requested);
  const executionTimeoutMs = deps.immediateSyncTimeoutMs + EXECUTION_GRACE_MS;
  const lease = await takeImmediateSlot(deps, connection, executionTimeoutMs);
  const still: StillRunning = {};
  try {
    return await runWithLease(deps, connection, mode, resourceTypes, executionTimeoutMs, still, outsideTurn);
  } finally {
    // A release that fails leaves the lease counted only until it expires.
    const release = () => releaseImmediateSyncLease(deps.pool, lease, connection.tenant_id).catch(() => undefined);
    // A sync cancelled at the caller's deadline runs on until its activity sees the cancellation:
    // it keeps its place until its workflow has closed (or its lease expires), after the answer.
    if (still.closing) void still.closing.then(release, release);
    else await release();
  }
}

/** A sync answered before its workflow closed: `closing` settles once it has. */
interface StillRunning {
  closing?: Promise<unknown>;
}

/**
 * Counts one more immediate sync of the connection's tenant, under its lock, or refuses with
 * `tenant_limit` (429) when TENANT_MAX_IMMEDIATE_SYNCS (or the tenant's override) of them run:
 * the shared immediate-sync slots then always leave room for other tenants. The lease lasts at
 * most the sync's execution timeout (an API process that dies leaves it until then). Returns its id.
 */
async function takeImmediateSlot(deps: CommandDeps, connection: ConnectionRow, executionTimeoutMs: number): Promise<string> {
  // First one statement without the lock: a tenant that holds its limit now is refused at once
  // (a refusal is right whenever the tenant was at its limit when asked), so a client that keeps
  // asking costs a round trip, not a locked transaction. Room seen here is taken under the lock.
  const refuseOver = (max: number, running: number) => {
    if (!fitsUnder(max, running)) throw overLimit('immediateSyncs', max, 'immediate syncs running at once', IMMEDIATE_SYNC_RETRY_AFTER_SECONDS);
  };
  const seen = await immediateSyncsAndOverride(deps.pool, connection.tenant_id);
  refuseOver(effectiveLimits(deps.tenantLimits ?? DEFAULT_TENANT_LIMITS, { immediateSyncs: seen.max_immediate_syncs }).immediateSyncs, seen.running);
  const id = randomUUID();
  await withTransaction(deps.pool, async (tx) => {
    const max = (await lockedLimits(deps, tx, connection.tenant_id)).immediateSyncs;
    const now = new Date();
    // Asked again under the connection's purge lock (shared), after the wait for the tenant's: a
    // deletion or disable that came meanwhile refuses the sync here, as it would have at first.
    await findOpenPurgeLocked(tx, connection.id);
    await refuseUnlessSyncable(deps, connection, await findSyncBlockers(tx, connection.id, now));
    refuseOver(max, await countImmediateSyncs(tx, connection.tenant_id));
    await insertImmediateSyncLease(tx, { id, tenantId: connection.tenant_id, connectionId: connection.id, lastsMs: executionTimeoutMs });
  });
  return id;
}

async function runWithLease(
  deps: CommandDeps,
  connection: ConnectionRow,
  mode: SyncMode,
  resourceTypes: string[],
  executionTimeoutMs: number,
  still: StillRunning,
  outsideTurn: WaitOutsideTurn,
): Promise<ImmediateSyncResult> {
  const input = { connectionId: connection.id, mode, resourceTypes, ...(deps.immediateTaskQueue && { activityTaskQueue: deps.immediateTaskQueue }) };
  const handle = await startImmediateSync(deps.temporal, deps.immediateTaskQueue ?? deps.taskQueue, input, executionTimeoutMs);
  if (!handle) {
    throw new CommandRefused('conflict', 'immediate_sync_running', 'an immediate sync of this connection is already running; wait for its answer');
  }
  // Its wait and what follows it run past the request's deadline for Temporal: the wait has the
  // workflow's own execution timeout (the server ends it by then) and a Temporal timeout more, and
  // the progress read and the cancel after it a deadline of their own.
  const result = withTemporalDeadline(deps.temporal, executionTimeoutMs + temporalTimeoutMs(deps), () => handle.result());
  const afterWait = <T>(call: () => Promise<T>) => underTemporalDeadline(deps, call);
  const deadline = new AbortController();
  try {
    // Up to IMMEDIATE_SYNC_TIMEOUT_SECONDS on the workflow, holding no connection: outside the
    // tenant's turn, so other tenants' requests are not held behind it.
    const finished = await outsideTurn(() => Promise.race([result, sleep(deps.immediateSyncTimeoutMs, null, { signal: deadline.signal })]));
    if (finished) return finished;
    // From here it may run on past the answer, whatever the answer is (a failed read or cancel
    // included): it keeps its tenant's place until its workflow has closed (or its lease expired).
    still.closing = result;
    // Its counts are only what the answer reports: a read that fails must not keep it from being
    // cancelled. It is then answered as one that reported no page yet.
    const progress = await afterWait(() => immediateSyncProgress(deps.temporal, handle)).catch(() => null);
    // Closed in the meantime: its own outcome is the answer.
    if (!(await afterWait(() => cancelImmediateSync(handle)))) return await result;
    throw new CommandRefused(
      'timeout',
      'timeout',
      `the immediate sync did not finish within ${deps.immediateSyncTimeoutMs / 1000} s (IMMEDIATE_SYNC_TIMEOUT_SECONDS) and was cancelled; what it fetched is stored`,
      { fetched: countsView(progress?.resources ?? []) },
    );
  } catch (err) {
    if (!(err instanceof WorkflowFailedError)) throw err;
    // Ended because the connection stopped being syncable while it ran (a disable or a deletion
    // cancels it; a run that starts after one refuses to fetch): the caller is told so, as a
    // request made now would be, not that the provider failed. A circuit-breaker pause never
    // stops a sync that has begun, so it is left out.
    await refuseUnlessSyncable(deps, connection, undefined, { pause: false });
    // The activity's failure message is the connector's (tokens already redacted); the first line only.
    let cause: unknown = err.cause;
    while ((cause as { cause?: unknown })?.cause) cause = (cause as { cause: unknown }).cause;
    throw new CommandRefused('failed', 'sync_failed', `the sync failed: ${firstLine((cause as Error)?.message ?? 'unknown error')}`);
  } finally {
    deadline.abort();
  }
}
