import type { PoolClient } from 'pg';
import { getConnector } from '../connectors/registry';
import { findJobToPrepare, makeJobFull, setTotalTasks } from '../db/models/jobs';
import { hasAnyState } from '../db/models/state';
import { insertTasks, listTasksOfTypes } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import { policyFor } from '../policy/rate-limit';
import type { Activities, PreparedJob } from '../temporal/activities';
import { toActivityFailure } from '../services/connector-failure';
import type { ActivityDeps, RateLimitSettings } from './deps';

const MAX_PARALLEL_TASKS = 8;

/**
 * Resolves the job's mode and creates its tasks (idempotent: a retry finds the tasks it made).
 * Resource types come from the job's payload (`resource_types`) or else the connector's
 * configuration. Invalid configuration fails at once (non-retryable) with a clear message.
 */
export function prepareJob({ pool, rateLimit }: ActivityDeps): Activities['prepareJob'] {
  return async (input) => {
    try {
      return await withTransaction(pool, (tx) => prepareInTx(tx, input.jobId, new Date(input.at), rateLimit));
    } catch (err) {
      throw toActivityFailure(err);
    }
  };
}

/**
 * Preparing, inside the caller's transaction. A connector's Permanent error (invalid config) is
 * thrown before anything is written, so the caller's transaction is still good to commit.
 */
export async function prepareInTx(tx: PoolClient, jobId: string, at: Date, rateLimit: RateLimitSettings): Promise<PreparedJob> {
  const job = await findJobToPrepare(tx, jobId, at);
  if (!job) throw new Error(`job ${jobId} does not exist`);
  const requested: unknown = job.payload?.resource_types;
  const resourceTypes = Array.isArray(requested) && requested.length > 0
    ? requested.map(String)
    : getConnector(job.provider_slug).resourceTypes(job.config ?? {});
  let mode = job.job_type;
  // A connection with no cursor yet is read whole: its job runs as a full sync and is recorded as
  // one (its finish is the last full sync `full_sync_every` counts from), unless another full job
  // of the connection is active (that one detects deletions; this one, with no cursor, still reads
  // everything). A backfill fetches its window, never everything (no deletion pass), state or not.
  if (mode === 'incremental' && !job.window_start && !(await hasAnyState(tx, job.connection_id)) && (await makeJobFull(tx, jobId))) mode = 'full';
  await insertTasks(tx, jobId, resourceTypes);
  const tasks = await listTasksOfTypes(tx, jobId, resourceTypes);
  const wanted = Number(job.config?.max_parallel_tasks ?? 1);
  const parallelism = Number.isInteger(wanted) ? Math.min(Math.max(wanted, 1), MAX_PARALLEL_TASKS) : 1;
  // The tasks it runs at once each hold an activity slot: that many places of its tenant's
  // running-jobs limit, which the claim's check (last in startJob's transaction) counts.
  await setTotalTasks(tx, jobId, tasks.length, Math.max(1, Math.min(parallelism, tasks.length)));
  return {
    mode,
    parallelism,
    tasks: tasks.map((t) => ({ taskId: t.id, resourceType: t.resource_type })),
    provider: job.provider_slug,
    connectionId: job.connection_id,
    rateLimit: { policy: policyFor(job.provider_slug, rateLimit.overrides, rateLimit.defaults), retryCap: rateLimit.retryCap },
    retryCount: job.retry_count,
    rateLimitRetryCount: job.rate_limit_retry_count,
    maxRetries: job.max_retries,
    pausedUntil: job.paused_until?.getTime() ?? null,
  };
}
