import type { ActivityDeps } from './deps';

const DAY_MS = 86_400_000;

/** Jobs deleted per statement unless the caller says otherwise. */
export const DEFAULT_DELETE_BATCH_SIZE = 1000;

/** Input of {@link deleteOldJobs}. */
export interface DeleteOldJobsInput {
  /** The cleanup's "now" (epoch ms, from the workflow). */
  at: number;
  /** Finished jobs older than this many days are deleted. */
  retentionDays: number;
  /** Jobs per DELETE statement (default 1000). */
  batchSize?: number;
}

// One batch: finished jobs past the cutoff, oldest first. Their tasks and log rows go with them by
// FK cascade, their tasks' sync_seen rows by the statement's own delete; records are untouched
// (last_seen_job_id has no FK by design).
//
// Age is coalesce(finished_at, created_at): retention runs from when a job stopped changing, so a
// job created long ago that retried for days and finished yesterday keeps its history (status
// endpoint, logs, the planner's "last finished run") for the full retention period. created_at is
// only the fallback for finished rows without finished_at. `created_at < $1` is implied whenever
// finished_at >= created_at (a job finishes after it is created) and lets the scan use
// sync_jobs_created_at_id_idx; a row whose finished_at is before its created_at (clock skew between
// workflow time and the database's now()) is therefore kept longer, never deleted early.
//
// SKIP LOCKED: a row some transaction holds is left for the next run instead of blocking cleanup
// (and a second cleanup running at once takes other rows instead of waiting on these).
const DELETE_BATCH = `
  with doomed as (
    select id from sync_jobs
     where status in ('completed', 'failed', 'cancelled')
       and created_at < $1
       and coalesce(finished_at, created_at) < $1
     order by created_at
     limit $2
     for update skip locked
  ),
  -- sync_seen has no foreign key (it would slow every full sync): its rows go here, explicitly.
  seen as (
    delete from sync_seen s using sync_tasks t, doomed where t.job_id = doomed.id and s.task_id = t.id
  )
  delete from sync_jobs j using doomed where j.id = doomed.id`;

/**
 * Retention cleanup: deletes finished jobs (`completed`, `failed`, `cancelled`) whose
 * `coalesce(finished_at, created_at)` is before `at − retentionDays`, with their tasks and logs by
 * FK cascade and their tasks' `sync_seen` rows. Active jobs (queued, running, retrying) are never
 * deleted, however old. Deletes in batches of `batchSize`, each its own statement and transaction,
 * until a batch comes back short, so a large backlog never holds one long transaction. Returns how
 * many jobs it deleted.
 */
export function deleteOldJobs({ pool, logger }: ActivityDeps) {
  return async (input: DeleteOldJobsInput): Promise<number> => {
    const batchSize = input.batchSize ?? DEFAULT_DELETE_BATCH_SIZE;
    if (!Number.isFinite(input.retentionDays) || input.retentionDays < 0) {
      throw new RangeError(`retentionDays must be a finite number >= 0, got ${input.retentionDays}`);
    }
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new RangeError(`batchSize must be an integer >= 1, got ${batchSize}`);
    }
    const cutoff = new Date(input.at - input.retentionDays * DAY_MS);
    let deleted = 0;
    let batches = 0;
    for (;;) {
      // Autocommit: each batch commits on its own, so progress survives a failure midway.
      const result = await pool.query(DELETE_BATCH, [cutoff, batchSize]);
      const n = result.rowCount ?? 0;
      deleted += n;
      batches += 1;
      if (n < batchSize) break;
    }
    logger.info(
      { deleted, batches, retention_days: input.retentionDays, cutoff: cutoff.toISOString() },
      'old sync jobs deleted',
    );
    return deleted;
  };
}
