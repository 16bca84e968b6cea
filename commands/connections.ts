// Commands on connections: each writes the row and tells the connection's workflow, so the two
// never drift apart, whoever calls them (the API, `npm start`'s demo connection).
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { connectorSlugs } from '../connectors/registry';
import type { AlertRow } from '../db/models/alerts';
import { findOpenAlert, resolveAlert } from '../db/models/alerts';
import { findBreaker, type BreakerRow } from '../db/models/breaker';
import * as connections from '../db/models/connections';
import type { ConnectionRow, ListConnectionsInput } from '../db/models/connections';
import * as jobs from '../db/models/jobs';
import { findOpenPurge, findOpenPurgeLocked } from '../db/models/purges';
import type { Queryable } from '../db/queryable';
import { cancelJobAndTasks, cancelQueuedSchedulerJobs } from '../db/events';
import type { EndedJob } from '../db/models/jobs';
import { lockOpenTasksOfJobs } from '../db/models/tasks';
import { insertConnectionEvent } from '../db/models/webhooks';
import { withTransaction } from '../db/transaction';
import { sealCredentials } from '../lib/credentials';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import type { CursorCodec, FeedCursor } from '../policy/cursors';
import { sharedGrantOf } from '../policy/oauth';
import { parseSchedule, type Schedule, type ScheduleFields } from '../policy/schedule';
import { CONNECTION_STATUS, CONNECTION_STATUSES, type ConnectionStatus } from '../policy/vocabulary';
import {
  cancelImmediateSync,
  cancelJobWorkflow,
  ensureConnectionWorkflow,
  queryConnectionState,
  signalConnectionWorkflow,
  startWebhookDeliveries,
  immediateSyncHandle,
  stopConnectionWorkflow,
} from '../temporal/client';
import { pauseSignal, replanSignal, resumeSignal, type ConnectionState } from '../temporal/connection';
import { startAfterAnswer, type CommandDeps } from './deps';
import type { WaitOutsideTurn } from './turns';
import { CommandRefused, invalid, notFound } from './errors';
import { DEFAULT_PROVIDER_POLICY, providerUrlProblem } from '../connectors/provider-http';
import { countConnections } from '../db/models/tenant-limits';
import { fitsUnder } from '../policy/tenant-limits';
import { lockedLimits, overLimit } from './tenant-limits';
import { changedListings, configProblem, credentialBinding, credentialsProblem, deselectedBy, endpointOf, keepSpelling, reselectedBy } from './provider-configs';
import { forgetCursors, forgetPartitionCursors } from '../db/models/state';
import { DESELECTION_BATCH, lockChangeFeed, tombstoneDeselectedBatch } from '../db/models/records';
import { forgetDeselections, listDeselections, recordDeselections, type DeselectionUnit } from '../db/models/deselections';
import { deselectedUnits } from '../connectors/selection';
import { forgetEtags } from '../db/models/provider-etags';

export type { ConnectionRow } from '../db/models/connections';

/** How long a connection's `state` query may take before it is shown as unknown. */
const QUERY_DEADLINE_MS = 3000;

/** A connection to create. */
export interface NewConnectionRequest {
  tenantId: string;
  appKey: string;
  provider: string;
  config: Record<string, unknown>;
  credentials: Record<string, unknown> | null;
  /** As the API spells it; parsed here (`parseSchedule`, with MAX_OVERRIDDEN_INTERVAL_SECONDS). */
  schedule: ScheduleFields | null;
  status: 'active' | 'paused';
}

/**
 * Creates a connection and starts its workflow. Refuses an unknown provider, a config its
 * connector rejects or whose provider host is not allowed (PROVIDER_HOSTS), credentials of the
 * wrong shape, an interval above the configured maximum, a taken (tenant, app key) (`purge_in_progress`
 * while the connection holding it is being deleted), and one more connection than the tenant's
 * limit (`tenant_limit`, 409).
 */
