import pMap from 'p-map';
import { countOverdueConnections, countStaleConnections, findConnectionStatus, lockReconcileBatch, markWorkflowStopped, storeScheduleCounts, type ReconcileRow } from '../db/models/connections';
import { failAbandonedJob, findActiveJobsCreatedBefore, findActiveJobStatuses, type ActiveJobToCheck } from '../db/models/jobs';
import { forgetSeenOfJob } from '../db/models/seen';
import { cancelJobAndTasks, emitJobEvent } from '../db/events';
import { findPendingDeliveries } from '../db/models/webhooks';
import { findOpenPurgesCreatedBefore } from '../db/models/purges';
import { failOpenTasksOfJobs, lockOpenTasksOfJobs } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import { workingFor } from '../lib/tenant-turns';
import { stoppedQueuedJobReason } from '../policy/job-lifecycle';
import { coldStartDelayMs } from '../policy/schedule';
import { isSchedulerTrigger } from '../policy/vocabulary';
import type { Activities, ReconcileResult } from '../temporal/activities';
import {
  cancelConnectionWorkflow,
  ensureConnectionWorkflow,
  ensureJobWorkflow,
  isWorkflowRunning,
  listRunningAmong,
  listRunningWorkflowIds,
  signalRunningConnectionWorkflow,
  startConnectionPurge,
  startWebhookDeliveries,
  stopConnectionWorkflow,
} from '../temporal/client';
import { recheckSignal, replanSignal } from '../temporal/connection';
import { connectionWorkflowId, deliveryIdOf, purgeIdOf, syncJobWorkflowId, webhookDeliveryWorkflowId } from '../temporal/ids';
import type { ActivityDeps } from './deps';
import { DESELECTION_BATCHES_PER_TICK, finishDeselections } from './finish-deselections';
import { startDeliveriesSoon } from './webhook-deliveries';

const BATCH_SIZE = 200;
/** Temporal calls in flight at once during a tick. */
const CONCURRENCY = 16;
const FIRST_ID = '00000000-0000-0000-0000-000000000000';
/** A job younger than this may still be getting its workflow (the API inserts, then starts it). */
const JOB_GRACE_MS = 60_000;
/** Active jobs read per statement: the tick reads them all, page by page. */
const JOBS_PAGE = 5000;
/** Jobs without a live workflow acted on per tick, oldest first (the rest at the next tick). */
const SUSPECTS_PER_TICK = 5000;
/** A delivery younger than this is still being started by the process that wrote it (or redelivered it). */
const DELIVERY_GRACE_MS = 15_000;
/** How long the tick waits before a second look at workflows the listing missed (visibility lags behind). */
const VISIBILITY_SETTLE_MS = 2000;
/** Pending deliveries without a running workflow started per tick, each tenant's oldest in turn (findPendingDeliveries). */
const DELIVERIES_PER_TICK = 500;

/**
 * How long after the API stored a schedule the tick may send its `replan` again: the API's own
 * signal follows its commit at once, so one still unheard after this was lost.
 */
const REPLAN_GRACE_MS = 60_000;

/** Why the tick failed a job no workflow runs any more. */
export const NO_WORKFLOW_REASON = 'abandoned: no workflow runs this job any more (it ended before the job finished)';

