// Commands on jobs: requesting a sync or a backfill (write the job, then start or wake what runs
// it), reading jobs, and cancelling one through the workflow that runs it.
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { getConnector } from '../connectors/registry';
import { findOpenAlert } from '../db/models/alerts';
import { findBreaker } from '../db/models/breaker';
import { findConnection, findSyncBlockers, findSyncTargetByAppKey, type ConnectionRow, type SyncBlockers } from '../db/models/connections';
import * as jobs from '../db/models/jobs';
import type { JobRow, ListedJobRow, ListJobsInput, NewJob } from '../db/models/jobs';
import { cancelJobAndTasks } from '../db/events';
import { findJobTasks, type TaskRow } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import { ACTIVE_JOB_STATUSES, isActiveJobStatus, isSchedulerTrigger, type SyncMode } from '../policy/vocabulary';
import {
  cancelJobWorkflow,
  ensureConnectionWorkflow,
  ensureJobWorkflow,
  signalConnectionWorkflow,
  signalRunningConnectionWorkflow,
  startWebhookDeliveries,
} from '../temporal/client';
import { cancelJobSignal, syncNowSignal } from '../temporal/connection';
import { syncJobWorkflowId } from '../temporal/ids';
import { purgeInProgress, refOf } from './connections';
import { startAfterAnswer, type CommandDeps } from './deps';
import { CommandRefused, invalid, notFound } from './errors';

export type { JobRow } from '../db/models/jobs';
export type { TaskRow } from '../db/models/tasks';

/** A sync or backfill asked for. */
export interface JobRequest {
  connection: ConnectionRow;
  /** What may refuse a sync of `connection`, read in the same statement as it; read again when absent. */
  blockers?: SyncBlockers;
  mode: SyncMode;
  resourceTypes?: string[];
  backfill?: { window: { start: Date; end: Date }; priority: number; payload: Record<string, unknown> };
  idempotencyKey?: string;
}

/** The job that answers a request, and the resource types it syncs. */
export interface RequestedJobAnswer {
  job: JobRow;
  resourceTypes: string[];
  /** False when an existing job answered (same Idempotency-Key, or one already active). */
  created: boolean;
}

/**
 * Turns a sync or backfill request into a job that will run:
 * - refuses a paused or disabled connection, and one paused by its circuit breaker (with the
 *   alert), before anything is written, unless the request repeats an Idempotency-Key that
 *   already has a job (its job answers, whatever the connection's state now);
 * - inserts the job (`api` or `backfill`) guarded by the unique indexes, so concurrent identical
 *   requests and repeats with the same Idempotency-Key give one row; an active job that blocks
 *   the insert answers the request only while it is still active when read for the answer, and
 *   syncs every resource type the request asks for (one that finished meanwhile runs nothing of
 *   it: the insert is tried again);
 * - a sync that finds a job of its mode running (or waiting to retry) answers with it when that job
 *   syncs every type asked for; otherwise it gets a job queued behind it, which runs once the
 *   running one has ended (its claim waits until then), or the one already queued there, widened
 *   to the types asked for: no request is answered with a job that never syncs what it asked;
 * - a new job runs in its own `sync-job:<id>` workflow, started after the answer when the process
 *   has background starts (the inserted row is the outbox). A sync that finds the connection's own
 *   queued job of that type answers with it and wakes the scheduler with `syncNow`, so it runs now;
 *   when that scheduler is no longer running, its queued job is cancelled and the request gets a
 *   job of its own, and the scheduler is started again.
 */
