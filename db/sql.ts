// Vocabulary words as SQL literals. Statements name status and trigger words literally (a partial
// index's predicate is matched by the planner, and by ON CONFLICT arbiters, only against literal
// values, so these statements say `status in ('queued', 'running', 'retrying')`), and every such
// literal is built here from the one vocabulary: no SQL of `db/models/` spells a word itself.
import {
  ACTIVE_JOB_STATUSES,
  CONNECTION_STATUSES,
  CREDENTIAL_KINDS,
  DELIVERY_STATUSES,
  FINISHED_JOB_STATUSES,
  JOB_STATUSES,
  JOB_TRIGGERS,
  OPEN_TASK_STATUSES,
  PURGE_STATUSES,
  RECORD_CHANGES,
  REQUESTED_TRIGGERS,
  SCHEDULER_TRIGGERS,
  SYNC_MODES,
  TASK_STATUSES,
} from '../policy/vocabulary';

/** `'a', 'b'` for a list of vocabulary words (plain lower-case words, digits after the first letter). */
export function sqlList(values: readonly string[]): string {
  for (const value of values) {
    if (!/^[a-z_][a-z0-9_]*$/.test(value)) throw new RangeError(`not a vocabulary word: ${JSON.stringify(value)}`);
  }
  return values.map((value) => `'${value}'`).join(', ');
}

/** Each word of a vocabulary list as an SQL literal under its own name: `sqlWords(['a']).a` is `'a'`. */
export function sqlWords<const T extends string>(values: readonly T[]): { readonly [K in T]: string } {
  return Object.freeze(Object.fromEntries(values.map((value) => [value, sqlList([value])]))) as { readonly [K in T]: string };
}

/** Job statuses as SQL literals: `${JOB.queued}` is `'queued'`. */
export const JOB = sqlWords(JOB_STATUSES);
/** Job triggers as SQL literals. */
export const TRIGGER = sqlWords(JOB_TRIGGERS);
/** Task statuses as SQL literals. */
export const TASK = sqlWords(TASK_STATUSES);
/** Sync modes (a job's `job_type`) as SQL literals: `${MODE.full}` is `'full'`. */
export const MODE = sqlWords(SYNC_MODES);
/** Connection statuses as SQL literals. */
export const CONNECTION = sqlWords(CONNECTION_STATUSES);
/** Credential kinds as SQL literals. */
export const CREDENTIAL = sqlWords(CREDENTIAL_KINDS);
/** Webhook delivery states as SQL literals. */
export const DELIVERY = sqlWords(DELIVERY_STATUSES);
/** Purge states as SQL literals. */
export const PURGE = sqlWords(PURGE_STATUSES);
/** Record change kinds as SQL literals. */
export const CHANGE = sqlWords(RECORD_CHANGES);

/** `'queued', 'running', 'retrying'`. */
export const ACTIVE_JOBS = sqlList(ACTIVE_JOB_STATUSES);
/** `'completed', 'failed', 'cancelled'`. */
export const FINISHED_JOBS = sqlList(FINISHED_JOB_STATUSES);
/** `'pending', 'processing'`. */
export const OPEN_TASKS = sqlList(OPEN_TASK_STATUSES);
/** `'schedule', 'manual'`. */
export const SCHEDULER_JOB_TRIGGERS = sqlList(SCHEDULER_TRIGGERS);
/** `'api', 'backfill'`. */
export const REQUESTED_JOB_TRIGGERS = sqlList(REQUESTED_TRIGGERS);
