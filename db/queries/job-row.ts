/** A sync job as the API shows it. */
export interface JobRow {
  id: string;
  connection_id: string;
  tenant_id: string;
  provider_slug: string;
  job_type: 'incremental' | 'full';
  trigger: 'schedule' | 'manual' | 'api' | 'backfill';
  status: 'queued' | 'running' | 'retrying' | 'completed' | 'failed' | 'cancelled';
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
  total_tasks: number;
  completed_tasks: number;
  failed_tasks: number;
  /** bigint in Postgres, read as a number (safe below 2^53). */
  processed_entities: number;
  created_at: Date;
  updated_at: Date;
}

/** The select list that produces a JobRow from `sync_jobs j join connections c`. */
export const JOB_COLUMNS = `j.id, j.connection_id, j.tenant_id, c.provider_slug, j.job_type, j.trigger, j.status, j.priority,
  j.scheduled_at, j.started_at, j.finished_at, j.window_start, j.window_end, j.payload, j.retry_count, j.max_retries,
  j.retry_after, j.last_error, j.idempotency_key, j.workflow_id, j.total_tasks, j.completed_tasks, j.failed_tasks,
  j.processed_entities::float8 as processed_entities, j.created_at, j.updated_at`;
