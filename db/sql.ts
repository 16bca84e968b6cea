// Vocabulary lists as SQL literals, for statements that must name values literally: a partial
// index's predicate is matched by the planner (and by ON CONFLICT arbiters) only against literal
// values, so these statements say `status in ('queued', 'running', 'retrying')`, built here from
// the one vocabulary.
import {
  ACTIVE_JOB_STATUSES,
  FINISHED_JOB_STATUSES,
  OPEN_TASK_STATUSES,
  REQUESTED_TRIGGERS,
  SCHEDULER_TRIGGERS,
} from '../policy/vocabulary';

/** `'a', 'b'` for a list of vocabulary words (plain lower-case words only). */
export function sqlList(values: readonly string[]): string {
  for (const value of values) {
    if (!/^[a-z_]+$/.test(value)) throw new RangeError(`not a vocabulary word: ${JSON.stringify(value)}`);
  }
  return values.map((value) => `'${value}'`).join(', ');
}

/** `'queued', 'running', 'retrying'`. */
export const ACTIVE_JOBS = sqlList(ACTIVE_JOB_STATUSES);
/** `'queued'`: a job not yet claimed. */
export const QUEUED_JOBS = sqlList(['queued']);
/** `'completed', 'failed', 'cancelled'`. */
export const FINISHED_JOBS = sqlList(FINISHED_JOB_STATUSES);
/** `'pending', 'processing'`. */
export const OPEN_TASKS = sqlList(OPEN_TASK_STATUSES);
/** `'schedule', 'manual'`. */
export const SCHEDULER_JOB_TRIGGERS = sqlList(SCHEDULER_TRIGGERS);
/** `'api', 'backfill'`. */
export const REQUESTED_JOB_TRIGGERS = sqlList(REQUESTED_TRIGGERS);
