import { withTransaction } from '../db/transaction';
import type { ActivityDeps } from './deps';
import { endedJobColumns, recordJobEnded, type EndedJob } from './job-metrics';

/** SPEC §5: a task `processing` with no heartbeat for 5 minutes is reaped. */
export const DEFAULT_STALE_AFTER_SECONDS = 300;

/** Input of {@link reapStaleTasks}. */
export interface ReapStaleTasksInput {
  /** The reaper's "now" (epoch ms, from the workflow). */
  at: number;
  /** A `processing` task whose last heartbeat (or start) is older than this is reaped (default 300). */
  staleAfterSeconds?: number;
}

/** What one reaper run did. */
export interface ReapStaleTasksResult {
  /** Tasks marked `failed`. */
  tasks: number;
  /** Jobs marked `failed` because their last open tasks were reaped. */
  jobs: number;
}

/** The `error_message` of a reaped task. */
export function staleTaskMessage(staleAfterSeconds: number): string {
  return `no heartbeat for ${staleAfterSeconds} s: the worker running it stopped`;
}

// Lock order is job, then task: the same as cancelJob and failAbandonedJobs (which update the job,
// then its tasks). Both steps use SKIP LOCKED, so the reaper never waits on a lock at all and can
// take part in no deadlock; a job or task someone else holds (another reaper, a cancellation, a
// live task writing a page) is simply left for the next run. FOR NO KEY UPDATE is what the UPDATE
// below takes anyway, and unlike FOR UPDATE it does not conflict with the FK checks of rows being
// inserted for the job (tasks, log rows).
const LOCK_CANDIDATE_JOBS = `
  select id from sync_jobs
   where id in (select job_id from sync_tasks
                 where status = 'processing' and coalesce(heartbeat_at, started_at) < $1)
   order by id
   for no key update skip locked`;

// SKIP LOCKED on the tasks too: a task whose row is locked is being written by a live worker right
// now (heartbeat or page), so it is not stale; and two reapers can never fail the same task twice.
// Under READ COMMITTED a task another reaper already failed and committed is re-checked on its new
// version by FOR UPDATE and drops out (status is no longer 'processing').
const REAP_TASKS = `
  update sync_tasks t set status = 'failed', error_message = $3, completed_at = $4
    from (select id from sync_tasks
           where job_id = any($1::uuid[]) and status = 'processing'
             and coalesce(heartbeat_at, started_at) < $2
           for update skip locked) stale
   where t.id = stale.id
  returning t.id, t.job_id, t.resource_type`;

// failed_tasks mirrors the task rows (as failTask does), so it is bumped on every job that lost a
// task, whether or not the job itself fails now.
const COUNT_FAILED_TASKS = `
  update sync_jobs j set failed_tasks = j.failed_tasks + r.n
    from unnest($1::uuid[], $2::int[]) as r(job_id, n)
   where j.id = r.job_id`;

// A running/retrying job with nothing left pending or processing can no longer finish on its own.
const FAIL_JOBS = `
  update sync_jobs j set status = 'failed', finished_at = $3, last_error = r.summary
    from unnest($1::uuid[], $2::text[]) as r(job_id, summary)
   where j.id = r.job_id
     and j.status in ('running', 'retrying')
     and not exists (select 1 from sync_tasks t
                      where t.job_id = j.id and t.status in ('pending', 'processing'))
  returning j.id, j.connection_id, j.retry_count, j.started_at, j.processed_entities, j.failed_tasks, j.last_error,
            j.status, ${endedJobColumns('j')}`;

// The finished attempt's log row, as finishJob writes it (SPEC §3: one row per finished attempt).
const LOG_ATTEMPTS = `
  insert into sync_job_logs (job_id, connection_id, attempt, started_at, finished_at, processed_count, failed_count, outcome, error_summary)
  select r.job_id, r.connection_id, r.attempt, r.started_at, $7, r.processed, r.failed, 'failed', r.summary
    from unnest($1::uuid[], $2::uuid[], $3::int[], $4::timestamptz[], $5::bigint[], $6::bigint[], $8::text[])
         as r(job_id, connection_id, attempt, started_at, processed, failed, summary)
  on conflict (job_id, attempt) do nothing`;

