// SQL of `sync_job_logs`: one row per finished attempt of a job, unique per (job, attempt), so a
// retried activity writes nothing twice.
import type { FinishedJobStatus, JOB_STATUS } from '../../policy/vocabulary';
import type { Queryable } from '../queryable';

/** One finished attempt. */
export interface AttemptLog {
  jobId: string;
  connectionId: string;
  attempt: number;
  startedAt: Date | null;
  finishedAt: Date;
  processedCount: number | string;
  failedCount: number;
  /** How the attempt ended: the job's status after it, finished or waiting to retry. */
  outcome: FinishedJobStatus | typeof JOB_STATUS.retrying;
  errorSummary: string | null;
}

/** Inserts attempt log rows; an attempt already logged is left as it is. */
export async function insertAttemptLogs(tx: Queryable, logs: AttemptLog[]): Promise<void> {
  if (logs.length === 0) return;
  await tx.query(
    `insert into sync_job_logs (job_id, connection_id, attempt, started_at, finished_at, processed_count, failed_count, outcome, error_summary)
     select * from unnest($1::uuid[], $2::uuid[], $3::int[], $4::timestamptz[], $5::timestamptz[], $6::bigint[], $7::bigint[],
                          $8::text[], $9::text[])
     on conflict (job_id, attempt) do nothing`,
    [
      logs.map((l) => l.jobId),
      logs.map((l) => l.connectionId),
      logs.map((l) => l.attempt),
      logs.map((l) => l.startedAt),
      logs.map((l) => l.finishedAt),
      logs.map((l) => l.processedCount),
      logs.map((l) => l.failedCount),
      logs.map((l) => l.outcome),
      logs.map((l) => l.errorSummary),
    ],
  );
}
