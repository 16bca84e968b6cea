// One of the merged steps of the lean cycle: in one transaction what two or three of the older
// activities did in one each, so a workflow can run it as one local activity.
import { findSchedulingRow, lockConnection, setStatusUnlessDisabled } from '../db/models/connections';
import { withTransaction } from '../db/transaction';
import { feedCursors } from '../lib/feed-cursors';
import { recordJobEnded } from '../lib/metrics';
import type { Activities } from '../temporal/activities';
import { storeLegacyScheduleChange } from './connection-settings';
import type { ActivityDeps } from './deps';
import { failAbandonedInTx, logEndedJobs } from './fail-abandoned-jobs';
import { contextOf } from './load-connection-context';
import { startDeliveriesSoon } from './webhook-deliveries';

/**
 * The start of a connection workflow's cycle: on a run's first call, end the scheduler jobs an
 * earlier run left active (failed as abandoned, or cancelled when the connection is paused or disabled); store a pending legacy schedule change and pause or resume; then
 * read the scheduling context. One transaction; the same steps as failAbandonedJobs,
 * saveSchedule, setConnectionStatus and loadConnectionContext.
 */
export function openCycle(deps: ActivityDeps): Activities['openCycle'] {
  const { pool, logger, metrics, settings } = deps;
  return async (input) => {
    const at = new Date(input.at);
    const { abandoned, deliveries, row } = await withTransaction(pool, async (tx) => {
      // A step that both ends jobs and writes the connection's row locks that row first, as a pause
      // or disable does (its row, then its queued jobs): the opposite order deadlocked with one.
      if (input.cleanup && (input.schedule || input.status)) await lockConnection(tx, input.connectionId);
      const abandoned = input.cleanup ? await failAbandonedInTx(tx, input.connectionId, at, input.runId, feedCursors(deps.credentials)) : { jobs: [], deliveries: [] };
      if (input.schedule) await storeLegacyScheduleChange(tx, input.connectionId, input.schedule, settings, logger);
      if (input.status) await setStatusUnlessDisabled(tx, input.connectionId, input.status);
      return { abandoned: abandoned.jobs, deliveries: abandoned.deliveries, row: await findSchedulingRow(tx, input.connectionId, at, settings) };
    });
    startDeliveriesSoon(deps, deliveries);
    logEndedJobs(logger, input.connectionId, abandoned);
    for (const job of abandoned) recordJobEnded(metrics, job);
    return row && contextOf(row, settings);
  };
}