export async function requestJob(deps: CommandDeps, request: JobRequest, orphanRetries = 1): Promise<RequestedJobAnswer> {
  const { connection } = request;
  const replayed = await replay(deps, request);
  if (replayed) return replayed;
  await refuseUnlessSyncable(deps, connection, request.blockers);
  const resourceTypes = resolveResourceTypes(connection, request.resourceTypes);
  const asked = requestedJob(request, resourceTypes);
  const id = randomUUID();
  const newJob: NewJob = {
    id,
    workflowId: syncJobWorkflowId(id),
    tenantId: connection.tenant_id,
    scheduledAt: null,
    ...asked,
    idempotencyKey: request.idempotencyKey,
  };
  let answering: { result: InsertOutcome; job: JobRow } | null = null;
  for (let attempt = 0; attempt < 5 && !answering; attempt++) {
    const result = await insertRequestedJob(deps, connection, newJob);
    if (result.outcome === 'inserted') deps.metrics.jobs.inc({ status: 'queued', provider: connection.provider_slug });
    if (result.outcome === 'same_key' && !sameRequest(result.job, asked)) throw keyReused(result.job);
    if (result.outcome === 'active' && request.backfill) {
      throw new CommandRefused('conflict', 'backfill_in_progress', 'a backfill of this connection is still active; retry when it has finished', { job_id: result.job.id });
    }
    // A requested job still queued answers the request by syncing what it asks for too (its types
    // are read when it is claimed): widened, it syncs every type asked for. One claimed before it
    // could be widened, or that ended since, answers no request (nothing of it may run what was
    // asked): the insert is tried again, and the request gets a job queued behind the running one,
    // or the one queued meanwhile, or the running one when that syncs every type asked for.
    const job = result.outcome === 'active' && !result.covers
      ? await jobs.widenQueuedJobTypes(deps.pool, result.job.id, request.resourceTypes ? resourceTypes : null)
      : result.job;
    if (result.outcome !== 'active') answering = { result, job: result.job };
    else if (job && isActiveJobStatus(job.status)) answering = { result, job };
  }
  if (!answering) throw new Error('could not insert or find an active requested job after 5 attempts');
  const { result, job } = answering;

  if (job.status === 'queued' && isSchedulerTrigger(job.trigger)) {
    const signal = [syncNowSignal, { mode: request.mode }] as const;
    if (!(await signalRunningConnectionWorkflow(deps.temporal, connection.id, job.scheduler_run_id, ...signal))) {
      if (orphanRetries > 0) {
        // Queued by a scheduler that is no longer running, so nothing would ever run it (a new
        // run fails it as abandoned): cancel it, ask again, so a job of this request's own runs
        // at once, and start the scheduler again.
        await endJob(deps, job.id, 'cancelled: the connection workflow that queued it was no longer running; a sync requested over the API replaced it');
        const answer = await requestJob(deps, request, orphanRetries - 1);
        await ensureConnectionWorkflow(deps.temporal, deps.taskQueue, refOf(connection));
        return answer;
      }
      // Only a running scheduler queues jobs, so this is a race with one that just ended:
      // start it with the request waiting for it rather than lose the request.
      await signalConnectionWorkflow(deps.temporal, deps.taskQueue, refOf(connection), ...signal);
    }
  } else if (job.status === 'queued') {
    await startRequestedJob(deps, job, connection);
  }
  const jobTypes = Array.isArray(job.payload.resource_types) ? job.payload.resource_types.map(String) : null;
  return { job, resourceTypes: jobTypes ?? (result.outcome === 'inserted' ? resourceTypes : resolveResourceTypes(connection)), created: result.outcome === 'inserted' };
}

/**
 * The answer to a request that repeats an Idempotency-Key which already has a job: that job,
 * whatever became of the connection since (paused, its breaker opened, maybe by that very job,
 * its config no longer selecting a resource type the job names), so a client retrying after a
 * lost answer learns that its job exists. The key with a different request is refused
 * (`idempotency_key_reused`). Null without a key, or when no job holds it (then the request is
 * checked and inserted as a new one; the insert finds a job that took the key meanwhile).
 */
