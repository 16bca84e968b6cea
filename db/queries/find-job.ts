import type { Queryable } from './queryable';
import { JOB_COLUMNS, type JobRow } from './job-row';

/** One task of a job as the status endpoint shows it. */
export interface TaskRow {
  resource_type: string;
  status: string;
  entity_count: number;
  deleted_count: number;
  error_message: string | null;
  started_at: Date | null;
  completed_at: Date | null;
}

/** The job with id `id`, or null. */
export async function findJob(db: Queryable, id: string): Promise<JobRow | null> {
  const { rows } = await db.query<JobRow>(
    `select ${JOB_COLUMNS} from sync_jobs j join connections c on c.id = j.connection_id where j.id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

/** The tasks of job `jobId`, by resource type. */
export async function findJobTasks(db: Queryable, jobId: string): Promise<TaskRow[]> {
  const { rows } = await db.query<TaskRow>(
    `select resource_type, status, entity_count, deleted_count, error_message, started_at, completed_at
       from sync_tasks where job_id = $1 order by resource_type`,
    [jobId],
  );
  return rows;
}