export async function createConnection(deps: CommandDeps, request: NewConnectionRequest): Promise<ConnectionRow> {
  const schedule = request.schedule ? scheduleOf(deps, request.schedule) : null;
  checkConfig(request.provider, request.config, deps);
  checkCredentials(request.provider, request.credentials, request.config, deps);
  const shared = sharedGrantSource(request.credentials);
  // The id is chosen here: the sealed credentials are bound to it, and only the envelope is stored.
  const id = randomUUID();
  const sealedCredentials = shared ? null : sealCredentials(deps.credentials, id, request.credentials);
  // Counted and inserted under the tenant's lock: two requests cannot both take the last place.
  const row = await withTransaction(deps.pool, async (tx) => {
    const max = (await lockedLimits(deps, tx, request.tenantId)).connections;
    if (!fitsUnder(max, await countConnections(tx, request.tenantId, max))) throw overLimit('connections', max, 'connections');
    const insert = () =>
      connections.insertConnection(tx, {
        id,
        tenantId: request.tenantId,
        providerSlug: request.provider,
        appKey: request.appKey,
        config: request.config,
        sealedCredentials,
        schedule,
        // In the insert itself: a reconcile tick must never see a connection meant to be paused as active.
        status: request.status,
      });
    let inserted = await insert();
    if (!inserted) {
      // Who holds the app key is read under a lock of its row, in this transaction: a purge
      // completing meanwhile deletes that row in its last transaction, which is waited for; the
      // key it frees is then taken (the insert made once more), and a purge answered as open
      // cannot complete before the answer.
      let holder = await connections.lockConnectionByAppKey(tx, request.appKey, request.tenantId);
      if (!holder) {
        inserted = await insert();
        if (!inserted) holder = await connections.lockConnectionByAppKey(tx, request.appKey, request.tenantId);
      }
      if (!inserted) throw await appKeyTaken(tx, request, holder);
    }
    return shared ? shareGrant(tx, inserted, shared) : inserted;
  });
  const start = () => ensureConnectionWorkflow(deps.temporal, deps.taskQueue, refOf(row));
  try {
    await start();
  } catch (err) {
    // The connection exists once its row is committed: a start that failed (Temporal unreachable
    // for a moment) is tried again after the answer, and the reconcile tick starts the workflow of
    // any connection without one. A 5xx here would have the caller retry into 409 on its own app_key.
    if (!deps.background) throw err;
    startAfterAnswer(deps, deps.background, `connection:${row.id}`, start);
  }
  return row;
}

/**
 * The refusal of a create whose (tenant, app key) `holder` holds: a connection being deleted keeps
 * its app key until its purge completes, said so with the purge to poll (409
 * `purge_in_progress`), rather than as a taken app key the caller has just deleted.
 */
async function appKeyTaken(tx: Queryable, request: NewConnectionRequest, holder: { id: string } | null): Promise<CommandRefused> {
  const purge = holder && (await findOpenPurge(tx, holder.id));
  if (purge) {
    return new CommandRefused('conflict', 'purge_in_progress', `tenant ${request.tenantId}'s connection with app_key ${request.appKey} is being deleted; the app key is free once its purge completes`, { purge_id: purge.id });
  }
  return new CommandRefused('conflict', 'conflict', `tenant ${request.tenantId} already has a connection with app_key ${request.appKey}`);
}

/** The connection with id `id`; refuses with `not_found` (and `missing` as its message) when there is none. */
export async function getConnection(deps: CommandDeps, id: string, missing = 'no connection with that id'): Promise<ConnectionRow> {
  const row = await connections.findConnection(deps.pool, id);
  if (!row) throw notFound(missing);
  return row;
}

/**
 * Refuses (409 `purge_in_progress`, with the purge's id) any change to a connection whose purge is
 * open: a resume, an update or a sync would start work on rows the purge is deleting, and a
 * resumed workflow would keep the purge waiting for it. Given a transaction, it holds the
 * connection's purge lock (shared) until it ends: a change written after this check in the same
 * transaction cannot slip in between a deletion's start and its purge row, whatever the timing.
 */
export async function refuseWhilePurging(db: Queryable, connectionId: string, locked?: 'locked'): Promise<void> {
  const purge = locked ? await findOpenPurgeLocked(db, connectionId) : await findOpenPurge(db, connectionId);
  if (purge) throw purgeInProgress(purge.id);
}

/** The refusal of any change to a connection whose purge `purgeId` is open (409 `purge_in_progress`). */
export function purgeInProgress(purgeId: string): CommandRefused {
  return new CommandRefused('conflict', 'purge_in_progress', 'the connection is being deleted (its purge is in progress); it can no longer be resumed, changed or synced', { purge_id: purgeId });
}

/** One page of connections ordered by id. */
export function listConnections(deps: CommandDeps, input: ListConnectionsInput): Promise<{ rows: ConnectionRow[]; more: boolean }> {
  return connections.listConnections(deps.pool, input);
}