async function replay(deps: CommandDeps, request: JobRequest): Promise<RequestedJobAnswer | null> {
  if (!request.idempotencyKey) return null;
  const id = await jobs.findJobIdByIdempotencyKey(deps.pool, request.connection.tenant_id, request.idempotencyKey);
  const job = id ? await jobs.findJob(deps.pool, id) : null;
  if (!job) return null;
  // Compared as the request gave its types (without repeats): the stored job holds those it resolved then.
  if (!sameRequest(job, requestedJob(request, [...new Set(request.resourceTypes ?? [])]))) throw keyReused(job);
  if (job.status === 'queued') await startRequestedJob(deps, job, request.connection);
  const jobTypes = Array.isArray(job.payload.resource_types) ? job.payload.resource_types.map(String) : null;
  return { job, resourceTypes: jobTypes ?? knownResourceTypes(request.connection), created: false };
}

/** The refusal of an Idempotency-Key that job `job` holds, given with a different request. */
function keyReused(job: JobRow): CommandRefused {
  return new CommandRefused('conflict', 'idempotency_key_reused', 'this Idempotency-Key was already used for a different request', { job_id: job.id });
}

/** Starts (or finds running) the `sync-job:` workflow of requested job `job`, after the answer when the process has background starts. */
async function startRequestedJob(deps: CommandDeps, job: JobRow, connection: ConnectionRow): Promise<void> {
  const start = () => ensureJobWorkflow(deps.temporal, deps.taskQueue, { id: job.id, connection: refOf(connection) });
  if (deps.background) startAfterAnswer(deps, deps.background, `start the workflow of job ${job.id}`, start);
  else await start();
}

/** The connection's resource types, or none when its stored config is no longer valid. */
function knownResourceTypes(connection: ConnectionRow): string[] {
  try {
    return resolveResourceTypes(connection);
  } catch {
    return [];
  }
}

/**
 * Refuses a sync of a connection whose purge is open (`purge_in_progress`), that is not active, or
 * that its circuit breaker pauses (with the breaker's state and its open alert; `pause: false`
 * leaves the breaker out), before anything is written. The purge, the status and the pause are
 * read in one statement (or with the connection: `blockers`).
 */
export async function refuseUnlessSyncable(deps: CommandDeps, connection: ConnectionRow, blockers?: SyncBlockers, opts?: { pause: boolean }): Promise<void> {
  await refuseBlocked(deps, connection, blockers ?? (await findSyncBlockers(deps.pool, connection.id, new Date())), opts);
}

/** Refuses as refuseUnlessSyncable does, from blockers already read; `pause: false` leaves out the breaker. */
async function refuseBlocked(deps: CommandDeps, connection: ConnectionRow, blockers: SyncBlockers, opts: { pause: boolean } = { pause: true }): Promise<void> {
  if (blockers.purge_id) throw purgeInProgress(blockers.purge_id);
  const { status } = blockers;
  if (status === null) throw notFound('no connection with that id');
  if (status === 'needs_reauth') {
    // Only new credentials end it (a resume keeps it so): the provider refused the ones it has.
    throw new CommandRefused('conflict', 'connection_needs_reauth', 'the connection needs new credentials (its OAuth grant was refused); complete its connect flow or PATCH its credentials');
  }
  if (status !== 'active') {
    throw new CommandRefused('conflict', `connection_${status}`, `the connection is ${status}; resume it first`);
  }
  const pausedUntil = opts.pause ? blockers.paused_until : null;
  if (pausedUntil) {
    // One after the other: a request holds one pooled connection at a time (the API's tenant turns count on it).
    const breaker = await findBreaker(deps.pool, connection.id);
    const alert = await findOpenAlert(deps.pool, 'sync_circuit_breaker', connection.id);
    throw new CommandRefused('conflict', 'circuit_breaker_open', 'the connection is paused by its circuit breaker after repeated failures', {
      paused_until: pausedUntil.toISOString(),
      consecutive_failures: breaker.consecutive_failures,
      alert: alert && { ...alert, created_at: alert.created_at.toISOString() },
    });
  }
}

/**
 * What became of an insert: `inserted` (this job), `same_key` (a job with the same
 * Idempotency-Key exists), `active` (an active job of the same kind blocks it and answers it;
 * `covers`: it syncs every resource type the request asks for).
 */
type InsertOutcome = { outcome: 'inserted' | 'same_key'; job: JobRow } | { outcome: 'active'; job: JobRow; covers: boolean };

