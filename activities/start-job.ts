// One of the merged steps of the lean cycle: in one transaction what two or three of the older
// activities did in one each, so a workflow can run it as one local activity.
import { ConnectorError } from '../connectors/types';
import { withTransaction } from '../db/transaction';
import { feedCursors } from '../lib/feed-cursors';
import type { Activities, PreparedJob } from '../temporal/activities';
import { afterClaim, claimInTx, claimTime } from './claim-job';
import type { ActivityDeps } from './deps';
import { prepareInTx } from './prepare-job';

/**
 * A job's start: claims it (as claimJob) and prepares it (as prepareJob) in one transaction. A
 * config its connector refuses leaves the job claimed and answers `invalid`, so the workflow
 * fails it with that message.
 */
export function startJob(deps: ActivityDeps): Activities['startJob'] {
  const { pool, rateLimit } = deps;
  return async (input) => {
    const at = claimTime(input.at);
    const outcome = await withTransaction(pool, async (tx) => {
      const claim = await claimInTx(tx, input.jobId, input.workflowId, at, feedCursors(deps.credentials), {
        defaults: deps.tenantLimits, deferLimit: true, behind: input.behindRunning ?? 'long',
      });
      if (!claim.claimed) return { claim };
      let result: { claim: typeof claim; prepared?: PreparedJob; invalid?: string };
      try {
        result = { claim, prepared: await prepareInTx(tx, input.jobId, at, rateLimit) };
      } catch (err) {
        // Thrown before preparing wrote anything: the claim still commits.
        if (!(err instanceof ConnectorError && err.kind === 'permanent')) throw err;
        result = { claim, invalid: err.message };
      }
      // The tenant's running-jobs check last: its lock is held only until the commit that follows.
      await claim.checkLimit?.();
      return result;
    });
    afterClaim(deps, input.jobId, outcome.claim);
    if (outcome.prepared) return { outcome: 'started', prepared: outcome.prepared };
    if (outcome.invalid !== undefined) return { outcome: 'invalid', error: outcome.invalid };
    return { outcome: 'not_claimable' };
  };
}
