// Contract of the job workflow `sync-job:<job_id>`: one sync job requested over the API (and, in
// runs recorded before scheduled jobs ran inline, a child of its connection's workflow).
import type { JobOutcome } from '../policy/vocabulary';

/** Workflow type name of one sync job. */
export const SYNC_JOB_WORKFLOW = 'syncJobWorkflow';

/** Input of a job workflow. */
export interface SyncJobInput {
  jobId: string;
  connectionId: string;
}

/** How a job ended; `skipped` when it was not claimable (claimed elsewhere or already finished). */
export interface SyncJobResult {
  jobId: string;
  status: JobOutcome;
  error?: string;
}

/** The job workflow's signature, which clients start it by. */
export type SyncJobWorkflow = (input: SyncJobInput) => Promise<SyncJobResult>;