/**
 * Inserts a requested job, guarded by the unique indexes, so any number of concurrent identical
 * requests insert one row; on a conflict, the job that won. The insert itself writes nothing once
 * the connection's purge began or it stopped being active (jobs.insertRequestedJob): then the
 * request is refused as refuseUnlessSyncable refuses it. A sync finding a job of its mode running
 * that syncs every type it asks for inserts nothing: that job answers it. Otherwise the blocking
 * job is the connection's queued one of that mode (or its active backfill). Tries again when the
 * blocking job finished in between.
 */
async function insertRequestedJob(deps: CommandDeps, connection: ConnectionRow, job: NewJob): Promise<InsertOutcome> {
  const byKey = async () => {
    const id = job.idempotencyKey ? await jobs.findJobIdByIdempotencyKey(deps.pool, job.tenantId, job.idempotencyKey) : null;
    return id ? jobs.findJob(deps.pool, id) : null;
  };
  for (let attempt = 0; attempt < 5; attempt++) {
    const same = await byKey();
    if (same) return { outcome: 'same_key', job: same };
    const inserted = await jobs.insertRequestedJob(deps.pool, job);
    if (inserted) return { outcome: 'inserted', job: inserted };
    await refuseBlocked(deps, connection, await findSyncBlockers(deps.pool, job.connectionId, new Date()), { pause: false });
    const sameAfter = await byKey();
    if (sameAfter) return { outcome: 'same_key', job: sameAfter };
    // The active job that answers it, read again: one that finished since it blocked the insert
    // answers no request (nothing of it would run what was asked), nor does a running one that
    // does not sync every type asked for (the insert it did not block is tried again).
    const active = await jobs.findAnsweringJob(deps.pool, job);
    if (active) {
      const { covers, ...row } = active;
      return { outcome: 'active', job: row, covers };
    }
  }
  throw new Error('could not insert or find the requested job after 5 attempts');
}

/** The requested resource types, checked against the connection's; all of them when none given. */
export function resolveResourceTypes(connection: ConnectionRow, requested?: string[]): string[] {
  let known: string[];
  try {
    known = getConnector(connection.provider_slug).resourceTypes(connection.config);
  } catch (err) {
    throw new CommandRefused('conflict', 'invalid_connection_config', `the connection's config is invalid: ${(err as Error).message}`);
  }
  if (!requested) return known;
  const unknown = requested.filter((type) => !known.includes(type));
  if (unknown.length > 0) {
    throw invalid(`resource_types: unknown for this connection: ${unknown.join(', ')} (known: ${known.join(', ')})`);
  }
  return [...new Set(requested)];
}

/** What a request asks of its job, as the job's row stores it. */
interface RequestedJob {
  connectionId: string;
  jobType: SyncMode;
  trigger: 'api' | 'backfill';
  /** A backfill's window; none for a sync. */
  window?: { start: Date; end: Date };
  priority: number;
  payload: Record<string, unknown>;
}

/**
 * What `request` asks of its job, as the row stores it: the one normaliser both of the insert and
 * of the check that a repeated Idempotency-Key repeats the request. The resource types are the
 * resolved ones (`resourceTypes`, without repeats), written into the payload when the request
 * names any; the priority is 0 unless given; the payload is the JSON value stored (what
 * JSON cannot hold, such as an undefined key, is left out as the insert leaves it out).
 */
function requestedJob(request: JobRequest, resourceTypes: string[]): RequestedJob {
  const payload = {
    ...request.backfill?.payload,
    ...(request.resourceTypes ? { resource_types: resourceTypes } : {}),
  };
  return {
    connectionId: request.connection.id,
    jobType: request.mode,
    trigger: request.backfill ? 'backfill' : 'api',
    window: request.backfill?.window,
    priority: request.backfill?.priority ?? 0,
    payload: JSON.parse(JSON.stringify(payload)) as Record<string, unknown>,
  };
}