/** A connection with its workflow's live state (null when unknown) and its circuit breaker. */
export interface ConnectionDetail {
  connection: ConnectionRow;
  live: ConnectionState | null;
  breaker: BreakerRow & { open: boolean; alert: AlertRow | null };
}

/**
 * Reads a connection, queries its workflow (at most 3 s) and reads its breaker and open alert. What
 * is left of the wait for the workflow's answer once the reads are done (a worker must answer it;
 * none may), which holds no database connection, runs through `outsideTurn` (`WaitOutsideTurn`:
 * the API request's turn at the pool is given up meanwhile).
 */
export async function describeConnection(
  deps: CommandDeps,
  id: string,
  onQueryFailed: (err: unknown) => void = () => undefined,
  outsideTurn: WaitOutsideTurn = (wait) => wait(),
): Promise<ConnectionDetail> {
  const row = await getConnection(deps, id);
  // The workflow's answer is awaited beside the reads, but the reads go one after the other: a
  // request holds one pooled connection at a time (the API's tenant turns count on it).
  let answered = false;
  const querying =
    row.status === 'disabled'
      ? null
      : queryConnectionState(deps.temporal, row.id, QUERY_DEADLINE_MS)
          .catch((err: unknown) => {
            onQueryFailed(err);
            return null;
          })
          .finally(() => {
            answered = true;
          });
  const breaker = await findBreaker(deps.pool, row.id);
  const alert = await findOpenAlert(deps.pool, 'sync_circuit_breaker', row.id);
  // An answer that came during the reads is taken as it is; one still awaited, outside the turn.
  const live = querying === null || answered ? await querying : await outsideTurn(() => querying);
  const open = breaker.paused_until !== null && breaker.paused_until.getTime() > Date.now();
  return { connection: row, live, breaker: { ...breaker, open, alert } };
}

/** What may change on a connection; undefined leaves a field as it is. */
export interface ConnectionUpdate {
  config?: Record<string, unknown>;
  /** null removes the credentials. */
  credentials?: Record<string, unknown> | null;
  /** Replaces the whole schedule; as the API spells it, parsed here. */
  schedule?: ScheduleFields;
}

/**
 * Changes config, credentials (read at the next run) and the schedule in one statement, then,
 * when the schedule changed, sends the payload-free `replan` to the workflow, which re-plans at
 * once from the schedule as stored (also while it sleeps; a workflow that is not running is
 * started and plans from it in its first cycle). Returns the row as stored.
 *
 * Credentials are bound to the provider origin (e.g. GitHub's `base_url`) and to how they are
 * presented (the http connector's auth scheme and its header or parameter name): a config that
 * moves the origin or changes the scheme clears the stored credentials unless the same request
 * gives credentials again, so a token is never sent to a host, or in a place, it was not given for.
 */
