// SQL of the `sync_jobs` table: one statement per function, typed rows. A connection has at most
// one queued and one running (running or retrying) job per type, and one active backfill: partial
// unique indexes guard every insert and every claim, so concurrent enqueues and requests insert one
// row, and two jobs of a connection and type never run at once.
import type { PoolClient } from 'pg';
import type { TimePosition } from '../../policy/cursors';
import { INITIAL_JOB_STATUS, transitionJob } from '../../policy/job-lifecycle';
import {
  ACTIVE_JOB_STATUSES,
  JOB_STATUS,
  type ActiveJobStatus,
  type ConnectionStatus,
  type FinishedJobStatus,
  type JobStatus,
  type JobTrigger,
  type SyncMode,
} from '../../policy/vocabulary';
import { exactTime } from '../keyset';
import type { Queryable } from '../queryable';
import { ACTIVE_JOBS, CONNECTION, FINISHED_JOBS, JOB, MODE, OPEN_TASKS, PURGE, REQUESTED_JOB_TRIGGERS, SCHEDULER_JOB_TRIGGERS, sqlList, TASK, TRIGGER } from '../sql';
import { pausedUntilAt } from './breaker';

const { queued, running, retrying, completed, failed, cancelled } = JOB_STATUS;

/** Statuses of a claimed job that has not finished: what the one-running-job-per-type index covers. */
const CLAIMED_JOBS = sqlList([running, retrying]);

/**
 * The status change each statement here makes that writes a job's status, by function: from the
 * statuses its WHERE allows to those its SET writes. Each is checked against `validJobTransitions`
 * when this module loads, and each statement takes its status words from its entry.
 */
export const JOB_STATUS_CHANGES = {
  cancelActiveJob: transitionJob(ACTIVE_JOB_STATUSES, [cancelled]),
  markJobRunning: transitionJob([queued, retrying, running], [running]),
  finishRunningJob: transitionJob([running], [completed, failed]),
  endLeftSchedulerJobs: transitionJob(ACTIVE_JOB_STATUSES, [cancelled, failed]),
  markJobRetrying: transitionJob([running, retrying], [retrying]),
  failJobsWithNoOpenTask: transitionJob([running, retrying], [failed]),
  failAbandonedJob: transitionJob(ACTIVE_JOB_STATUSES, [failed]),
} as const;

/** How a running job is finished: `completed` (when every task completed) or `failed`. */
export type FinishOutcome = (typeof JOB_STATUS_CHANGES.finishRunningJob.to)[number];

/** A sync job as the API shows it. */
export interface JobRow {
  id: string;
  connection_id: string;
  tenant_id: string;
  provider_slug: string;
  job_type: SyncMode;
  trigger: JobTrigger;
  status: JobStatus;
  priority: number;
  scheduled_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  window_start: Date | null;
  window_end: Date | null;
  payload: Record<string, unknown>;
  retry_count: number;
  max_retries: number;
  retry_after: Date | null;
  last_error: string | null;
  idempotency_key: string | null;
  workflow_id: string | null;
  /** The connection run that enqueued a scheduler job (its Temporal run id); null for others. */
  scheduler_run_id: string | null;
  total_tasks: number;
  completed_tasks: number;
  failed_tasks: number;
  /** bigint in Postgres, read as a number (safe below 2^53). */
  processed_entities: number;
  /** What the job's tasks did to records so far, summed over its tasks. */
  counts: RecordCounts;
  created_at: Date;
  updated_at: Date;
}

/** Records a job or task added, updated, tombstoned and found unchanged. */
export interface RecordCounts {
  added: number;
  updated: number;
  deleted: number;
  unchanged: number;
}

/** The select list that produces a JobRow from `sync_jobs j join connections c`. */
const JOB_COLUMNS = `j.id, j.connection_id, j.tenant_id, c.provider_slug, j.job_type, j.trigger, j.status, j.priority,
  j.scheduled_at, j.started_at, j.finished_at, j.window_start, j.window_end, j.payload, j.retry_count, j.max_retries,
  j.retry_after, j.last_error, j.idempotency_key, j.workflow_id, j.scheduler_run_id, j.total_tasks, j.completed_tasks, j.failed_tasks,
  j.processed_entities::float8 as processed_entities,
  (select json_build_object('added', coalesce(sum(t.added_count), 0), 'updated', coalesce(sum(t.updated_count), 0),
                            'deleted', coalesce(sum(t.deleted_count), 0), 'unchanged', coalesce(sum(t.unchanged_count), 0))
     from sync_tasks t where t.job_id = j.id) as counts,
  j.created_at, j.updated_at`;

/** A job that an UPDATE just moved to a final status, with what its metrics need. */
export interface EndedJob {
  status: FinishedJobStatus;
  /** The connection's provider slug: `provider` of `sync_jobs_total`. */
  provider: string;
  /** `started_at`, or `created_at` for a job that never started. */
  began_at: Date;
  finished_at: Date;
}