/**
 * Whether stored job `job` is the job `asked` (from `requestedJob`) describes: the same
 * connection, mode, trigger, window, priority and payload (equal as JSON values, whatever the
 * order of their keys, as jsonb keeps them), and its `resource_types`: a backfill's the same set
 * (in any order, repeats counted once) or none named by either (every type), as no later request
 * widens a backfill's types, so a repeat asking for fewer types, or for some where the backfill
 * syncs every type, is another request; a sync's a set the job covers, as a queued sync job is
 * widened by later requests it answers (`widenQueuedJobTypes`), to more types or to every type
 * (none named), and still answers a repeat of the request that made it. Anything else with the
 * same Idempotency-Key is a different request.
 */
function sameRequest(job: JobRow, asked: RequestedJob): boolean {
  const { resource_types: storedTypes, ...stored } = job.payload;
  const { resource_types: askedTypes, ...rest } = asked.payload;
  return (
    job.connection_id === asked.connectionId &&
    job.job_type === asked.jobType &&
    job.trigger === asked.trigger &&
    (job.window_start?.getTime() ?? null) === (asked.window?.start.getTime() ?? null) &&
    (job.window_end?.getTime() ?? null) === (asked.window?.end.getTime() ?? null) &&
    job.priority === asked.priority &&
    isDeepStrictEqual(stored, rest) &&
    (job.trigger === 'backfill' ? sameTypes(storedTypes, askedTypes) : typesCover(storedTypes, askedTypes))
  );
}

/** Whether a job's stored `resource_types` (absent: every type) covers those of a request (absent: every type). */
function typesCover(stored: unknown, asked: unknown): boolean {
  if (stored === undefined) return true;
  if (!Array.isArray(stored) || !Array.isArray(asked)) return false;
  const have = new Set(stored.map(String));
  return asked.every((type) => have.has(String(type)));
}

/** Whether a job's stored `resource_types` and those of a request (absent: every type) are the same set. */
function sameTypes(stored: unknown, asked: unknown): boolean {
  if (stored === undefined || asked === undefined) return stored === asked;
  return typesCover(stored, asked) && typesCover(asked, stored);
}

/**
 * The connection an app key names in tenant `tenantId`, with what may refuse a sync of it now (read
 * in the same statement). An app key is unique only within a tenant, so the tenant must be named
 * (a tenant key names its own; the admin key must give `tenant_id`): otherwise any tenant could
 * take an app key another tenant's calls rely on.
 */
export async function findConnectionByAppKey(
  deps: CommandDeps,
  appKey: string,
  tenantId: string | undefined,
): Promise<{ connection: ConnectionRow; blockers: SyncBlockers }> {
  if (tenantId === undefined) throw invalid('tenant_id: required with app_key for the admin key (an app_key is unique only within a tenant)');
  const found = await findSyncTargetByAppKey(deps.pool, appKey, tenantId, new Date());
  if (!found) throw notFound('no connection with that app_key');
  return found;
}

/** A job with its tasks when asked for (or when some failed, to name them in its error). */
export async function getJob(deps: CommandDeps, id: string, includeTasks: boolean): Promise<{ job: JobRow; tasks?: TaskRow[] }> {
  const job = await jobs.findJob(deps.pool, id);
  if (!job) throw notFound('no job with that id');
  const tasks = includeTasks || job.failed_tasks > 0 ? await findJobTasks(deps.pool, id) : undefined;
  return { job, tasks };
}

/** One page of jobs, newest first. */
export function listJobs(deps: CommandDeps, input: ListJobsInput): Promise<{ rows: ListedJobRow[]; more: boolean }> {
  return jobs.listJobs(deps.pool, input);
}

