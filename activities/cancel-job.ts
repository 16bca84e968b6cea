import { cancelJobAndTasks } from '../db/events';
import { withTransaction } from '../db/transaction';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import { startDeliveriesSoon } from './webhook-deliveries';

/**
 * Marks a job that has not finished, and its open tasks, `cancelled` with a reason, and writes its
 * `sync.cancelled` webhook event. Idempotent: a finished job is left alone and false is returned.
 */
export function cancelJob(deps: ActivityDeps): Activities['cancelJob'] {
  const { pool, logger, metrics } = deps;
  return async (input) => {
    const at = new Date(input.at);
    const cancelled = await withTransaction(pool, async (tx) => {
      const job = await cancelJobAndTasks(tx, input.jobId, at, input.reason, feedCursors(deps.credentials));
      if (job) logger.info({ job_id: input.jobId, connection_id: job.connection_id, reason: input.reason }, 'sync job cancelled');
      return job;
    });
    if (!cancelled) return false;
    startDeliveriesSoon(deps, cancelled.deliveries);
    recordJobEnded(metrics, cancelled);
    return true;
  };
}