/**
 * Reaper of SPEC §5: in one transaction, marks every `processing` task whose
 * `coalesce(heartbeat_at, started_at)` is before `at − staleAfterSeconds` as `failed` (completed_at
 * = at, a message naming the silence), adds the reaped tasks to their jobs' `failed_tasks`, and
 * fails (finished_at = at, last_error = a summary, plus a `sync_job_logs` row) each such job that is
 * still running or retrying and has no task left pending or processing. Stale tasks are selected
 * `FOR UPDATE SKIP LOCKED`, so reapers running at once never reap a task twice. Returns the counts.
 */
export function reapStaleTasks({ pool, logger, metrics }: ActivityDeps) {
  return async (input: ReapStaleTasksInput): Promise<ReapStaleTasksResult> => {
    const staleAfterSeconds = input.staleAfterSeconds ?? DEFAULT_STALE_AFTER_SECONDS;
    if (!Number.isFinite(staleAfterSeconds) || staleAfterSeconds <= 0) {
      throw new RangeError(`staleAfterSeconds must be a finite number > 0, got ${staleAfterSeconds}`);
    }
    const at = new Date(input.at);
    const cutoff = new Date(input.at - staleAfterSeconds * 1000);

    const outcome = await withTransaction(pool, async (tx) => {
      const jobs = await tx.query<{ id: string }>(LOCK_CANDIDATE_JOBS, [cutoff]);
      if (jobs.rows.length === 0) return null;
      const reaped = await tx.query<{ id: string; job_id: string; resource_type: string }>(REAP_TASKS, [
        jobs.rows.map((j) => j.id),
        cutoff,
        staleTaskMessage(staleAfterSeconds),
        at,
      ]);
      if (reaped.rows.length === 0) return null;
      const taskIds = reaped.rows.map((t) => t.id);
      // Paging state of a full pass that will never finish (failTask does the same).
      await tx.query('delete from sync_seen where task_id = any($1::uuid[])', [taskIds]);

      const resourcesByJob = new Map<string, string[]>();
      for (const task of reaped.rows) {
        const list = resourcesByJob.get(task.job_id) ?? [];
        list.push(task.resource_type);
        resourcesByJob.set(task.job_id, list);
      }
      const jobIds = [...resourcesByJob.keys()];
      await tx.query(COUNT_FAILED_TASKS, [jobIds, jobIds.map((id) => resourcesByJob.get(id)?.length ?? 0)]);
      const failed = await tx.query<EndedJob & {
        id: string;
        connection_id: string;
        retry_count: number;
        started_at: Date | null;
        processed_entities: string;
        failed_tasks: number;
        last_error: string;
      }>(FAIL_JOBS, [jobIds, jobIds.map((id) => jobSummary(resourcesByJob.get(id) ?? [], staleAfterSeconds)), at]);
      if (failed.rows.length > 0) {
        const rows = failed.rows;
        await tx.query(LOG_ATTEMPTS, [
          rows.map((j) => j.id),
          rows.map((j) => j.connection_id),
          rows.map((j) => j.retry_count + 1),
          rows.map((j) => j.started_at),
          rows.map((j) => j.processed_entities),
          rows.map((j) => j.failed_tasks),
          at,
          rows.map((j) => j.last_error),
        ]);
      }
      return { taskIds, jobIds, failedJobIds: failed.rows.map((j) => j.id), failedJobs: failed.rows };
    });

    if (!outcome) return { tasks: 0, jobs: 0 };
    for (const job of outcome.failedJobs) recordJobEnded(metrics, job);
    logger.warn(
      {
        task_ids: outcome.taskIds,
        job_ids: outcome.jobIds,
        failed_job_ids: outcome.failedJobIds,
        stale_after_seconds: staleAfterSeconds,
      },
      'reaped stale sync tasks',
    );
    return { tasks: outcome.taskIds.length, jobs: outcome.failedJobIds.length };
  };
}

/** A failed job's `last_error`: which resource types stopped, in words a user can act on. */
function jobSummary(resourceTypes: string[], staleAfterSeconds: number): string {
  const names = [...resourceTypes].sort().join(', ');
  const one = resourceTypes.length === 1;
  return `${resourceTypes.length} ${one ? 'task' : 'tasks'} (${names}) sent no heartbeat for ${staleAfterSeconds} s and ${one ? 'was' : 'were'} failed: the worker running ${one ? 'it' : 'them'} stopped`;
}
