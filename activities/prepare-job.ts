import { getConnector } from '../connectors/registry';
import { withTransaction } from '../db/transaction';
import { policyFor, type RateLimitPolicy } from '../policy/rate-limit';
import { toActivityFailure } from './connector-failure';
import type { ActivityDeps } from './deps';

/** A claimed job made ready to run: its effective mode and one task per resource type. */
export interface PreparedJob {
  /** `full` also when an incremental job finds no sync_state at all for its connection. */
  mode: 'incremental' | 'full';
  tasks: { taskId: string; resourceType: string }[];
  /** How many tasks may run at once: `max_parallel_tasks` of the connection's config (1–8), default 1. */
  parallelism: number;
  provider: string;
  connectionId: string;
  /** The rate-limit policy of this provider and the cap on rate-limit retries. */
  rateLimit: { policy: RateLimitPolicy; retryCap: number };
  /** Failure retries so far and allowed (a job resumed after a worker restart keeps its count). */
  retryCount: number;
  rateLimitRetryCount: number;
  maxRetries: number;
  /** A circuit-breaker pause of the connection still in force, if any (epoch ms). */
  pausedUntil: number | null;
}

const MAX_PARALLEL_TASKS = 8;

/**
 * Resolves the job's mode and creates its tasks (idempotent: a retry finds the tasks it made).
 * Resource types come from the job's payload (`resource_types`) or else the connector's
 * configuration. Invalid configuration fails at once (non-retryable) with a clear message.
 */
export function prepareJob({ pool, rateLimit }: ActivityDeps) {
  return async (input: { jobId: string; at: number }): Promise<PreparedJob> => {
    try {
      return await withTransaction(pool, async (tx) => {
        const { rows } = await tx.query(
          `select j.job_type, j.payload, j.window_start, j.retry_count, j.rate_limit_retry_count, j.max_retries,
                  c.id as connection_id, c.provider_slug, c.config,
                  (select max(f.paused_until) from connector_failure_stats f
                    where f.connection_id = c.id and f.paused_until > $2) as paused_until
             from sync_jobs j join connections c on c.id = j.connection_id where j.id = $1`,
          [input.jobId, new Date(input.at)],
        );
        const job = rows[0];
        if (!job) throw new Error(`job ${input.jobId} does not exist`);
        const requested: unknown = job.payload?.resource_types;
        const resourceTypes = Array.isArray(requested) && requested.length > 0
          ? requested.map(String)
          : getConnector(job.provider_slug).resourceTypes(job.config ?? {});
        let mode: PreparedJob['mode'] = job.job_type;
        // A backfill fetches its window, never everything (no deletion pass), state or not.
        if (mode === 'incremental' && !job.window_start) {
          const state = await tx.query('select 1 from sync_state where connection_id = $1 limit 1', [job.connection_id]);
          if (!state.rowCount) mode = 'full';
        }
        await tx.query(
          `insert into sync_tasks (job_id, resource_type) select $1, unnest($2::text[])
           on conflict (job_id, resource_type) do nothing`,
          [input.jobId, resourceTypes],
        );
        const tasks = await tx.query<{ id: string; resource_type: string }>(
          `select id, resource_type from sync_tasks where job_id = $1 and resource_type = any($2::text[]) order by resource_type`,
          [input.jobId, resourceTypes],
        );
        await tx.query('update sync_jobs set total_tasks = $2 where id = $1', [input.jobId, tasks.rowCount]);
        const wanted = Number(job.config?.max_parallel_tasks ?? 1);
        const parallelism = Number.isInteger(wanted) ? Math.min(Math.max(wanted, 1), MAX_PARALLEL_TASKS) : 1;
        return {
          mode,
          parallelism,
          tasks: tasks.rows.map((t) => ({ taskId: t.id, resourceType: t.resource_type })),
          provider: job.provider_slug,
          connectionId: job.connection_id,
          rateLimit: { policy: policyFor(job.provider_slug, rateLimit.overrides, rateLimit.defaults), retryCap: rateLimit.retryCap },
          retryCount: job.retry_count,
          rateLimitRetryCount: job.rate_limit_retry_count,
          maxRetries: job.max_retries,
          pausedUntil: job.paused_until?.getTime() ?? null,
        };
      });
    } catch (err) {
      throw toActivityFailure(err);
    }
  };
}
