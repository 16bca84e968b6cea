import { findPauseAt } from '../db/models/breaker';
import { connectionExists, lockConnectionSkipLocked, writeNextRun } from '../db/models/connections';
import { findBlockingJobs, findJobStatus, insertJob } from '../db/models/jobs';
import { isActiveJobStatus } from '../policy/vocabulary';
import { withTransaction } from '../db/transaction';
import type { Activities, EnqueueJobResult } from '../temporal/activities';
import { syncJobWorkflowId } from '../temporal/ids';
import type { ActivityDeps } from './deps';

/** How many times an enqueue inserts its job when each job that refused it has ended when read. */
const INSERT_ATTEMPTS = 3;

/**
 * Enqueues a job in one transaction: lock the connection `FOR NO KEY UPDATE SKIP LOCKED` (locked
 * elsewhere → skip), skip it when not active or breaker-paused, insert the job unless a job of its
 * type is active (queued, running or retrying; then the existing active job, the running one first;
 * one that ended before it was read answers nothing: the insert is tried again, a few times, then
 * the answer is `locked`), and write `next_run_at` and
 * `last_jitter_seconds` into `metadata.sync` in the same transaction. No weaker lock: a page being
 * stored holds the row FOR SHARE (the enqueue then skips), but FOR KEY SHARE would let a disable
 * commit between the status check and the insert, and under FOR SHARE the metadata write waits for
 * a requested job's share lock while that request waits for this job in the one-queued-job index.
 */
export function enqueueJob(deps: ActivityDeps): Activities['enqueueJob'] {
  const { pool, logger, metrics } = deps;
  return async (input) => {
    const endTimer = metrics.tickDurationSeconds.startTimer({ operation: 'enqueue' });
    const result = await withTransaction(pool, async (tx): Promise<EnqueueJobResult & { tenantId?: string; provider?: string }> => {
      // A retry of an enqueue that already committed: the job is ours, whoever holds the row now.
      // Once ended (a retried workflow task drew the id of a job its failed attempt enqueued, and
      // that job was cancelled meanwhile) it is not: answered as an existing job, so the run looks
      // again rather than waiting for a job that never runs.
      const existing = await findJobStatus(tx, input.jobId);
      if (existing !== null) {
        return isActiveJobStatus(existing) ? { outcome: 'enqueued', jobId: input.jobId } : { outcome: 'existing', jobId: input.jobId, status: existing };
      }

      const conn = await lockConnectionSkipLocked(tx, input.connectionId);
      if (!conn) return (await connectionExists(tx, input.connectionId)) ? { outcome: 'locked' } : { outcome: 'missing' };
      if (conn.status !== 'active') return { outcome: 'inactive', status: conn.status };
      const pausedUntil = await findPauseAt(tx, input.connectionId, new Date(input.at));
      if (pausedUntil) return { outcome: 'paused', pausedUntil: pausedUntil.getTime() };

      const job = {
        id: input.jobId,
        connectionId: input.connectionId,
        tenantId: conn.tenant_id,
        jobType: input.jobType,
        trigger: input.trigger,
        scheduledAt: new Date(input.scheduledAt),
        ...(input.runId && { schedulerRunId: input.runId }),
        workflowId: input.workflowId ?? syncJobWorkflowId(input.jobId),
      };
      let inserted = false;
      for (let attempt = 0; attempt < INSERT_ATTEMPTS && !inserted; attempt++) {
        inserted = await insertJob(tx, job);
        if (inserted) continue;
        // Each statement reads the jobs anew: the one that refused the insert may have ended
        // since. An ended job answers nothing (no run waits for it): the insert is tried again.
        const [active] = await findBlockingJobs(tx, input.connectionId, input.trigger, input.jobType);
        if (active) return { outcome: 'existing', jobId: active.id, status: active.status };
      }
      // Every job that refused it had ended when read: jobs of its type are starting and ending
      // while it looks, as under a concurrent enqueue; its run looks again soon.
      if (!inserted) return { outcome: 'locked' };
      if (input.plan) await writeNextRun(tx, input.connectionId, input.plan, input.scheduleVersion);
      return { outcome: 'enqueued', jobId: input.jobId, tenantId: conn.tenant_id, provider: conn.provider_slug };
    });
    endTimer();

    const { tenantId, provider, ...answer } = result;
    if (answer.outcome === 'enqueued' && tenantId !== undefined) {
      metrics.jobsScheduled.inc({ provider, tenant_id: tenantId });
      metrics.jobs.inc({ status: 'queued', provider });
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