/** RETURNING columns of an UPDATE that ends jobs, giving the EndedJob fields other than `status`. */
function endedJobColumns(table = 'sync_jobs'): string {
  return `coalesce(${table}.started_at, ${table}.created_at) as began_at, ${table}.finished_at,
          (select c.provider_slug from connections c where c.id = ${table}.connection_id) as provider`;
}

/** The job with id `id`, or null. */
export async function findJob(db: Queryable, id: string): Promise<JobRow | null> {
  const { rows } = await db.query<JobRow>(
    `select ${JOB_COLUMNS} from sync_jobs j join connections c on c.id = j.connection_id where j.id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

/** Filters and keyset position of a jobs listing (newest first). */
export interface ListJobsInput {
  connectionId?: string;
  tenantId?: string;
  status?: JobStatus;
  jobType?: SyncMode;
  trigger?: JobTrigger;
  /** The previous page's last (created_at, id), its time as exact text. */
  before?: TimePosition;
  limit: number;
}

/** A listed job, with its created_at as exact text (`exactTime`): the time of its keyset position. */
export interface ListedJobRow extends JobRow {
  created_at_exact: string;
}

/** One page of jobs, newest first; `limit + 1` rows are read to know if more exist. */
export async function listJobs(db: Queryable, input: ListJobsInput): Promise<{ rows: ListedJobRow[]; more: boolean }> {
  const { rows } = await db.query<ListedJobRow>(
    `select ${JOB_COLUMNS}, ${exactTime('j.created_at')} as created_at_exact
       from sync_jobs j join connections c on c.id = j.connection_id
      where ($1::uuid is null or j.connection_id = $1)
        and ($2::text is null or j.tenant_id = $2)
        and ($3::text is null or j.status = $3)
        and ($4::text is null or j.job_type = $4)
        and ($5::text is null or j.trigger = $5)
        and ($6::timestamptz is null or (j.created_at, j.id) < ($6::timestamptz, $7::uuid))
      order by j.created_at desc, j.id desc limit $8`,
    [input.connectionId ?? null, input.tenantId ?? null, input.status ?? null, input.jobType ?? null, input.trigger ?? null,
      input.before?.createdAt ?? null, input.before?.id ?? null, input.limit + 1],
  );
  return { rows: rows.slice(0, input.limit), more: rows.length > input.limit };
}

/** A job to insert in status `queued`. */
export interface NewJob {
  id: string;
  connectionId: string;
  tenantId: string;
  jobType: SyncMode;
  trigger: JobTrigger;
  scheduledAt: Date | null;
  priority?: number;
  window?: { start: Date; end: Date };
  payload?: Record<string, unknown>;
  idempotencyKey?: string;
  /** The connection workflow run that enqueues a scheduler job. */
  schedulerRunId?: string;
  /** The id of the job's own workflow (`syncJobWorkflowId(id)`), kept on the row for operators. */
  workflowId: string;
}

/**
 * Inserts a queued job whose workflow will be `job.workflowId` (a scheduler's), unless the
 * connection has an active job of its type, queued, running or retrying (a backfill: an active
 * backfill), or a unique index says no (one job per tenant and idempotency key): then nothing is
 * written and false is returned. `scheduledAt` null means now. Unlike a requested job, a
 * scheduler's is never queued behind a running job of its type: its run plans again once that one
 * has ended. The check cannot race a requested insert: the enqueue holds the connection's row FOR
 * NO KEY UPDATE, which the requested insert's FOR SHARE waits for.
 */
export async function insertJob(db: Queryable, job: NewJob): Promise<boolean> {
  const { rowCount } = await db.query(
    `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, priority, scheduled_at,
                            window_start, window_end, payload, idempotency_key, workflow_id, scheduler_run_id)
     select $1::uuid, $2::uuid, $3::text, $4::text, $5::text, ${JOB[INITIAL_JOB_STATUS]}, $6::int, coalesce($7::timestamptz, now()),
            $8::timestamptz, $9::timestamptz, $10::jsonb, $11::text, $12::text, $13::text
      where $5::text = ${TRIGGER.backfill}
         or not exists (select 1 from sync_jobs o
                         where o.connection_id = $2::uuid and o.job_type = $4::text and o.trigger <> ${TRIGGER.backfill}
                           and o.status in (${ACTIVE_JOBS}))
     on conflict do nothing`,
    [job.id, job.connectionId, job.tenantId, job.jobType, job.trigger, job.priority ?? 0, job.scheduledAt,
      job.window?.start ?? null, job.window?.end ?? null, job.payload ?? {}, job.idempotencyKey ?? null, job.workflowId,
      job.schedulerRunId ?? null],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * SQL: whether a job whose payload is `jobPayload` syncs every resource type a request whose
 * payload is `askedPayload` asks for. A payload's `resource_types` array names its types; without
 * one, a job syncs every type and a request asks for every type (which only a job syncing every
 * type syncs). The one statement of the rule: a running job of its type answers a sync, rather
 * than a job queued behind it, exactly when this holds.
 */
function coversResourceTypes(jobPayload: string, askedPayload: string): string {
  return `(jsonb_typeof(${jobPayload}->'resource_types') is distinct from 'array'
           or (jsonb_typeof(${askedPayload}->'resource_types') = 'array'
               and ${jobPayload}->'resource_types' @> (${askedPayload}->'resource_types')))`;
}

/**
 * Inserts a requested job (`api` or `backfill`) in one statement and answers it, or null when
 * nothing was written: its connection is not active or has an open purge, a unique index says no
 * (one queued job per connection and type, one active backfill, one job per tenant and
 * idempotency key), or a sync finds a running (or retrying) job of its type that syncs every
 * resource type it asks for (`payload.resource_types`; none: every type), which answers it. A
 * sync whose types the running job does not all sync is queued behind it: its claim waits until
 * that one has ended (`claimed_beside` of lockJobForClaim). The connection's row is read FOR
 * SHARE: a purge writes that row disabled in the transaction that records the purge (under the purge lock), so this statement either waits for
 * that transaction and then, re-reading the row, sees it disabled and writes nothing, or commits
 * first, and the purge then finds this job among the active ones it cancels. A concurrent pause or
 * disable is seen the same way. No separate transaction, purge lock or re-read is needed.
 */
export async function insertRequestedJob(db: Queryable, job: NewJob): Promise<JobRow | null> {
  const { rows } = await db.query<JobRow>(
    `with c as (
       select c.id, c.provider_slug from connections c
        where c.id = $2 and c.status = ${CONNECTION.active}
          and not exists (select 1 from connection_purges p where p.connection_id = c.id and p.status <> ${PURGE.completed})
        for share of c
     ), j as (
       insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, priority, scheduled_at,
                              window_start, window_end, payload, idempotency_key, workflow_id, scheduler_run_id)
       select $1::uuid, c.id, $3::text, $4::text, $5::text, ${JOB[INITIAL_JOB_STATUS]}, $6::int, coalesce($7::timestamptz, now()),
              $8::timestamptz, $9::timestamptz, $10::jsonb, $11::text, $12::text, $13::text from c
        where $5::text = ${TRIGGER.backfill}
           or not exists (select 1 from sync_jobs r
                           where r.connection_id = c.id and r.job_type = $4::text and r.trigger <> ${TRIGGER.backfill}
                             and r.status in (${CLAIMED_JOBS})
                             and ${coversResourceTypes('r.payload', '$10::jsonb')})
       on conflict do nothing
       returning *
     )
     select ${JOB_COLUMNS} from j join c on c.id = j.connection_id`,
    [job.id, job.connectionId, job.tenantId, job.jobType, job.trigger, job.priority ?? 0, job.scheduledAt,
      job.window?.start ?? null, job.window?.end ?? null, job.payload ?? {}, job.idempotencyKey ?? null, job.workflowId,
      job.schedulerRunId ?? null],
  );
  return rows[0] ?? null;
}

/**
 * Widens the resource types of requested job `id` while it is still queued (its claim, which
 * prepares its tasks from them, has not run): to hold `types` as well, or to every type (the
 * restriction removed) when `types` is null. The job's row, or null when it is no longer queued.
 */
export async function widenQueuedJobTypes(db: Queryable, id: string, types: string[] | null): Promise<JobRow | null> {
  const { rows } = await db.query<{ id: string }>(
    `update sync_jobs j
        set payload = case when $2::jsonb is null then j.payload - 'resource_types'
                           else jsonb_set(j.payload, '{resource_types}',
                                  (select jsonb_agg(t order by t) from (select jsonb_array_elements_text(j.payload->'resource_types') as t
                                                                        union select jsonb_array_elements_text($2::jsonb)) u)) end
      where j.id = $1 and j.status = ${JOB.queued} and j.trigger = ${TRIGGER.api} and jsonb_typeof(j.payload->'resource_types') = 'array'
      returning j.id`,
    [id, types === null ? null : JSON.stringify(types)],
  );
  return rows[0] ? findJob(db, id) : null;
}

/** The status of job `id`, or null when there is none. */
export async function findJobStatus(db: Queryable, id: string): Promise<JobStatus | null> {
  const { rows } = await db.query<{ status: JobStatus }>('select status from sync_jobs where id = $1', [id]);
  return rows[0]?.status ?? null;
}

/** The id of the job with this tenant's idempotency key, or null. */
export async function findJobIdByIdempotencyKey(db: Queryable, tenantId: string, key: string): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>('select id from sync_jobs where tenant_id = $1 and idempotency_key = $2', [tenantId, key]);
  return rows[0]?.id ?? null;
}

/** An active job: its id and status. */
export interface ActiveJob {
  id: string;
  status: ActiveJobStatus;
}

/** The active jobs of connection $1 that block a new one of trigger $2 and type $3 (`j` of `sync_jobs j`). */
const BLOCKING_JOBS = `j.connection_id = $1 and j.status in (${ACTIVE_JOBS})
        and (case when $2 = ${TRIGGER.backfill} then j.trigger = ${TRIGGER.backfill} else j.trigger <> ${TRIGGER.backfill} and j.job_type = $3 end)`;

/** The order of blocking jobs: the running one first. */
const BLOCKING_ORDER = `j.status = ${JOB.queued}, j.id`;

/**
 * The active jobs that block a new one of `trigger` and `jobType`: for a backfill the connection's
 * active backfill, otherwise its active non-backfill jobs of that type (at most one running or
 * retrying, and one queued), the running one first. Empty when none is active.
 */
export async function findBlockingJobs(db: Queryable, connectionId: string, trigger: JobTrigger, jobType: SyncMode): Promise<ActiveJob[]> {
  const { rows } = await db.query<ActiveJob>(
    `select j.id, j.status from sync_jobs j where ${BLOCKING_JOBS} order by ${BLOCKING_ORDER}`,
    [connectionId, trigger, jobType],
  );
  return rows;
}

/** A job that answers a request, as the API shows it, and whether it syncs every type the request asks for. */
export type AnsweringJob = JobRow & { covers: boolean };

/**
 * The active job that answers requested job `job` whose insert it refused, read in one statement,
 * or null when none does (the insert may be tried again): of the jobs findBlockingJobs finds, the
 * first that is queued (a sync's may not sync every type asked for: `covers` says), or the active
 * backfill, or a running (or retrying) one that syncs every type the job's payload asks for.
 */
export async function findAnsweringJob(db: Queryable, job: Pick<NewJob, 'connectionId' | 'trigger' | 'jobType' | 'payload'>): Promise<AnsweringJob | null> {
  const covers = coversResourceTypes('j.payload', '$4::jsonb');
  const { rows } = await db.query<AnsweringJob>(
    `select ${JOB_COLUMNS}, ${covers} as covers
       from sync_jobs j join connections c on c.id = j.connection_id
      where ${BLOCKING_JOBS} and (j.status = ${JOB.queued} or $2 = ${TRIGGER.backfill} or ${covers})
      order by ${BLOCKING_ORDER} limit 1`,
    [job.connectionId, job.trigger, job.jobType, job.payload ?? {}],
  );
  return rows[0] ?? null;
}

/** Whether the connection has any active job of `jobType` (backfills included). */
export async function hasActiveJobOfType(db: Queryable, connectionId: string, jobType: SyncMode): Promise<boolean> {
  const { rowCount } = await db.query(
    `select 1 from sync_jobs where connection_id = $1 and job_type = $2 and status in (${ACTIVE_JOBS})`,
    [connectionId, jobType],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Locks job `id` while it is still queued; its type, or null when it is not queued. Row locks on
 * jobs and tasks that are updated, not deleted, are FOR NO KEY UPDATE: FOR UPDATE would also block
 * the KEY SHARE lock of every insert of a row that references them (tasks, logs), a deadlock
 * waiting to happen.
 */
export async function lockQueuedJob(tx: PoolClient, id: string): Promise<{ job_type: SyncMode } | null> {
  const { rows } = await tx.query<{ job_type: SyncMode }>(`select job_type from sync_jobs where id = $1 and status = ${JOB.queued} for no key update`, [id]);
  return rows[0] ?? null;
}

/** Moves a queued job to a new time and type, and a new trigger when given. */
export async function moveQueuedJob(tx: PoolClient, id: string, scheduledAt: Date, jobType: SyncMode, trigger: JobTrigger | null): Promise<void> {
  await tx.query('update sync_jobs set scheduled_at = $2, job_type = $3, trigger = coalesce($4, trigger) where id = $1', [
    id, scheduledAt, jobType, trigger,
  ]);
}

/**
 * Cancels an active job (`onlyQueued`: only one not yet claimed) with a reason; the ended row, or
 * null when it had already finished (or been claimed).
 */
export async function cancelActiveJob(tx: PoolClient, id: string, at: Date, reason: string, onlyQueued = false): Promise<(EndedJob & { connection_id: string }) | null> {
  const change = JOB_STATUS_CHANGES.cancelActiveJob;
  const from = onlyQueued ? change.from.filter((status) => status === JOB_STATUS.queued) : change.from;
  const { rows } = await tx.query<EndedJob & { connection_id: string }>(
    `update sync_jobs set status = ${sqlList(change.to)}, finished_at = $2, last_error = $3
      where id = $1 and status in (${sqlList(from)})
      returning connection_id, status, ${endedJobColumns()}`,
    [id, at, reason],
  );
  return rows[0] ?? null;
}

/** The active jobs of a connection requested over the API (api and backfill). */
export async function findActiveRequestedJobs(db: Queryable, connectionId: string): Promise<ActiveJob[]> {
  const { rows } = await db.query<ActiveJob>(
    `select id, status from sync_jobs where connection_id = $1 and status in (${ACTIVE_JOBS}) and trigger in (${REQUESTED_JOB_TRIGGERS})`,
    [connectionId],
  );
  return rows;
}

/** A job as a claim sees it, with its connection's status. */
export interface ClaimRow {
  id: string;
  connection_id: string;
  job_type: SyncMode;
  status: JobStatus;
  workflow_id: string | null;
  retry_count: number;
  tenant_id: string;
  connection_status: ConnectionStatus;
  /**
   * Another job of the connection and type (neither a backfill) that is running or retrying: the
   * job whose end a claim of this one waits for (two jobs of a connection and type never run at
   * once). Null when there is none.
   */
  claimed_beside: string | null;
}

/**
 * SQL: the running (or retrying) job that job `job` (a row alias of `sync_jobs`) is queued behind,
 * or null: another job of its connection and type, neither a backfill. A claim of `job` waits
 * until that one has ended (two jobs of a connection and type never run at once).
 */
export function runningBeside(job: string): string {
  return `(select o.id from sync_jobs o
            where o.connection_id = ${job}.connection_id and o.job_type = ${job}.job_type and o.id <> ${job}.id
              and ${job}.trigger <> ${TRIGGER.backfill} and o.trigger <> ${TRIGGER.backfill} and o.status in (${CLAIMED_JOBS})
            limit 1)`;
}

/**
 * Locks job `id` `FOR NO KEY UPDATE SKIP LOCKED`; null when it is missing or locked by another
 * claimer. Its open tasks' rows are locked first (FOR NO KEY UPDATE, waiting for a holder), by the
 * one-time filter below: a claim its connection refuses cancels the job with those tasks, and every
 * path that writes a job's tasks and the job takes the tasks' rows first (a page's statement, the
 * reconcile tick or a cleanup failing the job, a retry, a cancel); a claim holding the job's row
 * while it waited for a task's deadlocked with them.
 */
export async function lockJobForClaim(tx: PoolClient, id: string): Promise<ClaimRow | null> {
  const { rows } = await tx.query<ClaimRow>(
    `with open_tasks as (select t.id from sync_tasks t where t.job_id = $1 and t.status in (${OPEN_TASKS}) order by t.id for no key update)
     select j.id, j.connection_id, j.job_type, j.status, j.workflow_id, j.retry_count, j.tenant_id, c.status as connection_status,
            ${runningBeside('j')} as claimed_beside
       from sync_jobs j join connections c on c.id = j.connection_id
      where j.id = $1 and (select count(*) from open_tasks) >= 0
      for no key update of j skip locked`,
    [id],
  );
  return rows[0] ?? null;
}

/** Marks a claimed job running under `workflowId` (its first start time is kept). */
export async function markJobRunning(tx: PoolClient, id: string, at: Date, workflowId: string): Promise<void> {
  const change = JOB_STATUS_CHANGES.markJobRunning;
  await tx.query(
    `update sync_jobs set status = ${sqlList(change.to)}, started_at = coalesce(started_at, $2), workflow_id = $3, retry_after = null
      where id = $1 and status in (${sqlList(change.from)})`,
    [id, at, workflowId],
  );
}

/** A running job that was just finished. */
export interface FinishedJob extends EndedJob {
  status: FinishOutcome;
  connection_id: string;
  retry_count: number;
  rate_limit_retry_count: number;
  processed_entities: string;
  failed_tasks: number;
  last_error: string | null;
}

/**
 * Ends a running job `completed` or `failed`. A job is completed only when every task of it
 * completed: one with a failed or unfinished task is marked failed, naming how many. Null when the
 * job is no longer running.
 */
export async function finishRunningJob(tx: PoolClient, id: string, outcome: FinishOutcome, at: Date, error: string | null): Promise<FinishedJob | null> {
  const change = JOB_STATUS_CHANGES.finishRunningJob;
  const { rows } = await tx.query<FinishedJob>(
    `with unfinished as (
       select count(*)::int as n from sync_tasks where job_id = $1 and status <> ${TASK.completed}
     )
     update sync_jobs
        set status = case when $2 = ${JOB.completed} and (failed_tasks > 0 or (select n from unfinished) > 0) then ${JOB.failed} else $2 end,
            finished_at = $3,
            last_error = case when $2 <> ${JOB.completed} then $4
                              when failed_tasks > 0 then failed_tasks || ' task(s) failed'
                              when (select n from unfinished) > 0 then (select n from unfinished) || ' task(s) did not complete'
                              else $4 end
      where id = $1 and status in (${sqlList(change.from)})
      returning connection_id, retry_count, rate_limit_retry_count, processed_entities, failed_tasks, status, last_error,
                ${endedJobColumns()}`,
    [id, outcome, at, error],
  );
  return rows[0] ?? null;
}

/** The ids of the connection's active scheduler jobs (queued, running or retrying). */
export async function findActiveSchedulerJobs(db: Queryable, connectionId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `select id from sync_jobs where connection_id = $1 and status in (${ACTIVE_JOBS}) and trigger in (${SCHEDULER_JOB_TRIGGERS})`,
    [connectionId],
  );
  return rows.map((r) => r.id);
}

/** The ids of the connection's queued scheduler jobs queued by runs other than `exceptRunId`. */
export async function findQueuedSchedulerJobs(db: Queryable, connectionId: string, exceptRunId: string | null): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `select id from sync_jobs
      where connection_id = $1 and status = ${JOB.queued} and trigger in (${SCHEDULER_JOB_TRIGGERS})
        and ($2::text is null or scheduler_run_id is distinct from $2)`,
    [connectionId, exceptRunId],
  );
  return rows.map((r) => r.id);
}

/** A job ended by `endLeftSchedulerJobs`: cancelled (its connection stopped) or failed as abandoned, with why. */
export type LeftJob = EndedJob & { id: string; last_error: string };

/**
 * Ends the connection's active scheduler jobs left by runs other than `exceptRunId` (every run
 * when null), in one statement that reads the connection's status itself: a queued one of a
 * connection whose status is a key of `stoppedReasons` is cancelled with that status's reason
 * (`abandoned_at` untouched); every other is failed as abandoned with `abandonedReason` and
 * `abandoned_at`. One statement because every connection run's first look runs it: an active
 * connection with nothing left behind pays one round trip, not a status read besides.
 */
export async function endLeftSchedulerJobs(
  tx: PoolClient,
  connectionId: string,
  at: Date,
  abandonedReason: string,
  exceptRunId: string | null,
  stoppedReasons: Readonly<Partial<Record<ConnectionStatus, string>>>,
): Promise<LeftJob[]> {
  const change = JOB_STATUS_CHANGES.endLeftSchedulerJobs;
  const stopped = Object.keys(stoppedReasons) as ConnectionStatus[];
  // The stopped connection's reason ($5, $6, …), null for any other status.
  const stoppedReason = stopped.length === 0 ? 'null::text' : `case c.status ${stopped.map((status, k) => `when ${sqlList([status])} then $${k + 5}::text`).join(' ')} end`;
  const cancels = `(j.status = ${JOB.queued} and ${stoppedReason} is not null)`;
  const { rows } = await tx.query<LeftJob>(
    // The left jobs' open tasks are locked before any job row (the order a page's statement takes
    // them: a lost run's activity may still store a page), by the one-time filter below.
    `with left_tasks as (
       select t.id from sync_jobs l join sync_tasks t on t.job_id = l.id
        where l.connection_id = $1 and l.status in (${sqlList(change.from)}) and l.trigger in (${SCHEDULER_JOB_TRIGGERS})
          and ($4::text is null or l.scheduler_run_id is distinct from $4) and t.status in (${OPEN_TASKS})
        for no key update of t)
     update sync_jobs j
        set status = case when ${cancels} then ${JOB.cancelled} else ${JOB.failed} end,
            finished_at = $2,
            abandoned_at = case when ${cancels} then j.abandoned_at else $2 end,
            last_error = case when ${cancels} then ${stoppedReason} else $3 end
       from connections c
      where c.id = $1 and j.connection_id = $1 and j.status in (${sqlList(change.from)})
        and j.trigger in (${SCHEDULER_JOB_TRIGGERS})
        and ($4::text is null or j.scheduler_run_id is distinct from $4)
        and (select count(*) from left_tasks) >= 0
      returning j.id, j.status, j.last_error, ${endedJobColumns('j')}`,
    [connectionId, at, abandonedReason, exceptRunId, ...stopped.map((status) => stoppedReasons[status])],
  );
  return rows;
}

/** A job just marked retrying. */
export interface RetryingJob {
  connection_id: string;
  retry_count: number;
  rate_limit_retry_count: number;
  processed_entities: string;
  provider: string;
}

/**
 * Marks a running or retrying job `retrying` until `retryAfter`, counting the attempt as a failure
 * or a rate limit (`paused` and `interrupted` count nothing). Null when the job is neither running
 * nor retrying.
 */
export async function markJobRetrying(
  tx: PoolClient,
  id: string,
  retryAfter: Date,
  error: string,
  kind: 'rate_limited' | 'failure' | 'paused' | 'interrupted',
  counts: { retryCount?: number; rateLimitRetryCount?: number } = {},
): Promise<RetryingJob | null> {
  // With the counts the caller wants after this attempt they are set (a repeated call changes
  // nothing); without them the attempt's kind adds one, as callers recorded before did.
  const change = JOB_STATUS_CHANGES.markJobRetrying;
  const { rows } = await tx.query<RetryingJob>(
    `update sync_jobs
        set status = ${sqlList(change.to)}, retry_after = $2, last_error = $3, failed_tasks = 0,
            retry_count = case when $5::int is null then retry_count + case when $4 = 'failure' then 1 else 0 end
                               else greatest(retry_count, $5::int) end,
            rate_limit_retry_count = case when $6::int is null then rate_limit_retry_count + case when $4 = 'rate_limited' then 1 else 0 end
                                          else greatest(rate_limit_retry_count, $6::int) end
      where id = $1 and status in (${sqlList(change.from)})
      returning connection_id, retry_count, rate_limit_retry_count, processed_entities,
                (select provider_slug from connections c where c.id = sync_jobs.connection_id) as provider`,
    [id, retryAfter, error, kind, counts.retryCount ?? null, counts.rateLimitRetryCount ?? null],
  );
  return rows[0] ?? null;
}

/** A job and its connection, as preparing it needs them. */
export interface PrepareRow {
  job_type: SyncMode;
  payload: Record<string, unknown> | null;
  window_start: Date | null;
  retry_count: number;
  rate_limit_retry_count: number;
  max_retries: number;
  connection_id: string;
  provider_slug: string;
  config: Record<string, unknown> | null;
  paused_until: Date | null;
}

/** Job `id` with its connection's provider, config and breaker pause at `at`; null when missing. */
export async function findJobToPrepare(db: Queryable, id: string, at: Date): Promise<PrepareRow | null> {
  const { rows } = await db.query<PrepareRow>(
    `select j.job_type, j.payload, j.window_start, j.retry_count, j.rate_limit_retry_count, j.max_retries,
            c.id as connection_id, c.provider_slug, c.config, ${pausedUntilAt('c.id', '$2')} as paused_until
       from sync_jobs j join connections c on c.id = j.connection_id where j.id = $1`,
    [id, at],
  );
  return rows[0] ?? null;
}

/**
 * Makes incremental job `id` a full one, the mode it runs in: false when its connection already has
 * another active full job (running, which a second full job must not run beside, or queued, which
 * is the full sync to come), which then stays the only one.
 */
export async function makeJobFull(tx: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await tx.query(
    `update sync_jobs j set job_type = ${MODE.full}
      where j.id = $1 and j.job_type = ${MODE.incremental}
        and not exists (select 1 from sync_jobs o
                         where o.connection_id = j.connection_id and o.job_type = ${MODE.full} and o.id <> j.id
                           and o.status in (${ACTIVE_JOBS}) and o.trigger <> ${TRIGGER.backfill})`,
    [id],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Sets a job's number of tasks and how many of them it runs at once (the places it takes of its
 * tenant's running-jobs limit).
 */
export async function setTotalTasks(tx: Queryable, id: string, total: number, parallelTasks: number): Promise<void> {
  await tx.query('update sync_jobs set total_tasks = $2, parallel_tasks = $3 where id = $1', [id, total, parallelTasks]);
}

/**
 * Adds a page's records to a job's `processed_entities`; a negative `count` takes back what a
 * restarted pass discarded.
 */
export async function addProcessedEntities(tx: Queryable, id: string, count: number): Promise<void> {
  await tx.query('update sync_jobs set processed_entities = processed_entities + $2 where id = $1', [id, count]);
}

/** Counts one more completed task on a job. */
export async function countCompletedTask(tx: Queryable, id: string): Promise<void> {
  await tx.query('update sync_jobs set completed_tasks = completed_tasks + 1 where id = $1', [id]);
}

/** Adds failed tasks to jobs: `counts[i]` to job `ids[i]`. */
export async function addFailedTasks(tx: Queryable, ids: string[], counts: number[]): Promise<void> {
  await tx.query(
    `update sync_jobs j set failed_tasks = j.failed_tasks + r.n
       from unnest($1::uuid[], $2::int[]) as r(job_id, n)
      where j.id = r.job_id`,
    [ids, counts],
  );
}

/**
 * Locks the jobs that have a `processing` task with no heartbeat since `cutoff`, in id order.
 * The reaper takes the job's row and then its tasks' (the reverse of every path that waits: tasks
 * first), which is safe only because both are SKIP LOCKED: it never waits on a lock and takes part
 * in no deadlock; FOR NO KEY UPDATE (what the later UPDATE takes anyway) does not conflict with FK
 * checks of rows being inserted for the job.
 */
export async function lockJobsWithStaleTasks(tx: PoolClient, cutoff: Date): Promise<string[]> {
  const { rows } = await tx.query<{ id: string }>(
    `select id from sync_jobs
      where id in (select job_id from sync_tasks
                    where status = ${TASK.processing} and coalesce(heartbeat_at, started_at) < $1)
      order by id
      for no key update skip locked`,
    [cutoff],
  );
  return rows.map((r) => r.id);
}

/** The jobs that have a `processing` task with no heartbeat since `cutoff`, with their workflow ids. */
export async function findJobsWithStaleTasks(db: Queryable, cutoff: Date): Promise<{ id: string; workflow_id: string | null }[]> {
  const { rows } = await db.query<{ id: string; workflow_id: string | null }>(
    `select id, workflow_id from sync_jobs
      where id in (select job_id from sync_tasks
                    where status = ${TASK.processing} and coalesce(heartbeat_at, started_at) < $1)`,
    [cutoff],
  );
  return rows;
}

/** A job failed because none of its tasks can still finish. */
export interface ReapedJob extends EndedJob {
  id: string;
  connection_id: string;
  retry_count: number;
  rate_limit_retry_count: number;
  started_at: Date | null;
  processed_entities: string;
  failed_tasks: number;
  last_error: string;
}

/** Fails each running or retrying job of `ids` that has no open task left, with its summary. */
export async function failJobsWithNoOpenTask(tx: PoolClient, ids: string[], summaries: string[], at: Date): Promise<ReapedJob[]> {
  const change = JOB_STATUS_CHANGES.failJobsWithNoOpenTask;
  const { rows } = await tx.query<ReapedJob>(
    `update sync_jobs j set status = ${sqlList(change.to)}, finished_at = $3, last_error = r.summary
       from unnest($1::uuid[], $2::text[]) as r(job_id, summary)
      where j.id = r.job_id
        and j.status in (${sqlList(change.from)})
        and not exists (select 1 from sync_tasks t where t.job_id = j.id and t.status in (${OPEN_TASKS}))
      returning j.id, j.connection_id, j.retry_count, j.rate_limit_retry_count, j.started_at, j.processed_entities, j.failed_tasks, j.last_error,
                j.status, ${endedJobColumns('j')}`,
    [ids, summaries, at],
  );
  return rows;
}

/**
 * Deletes one batch of finished jobs past `cutoff`, oldest first, with their tasks and log rows
 * (FK cascade) and their tasks' `sync_seen` rows (which have no foreign key: it would slow every
 * full sync). Records are untouched. Age is coalesce(finished_at, created_at): retention runs from
 * when a job stopped changing. `created_at < cutoff` is implied whenever a job finishes after it
 * is created and lets the scan use the created_at index; a row whose finished_at is before its
 * created_at (clock skew between workflow time and the database's now()) is kept longer, never
 * deleted early. SKIP LOCKED: a row someone holds is left for the next run. Returns how many.
 */
export async function deleteFinishedJobsBatch(db: Queryable, cutoff: Date, batchSize: number): Promise<number> {
  const { rowCount } = await db.query(
    `with doomed as (
       select id from sync_jobs
        where status in (${FINISHED_JOBS})
          and created_at < $1
          and coalesce(finished_at, created_at) < $1
        order by created_at
        limit $2
        for update skip locked
     ),
     seen as (
       delete from sync_seen s using sync_tasks t, doomed where t.job_id = doomed.id and s.task_id = t.id
     )
     delete from sync_jobs j using doomed where j.id = doomed.id`,
    [cutoff, batchSize],
  );
  return rowCount ?? 0;
}

/** An active job as the reconcile tick checks it, with its connection. */
export interface ActiveJobToCheck {
  id: string;
  status: ActiveJobStatus;
  trigger: JobTrigger;
  connection_id: string;
  tenant_id: string;
  provider_slug: string;
  connection_status: ConnectionStatus;
  /** The workflow that runs (or will run) the job: its `sync-job:` workflow, or its connection's. */
  workflow_id: string | null;
  created_at: Date;
}

/**
 * A page of at most `limit` active jobs created before `before` (younger ones may still be getting
 * their workflow), in id order: those whose id is after `afterId` (the last of the previous page).
 */
export async function findActiveJobsCreatedBefore(db: Queryable, before: Date, limit: number, afterId: string): Promise<ActiveJobToCheck[]> {
  const { rows } = await db.query<ActiveJobToCheck>(
    `select j.id, j.status, j.trigger, j.connection_id, c.tenant_id, c.provider_slug, c.status as connection_status, j.workflow_id, j.created_at
       from sync_jobs j join connections c on c.id = j.connection_id
      where j.status in (${ACTIVE_JOBS}) and j.created_at < $1 and j.id > $3
      order by j.id limit $2`,
    [before, limit, afterId],
  );
  return rows;
}

/** The current status of those of `ids` that are still active (a job that ended is absent). */
export async function findActiveJobStatuses(db: Queryable, ids: string[]): Promise<Map<string, ActiveJobStatus>> {
  const { rows } = await db.query<{ id: string; status: ActiveJobStatus }>(
    `select id, status from sync_jobs where id = any($1::uuid[]) and status in (${ACTIVE_JOBS})`,
    [ids],
  );
  return new Map(rows.map((r) => [r.id, r.status]));
}

/** Fails one active job as abandoned (no workflow runs it); the ended row, or null when it had finished. */
export async function failAbandonedJob(tx: PoolClient, id: string, at: Date, reason: string): Promise<(EndedJob & { connection_id: string }) | null> {
  const change = JOB_STATUS_CHANGES.failAbandonedJob;
  const { rows } = await tx.query<EndedJob & { connection_id: string }>(
    `update sync_jobs set status = ${sqlList(change.to)}, finished_at = $2, abandoned_at = $2, last_error = $3
      where id = $1 and status in (${sqlList(change.from)})
      returning connection_id, status, ${endedJobColumns()}`,
    [id, at, reason],
  );
  return rows[0] ?? null;
}

/** The number of active jobs by status. */
export async function countActiveJobsByStatus(db: Queryable): Promise<Map<ActiveJobStatus, number>> {
  const { rows } = await db.query<{ status: ActiveJobStatus; n: number }>(
    `select status, count(*)::int as n from sync_jobs where status in (${ACTIVE_JOBS}) group by status`,
  );
  return new Map(rows.map((r) => [r.status, r.n]));
}