/**
 * One reconcile tick. It lists the running connection, job and delivery workflows once (one
 * visibility query, a page per 1,000), and takes a second, narrower look (after 2 s, as
 * visibility lags behind starts and continue-as-new) at what that listing missed, so its Temporal
 * calls grow with what changed, not with the fleet:
 * - connections are scanned in batches under `FOR NO KEY UPDATE SKIP LOCKED` (a row an enqueue holds is
 *   skipped: its workflow is evidently alive), and the batch's locks are released before any
 *   Temporal call; an active or paused connection whose workflow is not running gets it started
 *   ("use existing", so racing ticks and API calls are safe), the many of a cold start spread
 *   evenly over one tick by start delays (coldStartDelayMs); a disabled connection's running
 *   workflow is cancelled, and once a tick finds it ended the row is left alone until it changes;
 *   an active connection whose run the listing shows waiting paused (its resume's signal was
 *   lost) is sent `recheck`, so it looks at its status now rather than at its hourly re-check;
 *   and an active connection whose scheduled job is still queued from a plan older than the
 *   schedule the API stored over a minute ago (the API's `replan` was lost) is sent `replan`, so
 *   its run moves the job to the stored schedule rather than sleeping on to the old plan's time;
 * - every active job older than a minute must have a live workflow: the one that runs it (its own
 *   `sync-job:` run, or its connection's for a scheduled job run inline), or, for a queued job of
 *   the scheduler, its connection's workflow. A requested job still queued
 *   without one gets it started; a queued scheduler job of a paused or disabled connection is
 *   cancelled, as the pause or disable would have cancelled it; any other is failed as abandoned
 *   (with its open tasks), so no job stays active forever and blocks its connection's schedule;
 * - every pending webhook delivery older than a few seconds has a running workflow: one whose
 *   workflow is not running (the process that wrote it died before starting it, its workflow was
 *   terminated, or a redelivery found the previous run still closing) gets it started, and so
 *   does every open connection purge older than a minute whose workflow is not running (never
 *   started, or ended before it completed: terminated, or lost with its server);
 * - it tombstones, in bounded batches (each its own transaction), the records of what config
 *   changes stopped selecting that their requests left pending (`finishDeselections`);
 * - last, it counts the overdue connections and, by provider, the connections whose last success
 *   is older than twice their interval, and stores both in the database (`schedule_counts`),
 *   where every process reads them for its `sync_scheduler_backlog` and
 *   `synctide_stale_connections` gauges.
 * Each step on one connection or job runs as its tenant's work (its statements take the tenant's
 * turns at the worker's pool), so a tenant whose rows a long transaction holds keeps at most its
 * share of the pool waiting, never every connection of it while other tenants' syncs wait for one.
 * A failure acting on one connection or job is logged and left to the next tick: the tick goes on
 * with every other, so one tenant's connection or job that fails every time (a start Temporal
 * refuses, a statement timing out behind that tenant's long one) never keeps the rest of the tick
 * (other tenants' starts, deliveries, purges and deselections) from running.
 * Without a list API (the time-skipping test server) every connection is ensured and every
 * suspect asked about, as before.
 */
