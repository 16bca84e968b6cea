import type { Queryable } from './queryable';
import { JOB_COLUMNS, type JobRow } from './job-row';

/** Filters and keyset position of a jobs listing (newest first). */
export interface ListJobsInput {
  connectionId?: string;
  tenantId?: string;
  status?: string;
  jobType?: string;
  trigger?: string;
  /** The previous page's last (created_at, id). */
  before?: { createdAt: Date; id: string };
  limit: number;
}

/** One page of jobs, newest first; `limit + 1` rows are read to know if more exist. */
export async function listJobs(db: Queryable, input: ListJobsInput): Promise<{ rows: JobRow[]; more: boolean }> {
  const { rows } = await db.query<JobRow>(
    `select ${JOB_COLUMNS} from sync_jobs j join connections c on c.id = j.connection_id
      where ($1::uuid is null or j.connection_id = $1)
        and ($2::text is null or j.tenant_id = $2)
        and ($3::text is null or j.status = $3)
        and ($4::text is null or j.job_type = $4)
        and ($5::text is null or j.trigger = $5)
        and ($6::timestamptz is null or (j.created_at, j.id) < ($6, $7::uuid))
      order by j.created_at desc, j.id desc limit $8`,
    [input.connectionId ?? null, input.tenantId ?? null, input.status ?? null, input.jobType ?? null, input.trigger ?? null,
      input.before?.createdAt ?? null, input.before?.id ?? null, input.limit + 1],
  );
  return { rows: rows.slice(0, input.limit), more: rows.length > input.limit };
}
