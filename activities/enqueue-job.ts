import { withTransaction } from '../db/transaction';
import { writeNextRun } from '../db/write-next-run';
import type { PlannedRun } from '../policy/schedule';
import type { ActivityDeps } from './deps';

/** One job to enqueue for a connection. */
export interface EnqueueJobInput {
  /** Generated in the workflow, so a retried activity finds the job it already inserted. */
  jobId: string;
  connectionId: string;
  jobType: 'incremental' | 'full';
  trigger: 'schedule' | 'manual' | 'api' | 'backfill';
  scheduledAt: number;
  /** Workflow time of the decision, used for the breaker check. */
  at: number;
  /** For scheduled runs: written to `metadata.sync` in the same transaction. */
  plan?: PlannedRun;
}

/** What happened to an enqueue. Only `enqueued` means this job row exists and is ours to run. */
export type EnqueueJobResult =
  | { outcome: 'enqueued'; jobId: string }
  | { outcome: 'existing'; jobId: string; status: string }
  | { outcome: 'locked' }
  | { outcome: 'inactive'; status: string }
  | { outcome: 'paused'; pausedUntil: number }
  | { outcome: 'missing' };

/**
 * Enqueues a job in one transaction (SPEC §4): lock the connection `FOR UPDATE SKIP LOCKED`
 * (locked elsewhere → skip), skip it when not active or breaker-paused, insert the job guarded by
 * the partial unique index (conflict → the existing active job), and write `next_run_at` and
 * `last_jitter_seconds` into `metadata.sync` in the same transaction.
 */
export function enqueueJob(deps: ActivityDeps) {
  const { pool, logger, metrics } = deps;
  return async (input: EnqueueJobInput): Promise<EnqueueJobResult> => {
    const endTimer = metrics.tickDurationMs.startTimer({ operation: 'enqueue' });
    const result = await withTransaction(pool, async (tx): Promise<EnqueueJobResult & { tenantId?: string; provider?: string }> => {
      // A retry of an enqueue that already committed: the job is ours, whoever holds the row now.
      const mine = await tx.query('select id from sync_jobs where id = $1', [input.jobId]);
      if (mine.rowCount) return { outcome: 'enqueued', jobId: input.jobId };

      const locked = await tx.query(
        `select id, tenant_id, provider_slug, status from connections where id = $1 for update skip locked`,
        [input.connectionId],
      );
      const conn = locked.rows[0];
      if (!conn) {
        const exists = await tx.query('select 1 from connections where id = $1', [input.connectionId]);
        return exists.rowCount ? { outcome: 'locked' } : { outcome: 'missing' };
      }

      if (conn.status !== 'active') return { outcome: 'inactive', status: conn.status };
      const breaker = await tx.query(
        `select max(paused_until) as paused_until from connector_failure_stats
          where connection_id = $1 and paused_until > $2`,
        [input.connectionId, new Date(input.at)],
      );
      if (breaker.rows[0].paused_until) {
        return { outcome: 'paused', pausedUntil: breaker.rows[0].paused_until.getTime() };
      }

      const inserted = await tx.query(
        `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, scheduled_at, workflow_id)
         values ($1, $2, $3, $4, $5, 'queued', $6, $7)
         on conflict (connection_id, job_type) where status in ('queued', 'running', 'retrying') and trigger <> 'backfill' do nothing
         returning id`,
        [input.jobId, input.connectionId, conn.tenant_id, input.jobType, input.trigger, new Date(input.scheduledAt),
          `sync-job:${input.jobId}`],
      );
      if (!inserted.rowCount) {
        const active = await tx.query(
          `select id, status from sync_jobs
            where connection_id = $1 and job_type = $2 and status in ('queued', 'running', 'retrying') and trigger <> 'backfill'`,
          [input.connectionId, input.jobType],
        );
        return { outcome: 'existing', jobId: active.rows[0].id, status: active.rows[0].status };
      }
      if (input.plan) await writeNextRun(tx, input.connectionId, input.plan);
      return { outcome: 'enqueued', jobId: input.jobId, tenantId: conn.tenant_id, provider: conn.provider_slug };
    });
    endTimer();

    const { tenantId, provider, ...answer } = result;
    if (answer.outcome === 'enqueued' && tenantId !== undefined) {
      metrics.jobsScheduled.inc({ provider_slug: provider, tenant_id: tenantId });
      metrics.jobs.inc({ status: 'queued', connector_id: provider });
      if (input.plan) metrics.jitterSeconds.observe(input.plan.jitterSeconds);
      const plan = input.plan;
      logger.info(
        {
          connection_id: input.connectionId,
          job_id: input.jobId,
          job_type: input.jobType,
          trigger: input.trigger,
          scheduled_at: new Date(input.scheduledAt).toISOString(),
          ...(plan && {
            mode: plan.mode,
            jitter_seconds: plan.jitterSeconds,
            base_interval_seconds: plan.baseIntervalSeconds,
            next_due_at: new Date(plan.nextDueAt).toISOString(),
            next_run_at: new Date(plan.nextRunAt).toISOString(),
            jitter_min_seconds: plan.jitterBounds.minSeconds,
            jitter_max_seconds: plan.jitterBounds.maxSeconds,
          }),
        },
        'sync job enqueued',
      );
    } else if (answer.outcome !== 'enqueued') {
      logger.info({ connection_id: input.connectionId, ...answer }, 'enqueue skipped');
    }
    return answer;
  };
}
