// One of the merged steps of the lean cycle: in one transaction what two or three of the older
// activities did in one each, so a workflow can run it as one local activity.
import { withTransaction } from '../db/transaction';
import { feedCursors } from '../lib/feed-cursors';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { afterFinish, finishInTx } from './finish-job';
import { recordSuccessInTx } from './record-attempt';

/**
 * A successful attempt's end: finishes the job (as finishJob) and, only when that transaction
 * marked it completed, closes the breaker and resolves alerts (as recordAttemptSuccess). A job that
 * was no longer running (ended elsewhere), or that finishing marked failed (a task failed or did
 * not complete), records no success. Returns the job's status.
 */
export function completeJob(deps: ActivityDeps): Activities['completeJob'] {
  return async (input) => {
    const finish = { jobId: input.jobId, outcome: 'completed' as const, at: input.at, startedAt: input.startedAt };
    const deliveries: string[] = [];
    const finished = await withTransaction(deps.pool, async (tx) => {
      const job = await finishInTx(tx, finish, deliveries, feedCursors(deps.credentials));
      if (job?.status === 'completed') await recordSuccessInTx(tx, input.connectionId, new Date(input.at), deliveries);
      return job;
    });
    return afterFinish(deps, finish, finished, deliveries);
  };
}