export async function updateConnection(deps: CommandDeps, id: string, change: ConnectionUpdate): Promise<ConnectionRow> {
  // A connection's provider never changes: what depends on it alone is checked before the transaction.
  const known = await getConnection(deps, id);
  await refuseWhilePurging(deps.pool, id);
  const schedule = change.schedule ? scheduleOf(deps, change.schedule) : undefined;
  if (change.config) checkConfig(known.provider_slug, change.config, deps);
  // Against the config they will be used with: the one given with them, else the stored one.
  if (change.credentials) checkCredentials(known.provider_slug, change.credentials, change.config ?? known.config ?? {}, deps);
  if (change.config === undefined && change.credentials === undefined && !schedule) return known;
  const shared = sharedGrantSource(change.credentials);
  const sealedCredentials = change.credentials === undefined || shared ? undefined : sealCredentials(deps.credentials, id, change.credentials);
  // New credentials end `needs_reauth` (in the same statement; a shared grant in `shareGrant`) and
  // resolve its alert: a grant shared into the connection is new credentials like any other.
  const row = await withTransaction(deps.pool, async (tx) => {
    await refuseWhilePurging(tx, id, 'locked');
    // A config change may tombstone records and drops pending deselections it selects again: the
    // change-feed lock first, then the row's, the order a page's store, a full pass's deletion step
    // and the reconcile tick's deselection batches take them.
    if (change.config !== undefined) await lockChangeFeed(tx, id);
    // What the write depends on (the status, the config the credentials are bound to) is read
    // under the row's lock, held until the write: a disable or another update that committed
    // meanwhile is decided on, never written over. New credentials, or a config the credentials
    // are no longer bound to, take the connection out of its OAuth grant: the grant it names is
    // locked before its row (lockConnectionLeavingGrant), the order of a connect flow replacing
    // the grant's tokens (which then writes every connection of the grant) and of a purge; the
    // other order deadlocked with such a flow.
    const leaving = change.credentials !== undefined || change.config !== undefined;
    const current = leaving ? await connections.lockConnectionLeavingGrant(tx, id) : await connections.lockConnection(tx, id);
    if (!current) return null;
    if (schedule && current.status === 'disabled') {
      throw new CommandRefused('conflict', 'connection_disabled', 'the connection is disabled; resume it before changing its schedule');
    }
    // A name the provider takes as one already configured (a GitHub repository in other letter
    // case) keeps its stored spelling: its records' ids and cursors name it.
    const config = change.config === undefined ? undefined : keepSpelling(current.provider_slug, current.config ?? {}, change.config);
    const unbound = config !== undefined && change.credentials === undefined &&
      credentialBinding(current.provider_slug, current.config ?? {}) !== credentialBinding(current.provider_slug, config);
    const updated = await connections.updateConnection(tx, id, { config, sealedCredentials: unbound ? null : sealedCredentials, schedule });
    // What the config no longer selects (a resource type, a repository) leaves the live set, each
    // record one deletion in the feed: the synced set is the provider's data as the config selects
    // it. This request tombstones at most one batch; the rest are recorded as pending and the
    // reconcile tick tombstones them in batches of their own (see `finishDeselections`), so a type
    // of any size can be dropped. No pass of a removed resource type runs again, and a pass that
    // read the older config re-reads it under the feed lock before it stores a page (see
    // upsertRecords' configEpoch), so it writes none of them.
    const dropped = config === undefined ? { resourceTypes: [], partitions: [] } : deselectedBy(current.provider_slug, current.config ?? {}, config);
    if (config !== undefined) await deselect(tx, current.provider_slug, id, config, deselectedUnits(dropped));
    // A dropped partition named again is read whole (its records are, or become, tombstones): its cursors
    // go, and its resource types' ETags (a 304 would skip its pages; they are not known by partition).
    await forgetPartitionCursors(tx, id, [...new Set(dropped.partitions.map((p) => p.partition))]);
    // A resource whose listing changed is read whole next: its cursors and ETags are the old listing's.
    const relisted = config === undefined ? [] : changedListings(current.provider_slug, current.config ?? {}, config);
    // A dropped resource type, configured again, is read whole too.
    await forgetCursors(tx, id, [...new Set([...relisted, ...dropped.resourceTypes])]);
    await forgetEtags(tx, id, [...new Set([...relisted, ...dropped.resourceTypes, ...dropped.partitions.map((p) => p.resourceType)])]);
    const stored = updated && shared ? await shareGrant(tx, updated, shared, current) : updated;
    if (stored && change.credentials) await resolveAlert(tx, 'connection_credentials_invalid', id, new Date());
    return stored;
  });
  if (!row) throw notFound('no connection with that id');
  // Stored first: the workflow re-plans from the stored row when the signal arrives.
  if (schedule) await signalConnectionWorkflow(deps.temporal, deps.taskQueue, refOf(row), replanSignal);
  return row;
}

/**
 * A config change's deselection, in its transaction under the connection's change-feed lock (held
 * to the commit, so no page and no batch of the reconcile tick comes between): forgets the pending
 * deselections that `config` selects again whole (the tick would otherwise tombstone the records a
 * pass stores of them from now on), visits (and so tombstones) at most DESELECTION_BATCH records
 * of the newly deselected `units`, and records those it did not finish as pending, from where it stopped. Records of a pending unit
 * stay live until the tick reaches them; a unit selected again before then keeps those not reached.
 */
async function deselect(tx: PoolClient, provider: string, connectionId: string, config: Record<string, unknown>, units: readonly DeselectionUnit[]): Promise<void> {
  const pending = await listDeselections(tx, connectionId);
  const finished: DeselectionUnit[] = pending.filter((unit) => reselectedBy(provider, config, unit) === 'all');
  const left: (DeselectionUnit & { afterId: string })[] = [];
  let budget = DESELECTION_BATCH;
  for (const unit of units) {
    const again = reselectedBy(provider, config, unit);
    if (again === 'all') continue;
    if (budget === 0) {
      left.push({ ...unit, afterId: '' });
      continue;
    }
    const { visited, last } = await tombstoneDeselectedBatch(tx, { connectionId, countedChange: true }, { ...unit, keep: again.keep, afterId: '', limit: budget });
    // A batch that visited fewer records than it could reached the end of the type; one that
    // visited its limit may have left some, from its last id on.
    if (visited < budget) finished.push(unit);
    else left.push({ ...unit, afterId: last ?? '' });
    budget -= visited;
  }
  await forgetDeselections(tx, connectionId, finished);
  await recordDeselections(tx, connectionId, left);
}