export function reconcileConnections(deps: ActivityDeps): Activities['reconcileConnections'] {
  const { pool, logger, metrics, temporal, reconcile } = deps;
  return async (input) => {
    const endTimer = metrics.tickDurationSeconds.startTimer({ operation: 'reconcile' });
    const result: ReconcileResult = { ensured: 0, stopped: 0, backlog: 0, adopted: 0, abandoned: 0, temporalCalls: 0, settings: reconcile };
    // Active jobs are read before the running workflows are listed: a job whose workflow starts in
    // between is then seen under its earlier owner (a queued scheduler job under its connection),
    // not as a suspect; one that ends in between is dropped by the status re-read below.
    const jobs = await allActiveJobsCreatedBefore(pool, new Date(input.at - JOB_GRACE_MS));
    const shownPaused = new Set<string>();
    const running = await listRunningWorkflowIds(temporal, shownPaused);
    if (running) result.temporalCalls += Math.max(1, Math.ceil(running.size / 1000));
    const rows: ReconcileRow[] = [];
    for (let after = FIRST_ID; ; ) {
      const batch = await withTransaction(pool, (tx) => lockReconcileBatch(tx, after, BATCH_SIZE, new Date(input.at - REPLAN_GRACE_MS)));
      rows.push(...batch);
      if (batch.length < BATCH_SIZE) break;
      after = batch[batch.length - 1]!.id;
    }
    const suspects = await jobsWithoutListedWorkflow(pool, jobs, running);
    if (running) {
      const unlistedConnections = rows.filter((row) => lacksWorkflow(row, running));
      const unlistedJobs = suspects.flatMap((job) => [syncJobWorkflowId(job.id), jobOwner(job)]);
      await lookAgain(deps, [...new Set([...unlistedConnections.map((row) => connectionWorkflowId(row.id)), ...unlistedJobs])], running, result);
    }
    // The workflows this tick starts are spread evenly over one tick (a cold start finds many);
    // with no listing every connection is merely ensured, at once.
    const missing = running ? rows.filter((row) => lacksWorkflow(row, running)) : [];
    const order = new Map(missing.map((row, k) => [row.id, k]));
    const startDelay = (row: ReconcileRow) => {
      const k = order.get(row.id);
      return k === undefined ? 0 : coldStartDelayMs(k, missing.length, reconcile.tickSeconds * 1000);
    };
    // A failure acting on one connection or job (a start Temporal refused, a statement that timed
    // out behind a tenant's long one) is left to the next tick: the tick goes on with the others,
    // so no tenant's connection keeps the rest of the tick from every other tenant.
    const alone = <T>(act: (item: T) => Promise<void>, about: (item: T) => Record<string, string>, what: string) => async (item: T) => {
      try {
        await act(item);
      } catch (err) {
        logger.warn({ err, ...about(item) }, `${what} failed; the next tick tries again`);
      }
    };
    // The tick is one activity of no tenant, yet it acts on many tenants' connections and jobs at
    // once: each step on one runs as its tenant's work (`workingFor`), so its statements take the
    // tenant's turns at the worker's pool. A tenant whose rows a long transaction holds then keeps
    // at most its share of the pool waiting, not up to CONCURRENCY connections of it, and other
    // tenants' sync statements still find one.
    const asTenant = <T extends { tenant_id: string }>(act: (item: T) => Promise<void>) => (item: T) => workingFor.run(item.tenant_id, () => act(item));
    await pMap(rows, asTenant(alone((row) => reconcileConnection(deps, row, running, result, startDelay(row)), (row) => ({ connection_id: row.id }), 'reconciling a connection')), {
      concurrency: CONCURRENCY,
    });
    const resumedUnheard = rows.filter((row) => row.status === 'active' && shownPaused.has(connectionWorkflowId(row.id)));
    await pMap(resumedUnheard, asTenant((row) => resendSignal(deps, 'rechecked', row, result)), { concurrency: CONCURRENCY });
    const replanUnheard = rows.filter((row) => row.replan_unheard);
    await pMap(replanUnheard, asTenant((row) => resendSignal(deps, 'replanned', row, result)), { concurrency: CONCURRENCY });
    await pMap(suspects, asTenant(alone((job) => reconcileJob(deps, job, running, input.at, result), (job) => ({ job_id: job.id }), 'reconciling a job without a listed workflow')), {
      concurrency: CONCURRENCY,
    });
    await reconcileDeliveries(deps, input.at, running, result);
    // Those the listing shows running are left out by the statement (as deliveries are), not after its
    // limit; the rest are taken each tenant's oldest in turn, as deliveries are.
    const livePurges = running ? [...running].flatMap((id) => purgeIdOf(id) ?? []) : [];
    for (const purge of await findOpenPurgesCreatedBefore(pool, new Date(input.at - JOB_GRACE_MS), livePurges, DELIVERIES_PER_TICK)) {
      // Started "use existing": a workflow the listing missed (or, without a listing, any) is merely found running.
      result.temporalCalls += 1;
      await startConnectionPurge(temporal, deps.taskQueue, { purgeId: purge.id, connectionId: purge.connection_id }).catch((err: unknown) =>
        logger.warn({ err, purge_id: purge.id }, 'connection purge start failed; the next tick tries again'),
      );
    }
    // What config changes stopped selecting, in bounded batches (a failure is left to the next tick).
    await finishDeselections(deps, DESELECTION_BATCHES_PER_TICK, input.at)
      .then((done) => (result.deselectedTombstoned = done.tombstoned))
      .catch((err: unknown) => logger.warn({ err }, 'finishing deselections failed; the next tick goes on'));
    result.backlog = await countOverdueConnections(pool, new Date(input.at));
    const stale = await countStaleConnections(pool, new Date(input.at), deps.settings.defaultIntervalSeconds);
    await storeScheduleCounts(pool, new Date(input.at), result.backlog, stale);
    endTimer();
    logger.info({ ...result, settings: undefined }, 'reconcile tick');
    return result;
  };
}

