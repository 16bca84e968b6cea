// SQL of `sync_seen`: the ids a full pass has seen and not rewritten itself, so its final step
// deletes only what it did not see (a page's ids are added by the records upsert's own statement;
// a record the pass wrote is no deletion candidate of it, by its `synced_at`, and needs no row). The table has no foreign key
// (a per-row check would slow every full sync), so every path that ends a task removes that task's
// rows itself. It is UNLOGGED: a Postgres crash empties it,
// so `sync_tasks.seen_count` (logged) says how many rows the task's pass should find here.
import type { Queryable } from '../queryable';

/** How many ids task `taskId` has in the seen-set, and how many its pass counted in (`seen_count`). */
export interface SeenSetSize {
  stored: number;
  counted: number;
}

/**
 * The size of task `taskId`'s seen-set against its logged count. When they differ the set lost
 * rows (a crash, a promoted standby), and its pass must not delete by it.
 */
export async function seenSetSize(db: Queryable, taskId: string): Promise<SeenSetSize> {
  const { rows } = await db.query<SeenSetSize>(
    `select (select count(*) from sync_seen where task_id = $1)::int as stored,
            coalesce((select seen_count from sync_tasks where id = $1), 0) as counted`,
    [taskId],
  );
  return rows[0] ?? { stored: 0, counted: 0 };
}

/** Forgets what task `taskId` saw. */
export async function forgetSeenOfTask(tx: Queryable, taskId: string): Promise<void> {
  await tx.query('delete from sync_seen where task_id = $1', [taskId]);
}

/** Forgets what these tasks saw. */
export async function forgetSeenOfTasks(tx: Queryable, taskIds: string[]): Promise<void> {
  await tx.query('delete from sync_seen where task_id = any($1::uuid[])', [taskIds]);
}

/** Forgets what every task of job `jobId` saw. */
export async function forgetSeenOfJob(tx: Queryable, jobId: string): Promise<void> {
  await tx.query('delete from sync_seen s using sync_tasks t where t.job_id = $1 and s.task_id = t.id', [jobId]);
}