/** A connection's status after a pause, resume or disable, as stored by it. */
export interface StatusChange {
  id: string;
  status: ConnectionStatus;
}

/** The statuses a pause may write over: all but `disabled`, which only a resume leaves. */
const PAUSABLE: readonly ConnectionStatus[] = CONNECTION_STATUSES.filter((s) => s !== CONNECTION_STATUS.disabled);

/**
 * Pauses a connection: no new runs until resumed; a queued job is cancelled, a running one
 * finishes. A workflow that is not running is started and shows the connection paused. A
 * connection that needs reauthorization stays `needs_reauth` (only new credentials end it) and
 * gets `paused` back when they come, not `active`; the answer is the status stored. A
 * disabled connection is refused (409 `connection_disabled`), judged by the statement that writes
 * the pause: a disable or a deletion that commits first is never overwritten (and its stopped
 * workflow never started again by the pause's signal).
 *
 * The scheduler's queued job is cancelled ("connection paused", with `sync.cancelled`) in the
 * transaction that writes the pause, whether or not the workflow runs or hears the signal: a
 * signal that fails (Temporal unreachable, or this process gone after the write) would otherwise
 * leave the job of a workflow that is not running queued, and a resume before the next tick then
 * starts a run whose start-up cleanup finds an active connection's job of a dead run and fails it
 * as abandoned. A running workflow that hears the pause finds its queued job cancelled already and
 * announces nothing more; one that never hears it finds the job cancelled when the resume comes
 * (or, with no resume, when it comes to claim it) and plans the next one. An enqueue locks the same row and refuses a connection that is not
 * active, so no job queued after the pause is among those cancelled; a job already claimed is
 * left to its run.
 */
export async function pauseConnection(deps: CommandDeps, id: string): Promise<StatusChange> {
  const row = await getConnection(deps, id);
  const { written, cancelled } = await withTransaction(deps.pool, async (tx) => {
    const written = await connections.setStatusFrom(tx, row.id, CONNECTION_STATUS.paused, PAUSABLE);
    const paused = written !== null && PAUSABLE.includes(written.previous);
    return { written, cancelled: paused ? await cancelQueuedSchedulerJobs(tx, row.id, new Date(), 'connection paused', null, feedCursors(deps.credentials)) : null };
  });
  if (written === null) throw notFound('no connection with that id');
  if (!cancelled) throw new CommandRefused('conflict', 'connection_disabled', 'the connection is disabled');
  for (const job of cancelled.jobs) recordJobEnded(deps.metrics, job);
  // Its own failures are left to the reconcile tick, which starts any pending delivery.
  await startWebhookDeliveries(deps.temporal, deps.taskQueue, cancelled.deliveries);
  await signalConnectionWorkflow(deps.temporal, deps.taskQueue, refOf(row), pauseSignal);
  return { id: row.id, status: written.status };
}

/**
 * Resumes a paused connection, or re-enables a disabled one; its workflow is started if it is not
 * running. A connection that needs reauthorization stays `needs_reauth`: the provider refused its
 * credentials, which must not be used again; it gets `active` back when new credentials come (a
 * pause made since being undone). The answer is the status stored. Refused while the connection's
 * purge is open, and as not found once it is deleted.
 */
export async function resumeConnection(deps: CommandDeps, id: string): Promise<StatusChange> {
  const row = await getConnection(deps, id);
  // Checked and written in one transaction under the purge lock: never re-activates a connection
  // whose deletion has begun. A connection whose purge deleted it meanwhile is not written, and
  // no workflow is started for it.
  const written = await withTransaction(deps.pool, async (tx) => {
    await refuseWhilePurging(tx, row.id, 'locked');
    return connections.setStatusFrom(tx, row.id, CONNECTION_STATUS.active, CONNECTION_STATUSES);
  });
  if (written === null) throw notFound('no connection with that id');
  await signalConnectionWorkflow(deps.temporal, deps.taskQueue, refOf(row), resumeSignal);
  return { id: row.id, status: written.status };
}