/**
 * Every active job created before `before`, oldest first, read page by page: a fleet may have
 * more active jobs (a queued scheduler job per connection) than one page, and a job without a
 * workflow must be found however many older jobs are alive.
 */
async function allActiveJobsCreatedBefore(pool: ActivityDeps['pool'], before: Date): Promise<ActiveJobToCheck[]> {
  const jobs: ActiveJobToCheck[] = [];
  for (let after = FIRST_ID; ; ) {
    const page = await findActiveJobsCreatedBefore(pool, before, JOBS_PAGE, after);
    jobs.push(...page);
    if (page.length < JOBS_PAGE) break;
    after = page[page.length - 1]!.id;
  }
  return jobs.sort((a, b) => a.created_at.getTime() - b.created_at.getTime());
}

/**
 * The jobs whose workflow (or, for a queued scheduler job, whose connection's workflow) was not in
 * the listing, less those whose status moved on since they were read (a job that ended or changed
 * hands meanwhile is left to the next tick): SUSPECTS_PER_TICK of them (`limit`), each tenant's
 * oldest in turn (inTenantTurns), so one tenant's backlog of jobs without workflows (many
 * requested while Temporal was away) does not hold another tenant's back for as many ticks as it
 * takes to act on it. Without a listing every job is a suspect.
 */
export async function jobsWithoutListedWorkflow(
  pool: ActivityDeps['pool'],
  jobs: ActiveJobToCheck[],
  running: Set<string> | null,
  limit = SUSPECTS_PER_TICK,
): Promise<ActiveJobToCheck[]> {
  if (!running) return inTenantTurns(jobs, limit);
  const unlisted = inTenantTurns(jobs.filter((job) => !running.has(syncJobWorkflowId(job.id)) && !running.has(jobOwner(job))), limit);
  if (unlisted.length === 0) return unlisted;
  const now = await findActiveJobStatuses(pool, unlisted.map((job) => job.id));
  return unlisted.filter((job) => now.get(job.id) === job.status);
}

/**
 * At most `limit` of `jobs` (oldest first) in turns of tenants: every tenant's oldest, then every
 * tenant's second oldest, and so on, oldest first within a turn.
 */
function inTenantTurns(jobs: ActiveJobToCheck[], limit: number): ActiveJobToCheck[] {
  const seen = new Map<string, number>();
  const turns = jobs.map((job, at) => {
    const turn = seen.get(job.tenant_id) ?? 0;
    seen.set(job.tenant_id, turn + 1);
    return { job, turn, at };
  });
  return turns
    .sort((a, b) => a.turn - b.turn || a.at - b.at)
    .slice(0, limit)
    .map((t) => t.job);
}

/**
 * The workflow that must be alive for an active job: its connection's while the scheduler's job
 * waits, else the one that runs it (its own `sync-job:` workflow, or its connection's for a
 * scheduled job run inline).
 */
export function jobOwner(job: Pick<ActiveJobToCheck, 'id' | 'status' | 'trigger' | 'connection_id' | 'workflow_id'>): string {
  const ownedByScheduler = job.status === 'queued' && isSchedulerTrigger(job.trigger);
  return ownedByScheduler ? connectionWorkflowId(job.connection_id) : (job.workflow_id ?? syncJobWorkflowId(job.id));
}

/**
 * Adds to `running` those of `workflowIds` that a second, narrower visibility query finds running.
 * Visibility is updated asynchronously: a connection that just continued as new, or a job whose
 * workflow just started, may be missing from a listing taken a moment earlier.
 */
async function lookAgain(deps: ActivityDeps, workflowIds: string[], running: Set<string>, result: ReconcileResult): Promise<void> {
  if (workflowIds.length === 0) return;
  await new Promise((resolve) => setTimeout(resolve, VISIBILITY_SETTLE_MS));
  const second = await listRunningAmong(deps.temporal, workflowIds);
  result.temporalCalls += second.calls;
  for (const id of second.running) running.add(id);
}

