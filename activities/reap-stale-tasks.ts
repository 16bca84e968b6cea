import { insertAttemptLogs } from '../db/models/job-logs';
import pMap from 'p-map';
import { emitJobEvents } from '../db/events';
import { addFailedTasks, failJobsWithNoOpenTask, findJobsWithStaleTasks, lockJobsWithStaleTasks } from '../db/models/jobs';
import { forgetSeenOfTasks } from '../db/models/seen';
import { reapStaleTasks as reapTasks } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import { isWorkflowRunning } from '../temporal/client';
import { loggedAttempt } from '../policy/job-lifecycle';
import { startDeliveriesSoon } from './webhook-deliveries';

/** A task `processing` with no heartbeat for 5 minutes is reaped. */
export const DEFAULT_STALE_AFTER_SECONDS = 300;

/** The `error_message` of a reaped task. */
export function staleTaskMessage(staleAfterSeconds: number): string {
  return `no heartbeat for ${staleAfterSeconds} s: the worker running it stopped`;
}

/**
 * The stale-task reaper: in one transaction, marks every `processing` task whose
 * `coalesce(heartbeat_at, started_at)` is before `at − staleAfterSeconds` as `failed` (completed_at
 * = at, a message naming the silence), adds the reaped tasks to their jobs' `failed_tasks`, and
 * fails (finished_at = at, last_error = a summary, plus a `sync_job_logs` row and its `sync.failed`
 * webhook event) each such job that is still running or retrying and has no task left pending or
 * processing. Jobs and tasks are locked `SKIP LOCKED`, so reapers running at once never reap a
 * task twice and never wait on a lock.
 *
 * A job whose workflow is still running is left to that workflow: the silent task's activity
 * times out on its heartbeat and the workflow retries or fails the job itself (a job failed behind
 * a live workflow's back would leave it nothing to act on). Only jobs whose workflow (`workflow_id`)
 * is not running, or that never had one, are reaped.
 */
export function reapStaleTasks(deps: ActivityDeps): Activities['reapStaleTasks'] {
  const { pool, logger, metrics, temporal } = deps;
  return async (input) => {
    const staleAfterSeconds = input.staleAfterSeconds ?? DEFAULT_STALE_AFTER_SECONDS;
    if (!Number.isFinite(staleAfterSeconds) || staleAfterSeconds <= 0) {
      throw new RangeError(`staleAfterSeconds must be a finite number > 0, got ${staleAfterSeconds}`);
    }
    const at = new Date(input.at);
    const cutoff = new Date(input.at - staleAfterSeconds * 1000);

    const suspects = await findJobsWithStaleTasks(pool, cutoff);
    if (suspects.length === 0) return { tasks: 0, jobs: 0 };
    const orphaned = new Set<string>();
    await pMap(suspects, async (job) => {
      if (!job.workflow_id || !(await isWorkflowRunning(temporal, job.workflow_id))) orphaned.add(job.id);
    }, { concurrency: 8 });
    if (orphaned.size === 0) return { tasks: 0, jobs: 0 };
    const outcome = await withTransaction(pool, async (tx) => {
      // A job that went stale after the check above waits for the next run.
      const candidates = (await lockJobsWithStaleTasks(tx, cutoff)).filter((id) => orphaned.has(id));
      if (candidates.length === 0) return null;
      const reaped = await reapTasks(tx, candidates, cutoff, staleTaskMessage(staleAfterSeconds), at);
      if (reaped.length === 0) return null;
      const taskIds = reaped.map((t) => t.id);
      // Paging state of a full pass that will never finish.
      await forgetSeenOfTasks(tx, taskIds);

      const resourcesByJob = new Map<string, string[]>();
      for (const task of reaped) {
        const list = resourcesByJob.get(task.job_id) ?? [];
        list.push(task.resource_type);
        resourcesByJob.set(task.job_id, list);
      }
      const jobIds = [...resourcesByJob.keys()];
      // failed_tasks mirrors the task rows, so it grows on every job that lost a task, whether or
      // not the job itself fails now.
      await addFailedTasks(tx, jobIds, jobIds.map((id) => resourcesByJob.get(id)?.length ?? 0));
      const failed = await failJobsWithNoOpenTask(
        tx,
        jobIds,
        jobIds.map((id) => jobSummary(resourcesByJob.get(id) ?? [], staleAfterSeconds)),
        at,
      );
      await insertAttemptLogs(tx, failed.map((j) => ({
        jobId: j.id,
        connectionId: j.connection_id,
        attempt: loggedAttempt(j, 'failed'),
        startedAt: j.started_at,
        finishedAt: at,
        processedCount: j.processed_entities,
        failedCount: j.failed_tasks,
        outcome: 'failed' as const,
        errorSummary: j.last_error,
      })));
      const deliveries = await emitJobEvents(tx, failed.map((j) => j.id), 'failed', at, feedCursors(deps.credentials));
      return { taskIds, jobIds, failed, deliveries };
    });

    if (!outcome) return { tasks: 0, jobs: 0 };
    startDeliveriesSoon(deps, outcome.deliveries);
    for (const job of outcome.failed) recordJobEnded(metrics, job);
    logger.warn(
      {
        task_ids: outcome.taskIds,
        job_ids: outcome.jobIds,
        failed_job_ids: outcome.failed.map((j) => j.id),
        stale_after_seconds: staleAfterSeconds,
      },
      'reaped stale sync tasks',
    );
    return { tasks: outcome.taskIds.length, jobs: outcome.failed.length };
  };
}

/** A failed job's `last_error`: which resource types stopped, in words a user can act on. */
function jobSummary(resourceTypes: string[], staleAfterSeconds: number): string {
  const names = [...resourceTypes].sort().join(', ');
  const one = resourceTypes.length === 1;
  return `${resourceTypes.length} ${one ? 'task' : 'tasks'} (${names}) sent no heartbeat for ${staleAfterSeconds} s and ${one ? 'was' : 'were'} failed: the worker running ${one ? 'it' : 'them'} stopped`;
}