/**
 * Disables a connection and stops everything it runs: its scheduler's queued job (cancelled with
 * the disable, whether or not its workflow runs), its workflow (which cancels its own running
 * job; a job of a run that is gone is cancelled here), every active job requested over the API, through the job's workflow, or
 * directly when that has not started yet, and its immediate sync. Data stays. A job workflow that starts later finds the
 * connection disabled and does not run. Writes a `connection.disabled` webhook event. A connection
 * deleted since the first read (its purge completed) is refused as not found, as by a pause.
 */
export async function disableConnection(deps: CommandDeps, id: string): Promise<StatusChange> {
  const row = await getConnection(deps, id);
  const written = await withTransaction(deps.pool, (tx) => writeDisabled(tx, row, feedCursors(deps.credentials)));
  // Deleted since it was read (its purge completed meanwhile): nothing was written, nothing runs.
  if (!written.found) throw notFound('no connection with that id');
  await stopConnectionWork(deps, row, written);
  return { id: row.id, status: CONNECTION_STATUS.disabled };
}

/** What writing a connection disabled ended and announced: deliveries to start once it commits, jobs to count. */
export interface DisabledWrite {
  /** False when there was no such connection (then nothing was written). */
  found: boolean;
  deliveries: string[];
  ended: EndedJob[];
}

/**
 * Writes connection `row` disabled and, when it was not already, its `connection.disabled` event,
 * in transaction `tx`, and cancels its scheduler's queued jobs (`connection disabled`, with
 * `sync.cancelled`) in the same transaction, whether or not its workflow runs: a workflow that is
 * not running (terminated, or lost, and not yet started again) cannot cancel its queued job, which
 * would otherwise be failed as abandoned by whatever next finds it (the reconcile tick, or the
 * start-up cleanup of the run a resume starts); a running one finds it cancelled already and
 * announces nothing more. A job already claimed is left to its run. Whether it was disabled
 * already is read with the write, under the row's lock, not from `row` (read before): two
 * disables at once (or a disable and a delete) announce it once. The cancelled jobs' events carry
 * feed cursors sealed by `cursors`.
 */
export async function writeDisabled(tx: PoolClient, row: ConnectionRow, cursors: CursorCodec<FeedCursor>): Promise<DisabledWrite> {
  const previous = await connections.disableConnectionRow(tx, row.id);
  if (previous === null) return { found: false, deliveries: [], ended: [] };
  const at = new Date();
  const cancelled = await cancelQueuedSchedulerJobs(tx, row.id, at, 'connection disabled', null, cursors);
  if (previous === 'disabled') return { found: true, deliveries: cancelled.deliveries, ended: cancelled.jobs };
  const announced = await insertConnectionEvent(tx, { type: 'connection.disabled', connectionId: row.id, data: { connection_id: row.id, disabled_at: at.toISOString() } }, at);
  return { found: true, deliveries: [...announced, ...cancelled.deliveries], ended: cancelled.jobs };
}

/**
 * Stops what a connection written disabled runs: its workflow, its active requested jobs and its
 * immediate sync (see `disableConnection`); then counts the jobs `written` ended and starts its
 * deliveries and those of the jobs it ends.
 */
export async function stopConnectionWork(deps: CommandDeps, row: ConnectionRow, written: DisabledWrite): Promise<void> {
  for (const job of written.ended) recordJobEnded(deps.metrics, job);
  const deliveries = [...written.deliveries];
  // A scheduled job the connection's run had begun, when no run is left (terminated, or lost),
  // has nothing to end it but this: cancelled, as a run stopped by the disable would have ended
  // it (and as a requested job whose workflow is gone is, below), not failed later as abandoned.
  if (!(await stopConnectionWorkflow(deps.temporal, row.id))) await cancelOrphanedSchedulerJobs(deps, row.id, deliveries);
  // An immediate sync checked the connection only before it began: a disable stops it as it stops
  // a job (its caller is answered 409 connection_disabled). One that starts later finds the
  // connection disabled before any provider request.
  await cancelImmediateSync(immediateSyncHandle(deps.temporal, row.id));
  for (const job of await jobs.findActiveRequestedJobs(deps.pool, row.id)) {
    const hadWorkflow = await cancelJobWorkflow(deps.temporal, job.id);
    // One its workflow has not claimed yet may be waiting to (as in cancelJob): ended here too.
    if (hadWorkflow && job.status !== 'queued') continue;
    const at = new Date();
    const ended = await withTransaction(deps.pool, async (tx) => {
      const cancelled = await cancelJobAndTasks(tx, job.id, at, 'connection disabled', feedCursors(deps.credentials), hadWorkflow);
      if (cancelled) deliveries.push(...cancelled.deliveries);
      return cancelled;
    });
    if (ended) recordJobEnded(deps.metrics, ended);
  }
  // One whose start fails is started by the reconcile tick.
  await startWebhookDeliveries(deps.temporal, deps.taskQueue, deliveries);
}