/**
 * The signals the tick sends again when the API's own was lost after its commit, to a run that
 * would otherwise wait on in its old view:
 * - `recheck`, to the run of an active connection that the listing shows waiting paused: its
 *   resume's signal was lost, and it would wait for its hourly re-check. The run looks at the
 *   stored status, so a connection paused again meanwhile stays paused; one the listing showed
 *   paused a moment too long (visibility lags behind) costs its run one workflow task;
 * - `replan`, to the run of an active connection whose queued scheduled job was planned before its
 *   schedule was stored: the run re-plans from the stored schedule, which writes the plan's time,
 *   so the next tick sends none. A run that is not running is left to its start, which plans from
 *   the stored schedule.
 */
const RESENT = {
  rechecked: { signal: recheckSignal, failed: 'recheck of a paused run failed; the next tick tries again' },
  replanned: { signal: replanSignal, failed: 'replan of a sleeping run failed; the next tick tries again' },
} as const;

/** Sends connection `row`'s run the signal of `kind` (RESENT), counting it when the run was running. */
async function resendSignal({ temporal, logger }: ActivityDeps, kind: keyof typeof RESENT, row: ReconcileRow, result: ReconcileResult): Promise<void> {
  result.temporalCalls += 1;
  try {
    if (await signalRunningConnectionWorkflow(temporal, row.id, null, RESENT[kind].signal)) result[kind] = (result[kind] ?? 0) + 1;
  } catch (err) {
    logger.warn({ err, connection_id: row.id }, RESENT[kind].failed);
  }
}

/** Whether a connection that should have a workflow (active or paused) has none in `running`. */
function lacksWorkflow(row: ReconcileRow, running: Set<string>): boolean {
  return row.status !== 'disabled' && !running.has(connectionWorkflowId(row.id));
}

/** Starts a connection's missing workflow (after `startDelayMs`), or stops a disabled one's and notes once it has ended. */
async function reconcileConnection(
  { pool, temporal, taskQueue }: ActivityDeps,
  row: ReconcileRow,
  running: Set<string> | null,
  result: ReconcileResult,
  startDelayMs: number,
): Promise<void> {
  const alive = running?.has(connectionWorkflowId(row.id));
  if (row.status !== 'disabled') {
    if (alive) return;
    await ensureConnectionWorkflow(temporal, taskQueue, { id: row.id, tenantId: row.tenant_id, providerSlug: row.provider_slug }, startDelayMs);
    result.ensured += 1;
    result.temporalCalls += 1;
    return;
  }
  // Cancellation is only requested: a later tick looks again (and notes it once it has ended).
  result.temporalCalls += 1;
  if (alive) {
    await cancelConnectionWorkflow(temporal, row.id);
    result.stopped += 1;
    return;
  }
  // Not listed: the server is asked before the workflow is noted ended, since visibility lags (a
  // run that just continued as new may be missing from the listing). Only disabled connections
  // not yet noted are asked, each once.
  if (await stopConnectionWorkflow(temporal, row.id)) {
    result.stopped += 1;
    return;
  }
  // Found not running: later ticks leave it alone until the connection changes again.
  await markWorkflowStopped(pool, row.id);
}

/**
 * Keeps the rule "every active job has a live workflow": a job whose workflow runs is left
 * alone; a requested job still queued without one gets it started (its API process died between
 * insert and start); the scheduler's queued job of a paused or disabled connection (paused or
 * disabled while its workflow was not running) is cancelled with `sync.cancelled`, as it would
 * have been had the workflow been there to act; any other is failed as abandoned. Visibility can lag behind a workflow that
 * just started, so the server is asked before a job is failed.
 */
