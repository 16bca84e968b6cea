// SQL of `sync_tasks`: one task per resource type of a job, with the paging progress that lets a
// retried task resume after its last stored page.
import type { PoolClient } from 'pg';
import { TASK_STATUS, type ConnectionStatus, type TaskStatus } from '../../policy/vocabulary';
import type { Queryable } from '../queryable';
import { OPEN_TASKS, sqlList, TASK } from '../sql';
import { CREDENTIALS_OF } from './connections';

/** One task of a job as the status endpoint shows it. */
export interface TaskRow {
  resource_type: string;
  status: TaskStatus;
  entity_count: number;
  added_count: number;
  updated_count: number;
  unchanged_count: number;
  deleted_count: number;
  error_message: string | null;
  started_at: Date | null;
  completed_at: Date | null;
}

/** The tasks of job `jobId`, by resource type. */
export async function findJobTasks(db: Queryable, jobId: string): Promise<TaskRow[]> {
  const { rows } = await db.query<TaskRow>(
    `select resource_type, status, entity_count, added_count, updated_count, unchanged_count, deleted_count, error_message, started_at, completed_at
       from sync_tasks where job_id = $1 order by resource_type`,
    [jobId],
  );
  return rows;
}

/** Creates one pending task per resource type; tasks that exist already are kept. */
export async function insertTasks(tx: Queryable, jobId: string, resourceTypes: string[]): Promise<void> {
  await tx.query(
    `insert into sync_tasks (job_id, resource_type) select $1, unnest($2::text[])
     on conflict (job_id, resource_type) do nothing`,
    [jobId, resourceTypes],
  );
}

/** The job's tasks of these resource types, by resource type. */
export async function listTasksOfTypes(tx: Queryable, jobId: string, resourceTypes: string[]): Promise<{ id: string; resource_type: string }[]> {
  const { rows } = await tx.query<{ id: string; resource_type: string }>(
    'select id, resource_type from sync_tasks where job_id = $1 and resource_type = any($2::text[]) order by resource_type',
    [jobId, resourceTypes],
  );
  return rows;
}

/**
 * Locks the open tasks of these jobs (FOR NO KEY UPDATE) until the transaction ends. Whatever ends
 * a job one of whose tasks may be storing a page (a run lost or cancelling) takes it before the
 * job's row: a page's statement locks its task's row first and its job's row last, so an ending
 * that held the job's row and then waited for the task's deadlocked with the page.
 */
export async function lockOpenTasksOfJobs(tx: Queryable, jobIds: readonly string[]): Promise<void> {
  await tx.query(`select 1 from sync_tasks where job_id = any($1::uuid[]) and status in (${OPEN_TASKS}) order by id for no key update`, [[...jobIds]]);
}

/** Marks a job's open tasks `cancelled` with a reason. */
export async function cancelOpenTasks(tx: Queryable, jobId: string, at: Date, reason: string): Promise<void> {
  await tx.query(
    `update sync_tasks set status = ${TASK.cancelled}, completed_at = $2, error_message = $3
      where job_id = $1 and status in (${OPEN_TASKS})`,
    [jobId, at, reason],
  );
}

/**
 * Marks the open tasks of these jobs `failed` with a reason and, in the same statement, adds them
 * to their jobs' `failed_tasks` (which mirrors the task rows); answers the ids of the tasks it
 * failed, whose seen-sets the caller forgets.
 */
export async function failOpenTasksOfJobs(tx: Queryable, jobIds: string[], at: Date, reason: string): Promise<string[]> {
  const { rows } = await tx.query<{ id: string }>(
    `with failed as (
       update sync_tasks set status = ${TASK.failed}, completed_at = $2, error_message = $3
        where job_id = any($1::uuid[]) and status in (${OPEN_TASKS})
        returning id, job_id
     ), counted as (
       update sync_jobs j set failed_tasks = j.failed_tasks + f.n
         from (select job_id, count(*)::int as n from failed group by job_id) f
        where j.id = f.job_id
     )
     select id from failed`,
    [jobIds, at, reason],
  );
  return rows.map((r) => r.id);
}

/** A pass's marks per partition: the newest change time seen (`high`), and the time its cursor may not pass (`hold`). */
export interface PartitionProgress {
  high: Record<string, string>;
  hold: Record<string, string>;
}

/** A task with its job and connection: what a task run needs, credentials included. */
export interface TaskToSync {
  status: TaskStatus;
  page_token: string | null;
  pages_done: number;
  entity_count: number;
  written_count: number;
  /** Per partition, the newest provider change time the pass has seen and where its cursor is held (ISO times). */
  partition_progress: PartitionProgress;
  /** When the task first started (its pass start); null before it ever ran. */
  started_at: Date | null;
  connection_id: string;
  /** The connection's tenant (whose rate budget its requests spend). */
  tenant_id: string;
  /** A backfill's window (see `policy/window.ts`): both null for a job without one. */
  window_start: Date | null;
  window_end: Date | null;
  provider_slug: string;
  connection_status: ConnectionStatus;
  config: Record<string, unknown> | null;
  /** As stored: a sealed envelope (or a legacy plaintext object); the activity opens it. An `oauth2` connection's are its grant's. */
  credentials: unknown;
  /** The OAuth 2 grant the credentials are of (sealed bound to its id), else null. */
  oauth_grant_id: string | null;
  deleted_count: number;
  /**
   * The connection's config changes counted when the task's pass first read its config (kept
   * when the task resumes; the connection's count now, read with `config`, before its first claim).
   */
  config_epoch: string;
}

/**
 * Locks task `taskId` `FOR NO KEY UPDATE` with what its run needs; null when missing. It waits for a
 * lock held by a run's progress write (one page's statement, or the deletion step), so a retry
 * taking over a task is never turned away by the earlier attempt's page in flight.
 */
