import type { SyncMetrics } from '../lib/metrics';

/** A job that an activity's UPDATE just moved to a final status, with what its metrics need. */
export interface EndedJob {
  status: 'completed' | 'failed' | 'cancelled';
  /** The connection's provider slug: `connector_id` of `sync_jobs_total`. */
  provider: string;
  /** `started_at`, or `created_at` for a job that never started. */
  began_at: Date;
  finished_at: Date;
}

/**
 * RETURNING columns of an UPDATE that ends jobs, giving the {@link EndedJob} fields other than
 * `status`. `table` is how the UPDATE names sync_jobs (its alias, if any).
 */
export function endedJobColumns(table = 'sync_jobs'): string {
  return `coalesce(${table}.started_at, ${table}.created_at) as began_at, ${table}.finished_at,
          (select c.provider_slug from connections c where c.id = ${table}.connection_id) as provider`;
}

/**
 * Counts a job's end in `sync_jobs_total{status,connector_id}` and observes its duration in
 * `sync_job_duration_seconds{outcome}`. Call after the ending transaction committed, once per row
 * the UPDATE changed: a retried activity finds the job already ended and changes nothing, so the
 * job is counted exactly once.
 */
export function recordJobEnded(metrics: SyncMetrics, job: EndedJob): void {
  metrics.jobs.inc({ status: job.status, connector_id: job.provider });
  // Clock skew between a workflow's time and the database's created_at must not go negative.
  const seconds = Math.max(0, (job.finished_at.getTime() - job.began_at.getTime()) / 1000);
  metrics.jobDurationSeconds.observe({ outcome: job.status }, seconds);
}