async function reconcileJob(deps: ActivityDeps, job: ActiveJobToCheck, running: Set<string> | null, at: number, result: ReconcileResult): Promise<void> {
  const { pool, temporal, taskQueue, logger, metrics } = deps;
  const jobWorkflow = syncJobWorkflowId(job.id);
  const ownedByScheduler = job.status === 'queued' && isSchedulerTrigger(job.trigger);
  const owner = jobOwner(job);
  if (running?.has(jobWorkflow) || running?.has(owner)) return;
  result.temporalCalls += 1;
  if (await isWorkflowRunning(temporal, owner)) return;
  // Started whatever its connection's status: its claim then does what it would have done had
  // the job started at once (a paused or disabled connection's queued job ends cancelled), so a
  // failed start never turns a pause into a failed job.
  if (job.status === 'queued' && !ownedByScheduler) {
    await ensureJobWorkflow(temporal, taskQueue, {
      id: job.id,
      connection: { id: job.connection_id, tenantId: job.tenant_id, providerSlug: job.provider_slug },
    });
    result.temporalCalls += 1;
    result.adopted += 1;
    logger.info({ job_id: job.id, connection_id: job.connection_id }, 'started the workflow of a queued requested job');
    return;
  }
  const ended = await withTransaction(pool, async (tx) => {
    // The scheduler's queued job of a connection paused or disabled while its workflow was not
    // running ends as the pause or disable would have ended it: cancelled (read now, not at the
    // tick's start: a resume meanwhile makes it an active connection's job, failed as abandoned).
    const stopped = ownedByScheduler ? stoppedQueuedJobReason(await findConnectionStatus(tx, job.connection_id)) : null;
    if (stopped) {
      const row = await cancelJobAndTasks(tx, job.id, new Date(at), stopped, feedCursors(deps.credentials), true);
      return row && { ...row, cancelledAs: stopped };
    }
    // Its tasks' rows first, as a page's statement takes them (the lost run's activity may still store one).
    await lockOpenTasksOfJobs(tx, [job.id]);
    const row = await failAbandonedJob(tx, job.id, new Date(at), NO_WORKFLOW_REASON);
    if (!row) return null;
    await failOpenTasksOfJobs(tx, [job.id], new Date(at), NO_WORKFLOW_REASON);
    await forgetSeenOfJob(tx, job.id);
    return { ...row, cancelledAs: null, deliveries: await emitJobEvent(tx, job.id, 'failed', new Date(at), feedCursors(deps.credentials)) };
  });
  if (!ended) return;
  startDeliveriesSoon(deps, ended.deliveries);
  recordJobEnded(metrics, ended);
  if (ended.cancelledAs) {
    logger.info({ job_id: job.id, connection_id: job.connection_id, reason: ended.cancelledAs }, 'cancelled the queued job of a stopped connection that no workflow runs');
    return;
  }
  result.abandoned += 1;
  logger.warn({ job_id: job.id, connection_id: job.connection_id, trigger: job.trigger, status: job.status }, 'failed an active job that no workflow runs');
}

/**
 * Keeps the rule "every pending delivery has a live workflow": the pending deliveries older than
 * the grace time whose `webhook-delivery:` workflow is not running (by the tick's listing, or,
 * without a list API, by asking the server about each) get it started. Starting is "use
 * existing", so a workflow the listing missed (visibility lags behind starts) is merely found running.
 */
async function reconcileDeliveries(deps: ActivityDeps, at: number, running: Set<string> | null, result: ReconcileResult): Promise<void> {
  const { pool, temporal, taskQueue } = deps;
  const live = running && [...running].flatMap((id) => deliveryIdOf(id) ?? []);
  let suspects = await findPendingDeliveries(pool, new Date(at - DELIVERY_GRACE_MS), live ?? [], DELIVERIES_PER_TICK);
  if (!running) {
    result.temporalCalls += suspects.length;
    const alive = await pMap(suspects, (id) => isWorkflowRunning(temporal, webhookDeliveryWorkflowId(id)), { concurrency: CONCURRENCY });
    suspects = suspects.filter((_, i) => !alive[i]);
  }
  if (suspects.length === 0) return;
  const started = await startWebhookDeliveries(temporal, taskQueue, suspects);
  result.deliveriesStarted = started.length;
  result.temporalCalls += suspects.length;
}