/**
 * Cancels ("connection disabled", with `sync.cancelled`) the active scheduler jobs of connection
 * `id`, whose workflow was just found not running, while it is still disabled (read under a
 * share lock of its row: no resume commits meanwhile, and an enqueue, which refuses a connection
 * that is not active, finds the row locked, so no job of a run a resume starts is among them);
 * adds their deliveries to `deliveries`.
 */
async function cancelOrphanedSchedulerJobs(deps: CommandDeps, id: string, deliveries: string[]): Promise<void> {
  const at = new Date();
  const ended = await withTransaction(deps.pool, async (tx) => {
    // The jobs' open tasks first, then the row FOR SHARE (see lockStatusForShare): a page of the
    // lost run's task still being stored holds its task's row, then waits for the feed lock (a
    // config change holding it waits for the connection's row) and reads the config FOR SHARE. So
    // no lock of the row is held while waiting for a task's: that closed a cycle with such a change.
    await lockOpenTasksOfJobs(tx, await jobs.findActiveSchedulerJobs(tx, id));
    if ((await connections.lockStatusForShare(tx, id)) !== CONNECTION_STATUS.disabled) return [];
    const cancelled: EndedJob[] = [];
    for (const jobId of await jobs.findActiveSchedulerJobs(tx, id)) {
      const job = await cancelJobAndTasks(tx, jobId, at, 'connection disabled', feedCursors(deps.credentials));
      if (!job) continue;
      cancelled.push(job);
      deliveries.push(...job.deliveries);
    }
    return cancelled;
  });
  for (const job of ended) recordJobEnded(deps.metrics, job);
}

/**
 * Refuses an unknown provider, a config its connector rejects, and a provider URL the deployment
 * does not allow (host outside PROVIDER_HOSTS, plain http, credentials in the URL), naming the key.
 */
export function checkConfig(provider: string, config: Record<string, unknown>, deps?: Pick<CommandDeps, 'providers'>): void {
  if (!connectorSlugs().includes(provider)) {
    throw invalid(`provider: unknown provider '${provider}' (known: ${connectorSlugs().join(', ')})`);
  }
  const problem = configProblem(provider, config);
  if (problem) throw invalid(`config: ${problem}`);
  const endpoint = endpointOf(provider, config);
  const refused = endpoint && providerUrlProblem(endpoint.url, deps?.providers ?? DEFAULT_PROVIDER_POLICY);
  if (refused) throw invalid(`config.${endpoint.key}: ${refused}`);
}

/**
 * Refuses credentials of the wrong shape for `provider` (e.g. a 1-character token), or that
 * `config` would not send (an http connection's bearer auth without a `token`: every sync would
 * fail for good), naming the key, never the value; and a client credentials `token_url` the
 * deployment does not allow (host outside PROVIDER_HOSTS, plain http, an internal address):
 * Synctide itself requests it, with the client secret, so it is held to the rules of a provider
 * URL as a `base_url` is.
 */
function checkCredentials(provider: string, credentials: Record<string, unknown> | null | undefined, config: Record<string, unknown>, deps?: Pick<CommandDeps, 'providers'>): void {
  if (!credentials) return;
  const shared = sharedGrantOf(credentials);
  const problem = shared ? ('problem' in shared ? shared.problem : null) : credentialsProblem(provider, credentials, config);
  if (problem) throw invalid(`credentials.${problem}`);
  if (!shared && credentials.kind === 'oauth2_client_credentials' && typeof credentials.token_url === 'string') {
    const refused = providerUrlProblem(credentials.token_url, deps?.providers ?? DEFAULT_PROVIDER_POLICY);
    if (refused) throw invalid(`credentials.token_url: ${refused}`);
  }
}

/** The connection whose OAuth 2 grant `credentials` share (checked by `checkCredentials`), or null. */
function sharedGrantSource(credentials: Record<string, unknown> | null | undefined): string | null {
  const shared = sharedGrantOf(credentials);
  return shared && 'source' in shared ? shared.source : null;
}