export async function lockTaskToSync(tx: PoolClient, taskId: string): Promise<TaskToSync | null> {
  const { rows } = await tx.query<TaskToSync>(
    `select t.status, t.page_token, t.pages_done, t.entity_count, t.written_count, t.partition_progress, t.started_at, t.deleted_count,
            j.connection_id, j.window_start, j.window_end, c.tenant_id, c.provider_slug, c.status as connection_status, c.config,
            ${CREDENTIALS_OF('c', 'g')} as credentials, c.oauth_grant_id, coalesce(t.config_epoch, c.config_epoch)::text as config_epoch
       from sync_tasks t
       join sync_jobs j on j.id = t.job_id
       join connections c on c.id = j.connection_id
       left join oauth_grants g on g.id = c.oauth_grant_id
      where t.id = $1 for no key update of t`,
    [taskId],
  );
  return rows[0] ?? null;
}

/**
 * Marks a task `processing` (keeping its first start time), beats its heartbeat and gives it a new
 * claim token; returns its start time and the token, which this run's every progress write names
 * (`holdTask`, the page statement), so a run whose task a later claim took over writes nothing more.
 */
export async function markTaskProcessing(tx: Queryable, taskId: string, configEpoch: string): Promise<{ startedAt: Date; claim: string }> {
  const { rows } = await tx.query<{ started_at: Date; claim: string }>(
    `update sync_tasks set status = ${TASK.processing}, started_at = coalesce(started_at, now()), config_epoch = coalesce(config_epoch, $2::bigint),
            heartbeat_at = now(), claim = gen_random_uuid()
      where id = $1 returning started_at, claim`,
    [taskId, configEpoch],
  );
  return { startedAt: rows[0]!.started_at, claim: rows[0]!.claim };
}

/**
 * Locks task `taskId` for the rest of transaction `tx` (`FOR NO KEY UPDATE`, waiting for a claim in
 * progress) when it is still `processing` under claim `claim`; false when another claim took it
 * over or it ended meanwhile (the run then writes nothing more).
 */
export async function holdTask(tx: PoolClient, taskId: string, claim: string): Promise<boolean> {
  const { rowCount } = await tx.query(
    `select 1 from sync_tasks where id = $1 and claim = $2 and status = ${TASK.processing} for no key update`,
    [taskId, claim],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Sends task `taskId`'s pass back to its first page: no page token, no pages, nothing seen or
 * counted, no high-water mark. `written_count`, `added_count` and `updated_count` stay (those rows
 * were written); `unchanged_count` counts the new pass only. Returns the
 * `entity_count` it discarded, so the job's progress can drop it too.
 */
export async function restartTaskPass(tx: Queryable, taskId: string): Promise<number> {
  const { rows } = await tx.query<{ discarded: number }>(
    `update sync_tasks t set page_token = null, pages_done = 0, entity_count = 0, seen_count = 0, high_water = null, partition_progress = '{"high": {}, "hold": {}}', unchanged_count = 0,
            heartbeat_at = now()
       from (select id, entity_count from sync_tasks where id = $1 for update) old
      where t.id = old.id
     returning old.entity_count as discarded`,
    [taskId],
  );
  return rows[0]?.discarded ?? 0;
}

/** Completes a processing task with its deletion count; false when it was not processing. */
export async function completeTask(tx: Queryable, taskId: string, deleted: number): Promise<boolean> {
  const { rowCount } = await tx.query(
    `update sync_tasks set status = ${TASK.completed}, deleted_count = $2, completed_at = now(), heartbeat_at = now()
      where id = $1 and status = ${TASK.processing}`,
    [taskId, deleted],
  );
  return (rowCount ?? 0) > 0;
}

/** Fails an open task with its error; false when it had already finished. */
export async function failTask(tx: Queryable, taskId: string, error: string): Promise<boolean> {
  const { rowCount } = await tx.query(
    `update sync_tasks set status = ${TASK.failed}, error_message = $2, completed_at = now()
      where id = $1 and status in (${OPEN_TASKS})`,
    [taskId, error],
  );
  return (rowCount ?? 0) > 0;
}

/** Puts a job's unfinished tasks back to `pending` for its next attempt (their page progress stays). */
export async function reopenTasksForRetry(tx: Queryable, jobId: string, error: string): Promise<void> {
  await tx.query(
    `update sync_tasks set status = ${TASK.pending}, error_message = $2
      where job_id = $1 and status in (${sqlList([TASK_STATUS.processing, TASK_STATUS.failed])})`,
    [jobId, error],
  );
}

/** A task failed by the reaper. */
export interface ReapedTask {
  id: string;
  job_id: string;
  resource_type: string;
}

/**
 * Fails the `processing` tasks of these jobs silent since `cutoff`. SKIP LOCKED: a task whose row
 * is locked is being written by a live worker right now (heartbeat or page), so it is not stale,
 * and two reapers never fail the same task twice.
 */
export async function reapStaleTasks(tx: PoolClient, jobIds: string[], cutoff: Date, message: string, at: Date): Promise<ReapedTask[]> {
  const { rows } = await tx.query<ReapedTask>(
    `update sync_tasks t set status = ${TASK.failed}, error_message = $3, completed_at = $4
       from (select id from sync_tasks
              where job_id = any($1::uuid[]) and status = ${TASK.processing}
                and coalesce(heartbeat_at, started_at) < $2
              for update skip locked) stale
      where t.id = stale.id
     returning t.id, t.job_id, t.resource_type`,
    [jobIds, cutoff, message, at],
  );
  return rows;
}