/**
 * Requests cancellation of an active job, and answers the job as the request left it stored (read
 * after it acted): `cancelled` when the request ended it, else the status it still has while its
 * workflow stops it (running, say), never the status read before the request. A job with a
 * workflow is cancelled through it (its cleanup marks the job and tasks); a queued job of the
 * scheduler has none yet, so the connection workflow is told instead. A scheduler job whose
 * connection workflow is no longer running is orphaned: no workflow would ever run or cancel it,
 * so it is cancelled here, directly, and the connection's workflow is started again (unless the
 * connection is disabled). A requested job still queued whose workflow has not started (its start
 * is under way, or failed and waits for the reconcile tick) is cancelled here too: a workflow that
 * starts later claims nothing of a cancelled job. So is a requested job claimed by a workflow that
 * is no longer running (terminated, say): nothing starts a claimed job's workflow again, so none
 * would ever run or cancel it. Refuses a finished job.
 */
export async function cancelJob(deps: CommandDeps, id: string): Promise<JobRow> {
  const job = await jobs.findJob(deps.pool, id);
  if (!job) throw notFound('no job with that id');
  if (!(ACTIVE_JOB_STATUSES as readonly string[]).includes(job.status)) {
    throw new CommandRefused('conflict', 'job_finished', `the job has already finished (${job.status})`);
  }
  await requestCancel(deps, job);
  return (await jobs.findJob(deps.pool, id)) ?? job;
}

/**
 * Cancels active job `job` (read just before) as `cancelJob` says, or refuses (409 `job_finished`)
 * one that ended otherwise while it looked and that it was to end itself.
 */
async function requestCancel(deps: CommandDeps, job: JobRow): Promise<void> {
  const { id } = job;
  if (await cancelJobWorkflow(deps.temporal, id)) {
    // A job its workflow has not claimed yet may be waiting to (its tenant runs its limit of
    // jobs: the claim retries on a timer), where the cancellation ends the run before the part
    // that marks the job: it is ended here. Once cancelled, the workflow claims nothing more.
    if (job.status === 'queued') await endJob(deps, id, 'cancelled', true);
    return;
  }
  if (!isSchedulerTrigger(job.trigger)) {
    if (await endJob(deps, id, 'cancelled', true)) return;
    // Claimed meanwhile by its workflow, which started just after the first look: cancelled through it.
    if (await cancelJobWorkflow(deps.temporal, id)) return;
    // Claimed, and its workflow is no longer running: cancelled here.
    if (await endJob(deps, id, 'cancelled over the API; the workflow that ran it was no longer running')) return;
    throw await jobFinished(deps, id);
  }
  if (await signalRunningConnectionWorkflow(deps.temporal, job.connection_id, job.scheduler_run_id, cancelJobSignal)) return;
  const ended = await endJob(deps, id, 'cancelled over the API; the connection workflow that queued it was no longer running');
  const connection = await findConnection(deps.pool, job.connection_id);
  if (connection && connection.status !== 'disabled') await ensureConnectionWorkflow(deps.temporal, deps.taskQueue, refOf(connection));
  // Ended meanwhile by something else (the reconcile tick failing it as abandoned): refused as any job found finished.
  if (!ended) throw await jobFinished(deps, id);
}

/** The refusal (409 `job_finished`) of a cancel of job `id`, which the request found finished (or gone). */
async function jobFinished(deps: CommandDeps, id: string): Promise<CommandRefused> {
  const status = (await jobs.findJobStatus(deps.pool, id)) ?? 'deleted';
  return new CommandRefused('conflict', 'job_finished', `the job has already finished (${status})`);
}

/**
 * Marks an active job (`onlyQueued`: only one not yet claimed), and its open tasks, `cancelled`
 * with `reason`, and writes its `sync.cancelled` event, in one transaction (as a workflow's own
 * cancellation would), and counts its end once. False when it ended nothing.
 */
async function endJob(deps: CommandDeps, jobId: string, reason: string, onlyQueued = false): Promise<boolean> {
  const at = new Date();
  const ended = await withTransaction(deps.pool, (tx) => cancelJobAndTasks(tx, jobId, at, reason, feedCursors(deps.credentials), onlyQueued));
  if (!ended) return false;
  recordJobEnded(deps.metrics, ended);
  await startWebhookDeliveries(deps.temporal, deps.taskQueue, ended.deliveries);
  return true;
}