/**
 * Makes connection `row` share the OAuth 2 grant of connection `sourceId`, in the caller's
 * transaction: a source of another tenant (or none) is refused as not found, like every id of
 * another tenant; one holding no oauth2 grant with `grant_source_not_oauth2`; a grant the
 * provider refused (its connections need reauthorization) with `connection_needs_reauth`.
 * The grant is new credentials for `row`: a `row` that needs reauthorization gets back its status (REAUTH_ENDED)
 * (its alert is resolved by the caller, as for any new credentials). Only `row` changes: the
 * grant's other connections keep their status (one a concurrent refusal marked stays marked).
 * A grant's status is `needs_reauth` while any of its connections is, so `row` must never join
 * it still marked: it would block the healthy grant for every connection using it.
 * A grant is bound to its use as any credentials are (`credentialBinding`: the provider origin,
 * and how the connector presents it): `row` must present it as the source does, its config as
 * it was before this request when the source is `row` itself (`before`), else `invalid` and
 * nothing is shared. A write to a tenant's connections must not send the grant's access tokens,
 * refreshed for as long as it lives, to a host of the writer's choosing, where moving a
 * connection's origin drops its credentials.
 */
async function shareGrant(tx: Queryable, row: ConnectionRow, sourceId: string, before?: ConnectionRow): Promise<ConnectionRow> {
  // A source being deleted hands on nothing: its purge's last step deletes it and the grant only
  // it names. Checked under its purge lock (shared), so the purge is either seen open here or
  // starts only after this transaction.
  const purge = await findOpenPurgeLocked(tx, sourceId);
  const source = await connections.findConnectionGrant(tx, sourceId);
  if (!source || source.tenant_id !== row.tenant_id) throw notFound('credentials.grant_from_connection: no connection of this tenant with that id');
  if (purge) throw purgeInProgress(purge.id);
  if (!source.oauth_grant_id || !source.oauth_app_id) {
    throw new CommandRefused('conflict', 'grant_source_not_oauth2', 'credentials.grant_from_connection: that connection holds no oauth2 grant to share (complete its connect flow first)');
  }
  // The grant is held against its deletion from here (a source leaving it, its last connection,
  // deletes it); one the source left while this waited is looked at again as the source holds now.
  const held = await connections.lockGrantForShare(tx, source.oauth_grant_id);
  if (!held || (await connections.findConnectionGrant(tx, sourceId))?.oauth_grant_id !== source.oauth_grant_id) return shareGrant(tx, row, sourceId, before);
  const user = before?.id === sourceId ? before : await connections.findConnection(tx, sourceId);
  if (!user || credentialBinding(user.provider_slug, user.config ?? {}) !== credentialBinding(row.provider_slug, row.config ?? {})) {
    throw invalid("credentials.grant_from_connection: that connection's grant is bound to its provider origin and how it is presented (the base URL's origin, the auth type and its header or parameter name); this connection's config must use the same to share it");
  }
  // A refused grant is not handed on: its connect flow comes first.
  if ((await connections.findGrantForRefresh(tx, source.oauth_grant_id))?.status === CONNECTION_STATUS.needs_reauth) {
    throw new CommandRefused('conflict', 'connection_needs_reauth', 'credentials.grant_from_connection: the provider refused that grant; complete the connect flow of that connection first');
  }
  await connections.attachGrant(tx, row.id, source.oauth_grant_id, source.oauth_app_id, { resume: false });
  // `row` was read by the update that locked it in this transaction: its status is still this one.
  // The grant it now shares ends a refusal, also one a disabled connection kept.
  if (row.status === CONNECTION_STATUS.needs_reauth || row.status === CONNECTION_STATUS.disabled) await connections.resumeRefusedConnections(tx, { table: 'connections', id: row.id });
  return (await connections.findConnection(tx, row.id))!;
}

/**
 * The schedule a request gives, through the one parser with this deployment's
 * MAX_OVERRIDDEN_INTERVAL_SECONDS; refuses any problem, naming its key.
 */
function scheduleOf(deps: CommandDeps, fields: ScheduleFields): Schedule {
  const { schedule, problems } = parseSchedule(fields, { maxOverriddenIntervalSeconds: deps.maxIntervalSeconds });
  if (problems.length > 0 || !schedule) {
    throw invalid(problems.map((p) => `schedule${p.key ? `.${p.key}` : ''}: ${p.message}`).join('; ') || 'schedule: give exactly one of interval_seconds or cron');
  }
  return schedule;
}

/** A connection's identity as its workflow's search attributes show it. */
export function refOf(row: ConnectionRow) {
  return { id: row.id, tenantId: row.tenant_id, providerSlug: row.provider_slug };
}
