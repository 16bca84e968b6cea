import { storableRecords } from '../../connectors/pages';
import { DEFAULT_PROVIDER_POLICY } from '../../connectors/provider-http';
import type { Connector, FetchPageInput } from '../../connectors/types';
import { countCompletedTask } from '../../db/models/jobs';
import { confirmFetched, fetchTime, listDeletionCandidates, lockChangeFeed, tombstoneUnseenRecords, upsertRecords } from '../../db/models/records';
import { forgetSeenOfTask, type SeenSetSize } from '../../db/models/seen';
import { forgetEtags, forgetEtagsBefore } from '../../db/models/provider-etags';
import { forgetOtherPartitions } from '../../db/models/state';
import { completeTask, holdTask } from '../../db/models/tasks';
import { withTransaction } from '../../db/transaction';
import type { ActivityDeps } from '../deps';
import { lockConfigForShare } from '../../db/models/connections';
import { listsAlike, TaskTakenOver, type Pass } from './pass';
import { restartIfSeenSetLost } from './seen-set';
import { selectedNow } from '../selected-now';

/**
 * Most deletion candidates one full pass asks the connector to re-check (each costs a request).
 * Candidates past them are not tombstoned by that pass when a re-checked one was found alive or
 * not answered for (unless the connector's re-check looks nothing up: see
 * `RecheckResult.listingWord`): they stay live, unseen, and the next full pass re-checks them, those
 * fetched longest ago first.
 */
export const MAX_RECHECKS = 100;

/**
 * Which unseen records a full pass may tombstone: every candidate `except` some, or `only` some.
 * With `except`, `gone` counts the candidates a re-check confirmed gone: any tombstoned beyond
 * them were tombstoned on the listing's word alone (no `recheck`, or one that looks nothing up).
 */
export type Deletable = { except: string[]; gone: number } | { only: string[] };

/**
 * The deletion step's confirmation: re-checks up to MAX_RECHECKS candidates, those fetched longest
 * ago first, with the connector's `recheck` (when it has one), stores those alive (changed, they are
 * then no candidates: written after the pass began; unchanged, noted as fetched now, so later passes
 * re-check others first), and says which it may tombstone: with a consistent listing every candidate
 * but those not confirmed gone while every candidate was re-checked, or while every one re-checked
 * was confirmed gone; otherwise (more candidates than MAX_RECHECKS and one of them alive or not
 * answered for, no consistent listing, or a pass that held a cursor) only those confirmed gone (none
 * without `recheck`). A consistent listing may still lack a record the provider has (hidden while
 * it was listed, shown again): a tombstone is a delete the feed and webhooks hand on, and one of an
 * unchanged record stands until a full pass serves it again, while a candidate left live is only
 * re-checked by a later full pass. A re-check that looks nothing up (`listingWord`) confirms the
 * listing's word, which then stands for every candidate.
 */
export async function confirmDeletions(
  deps: Pick<ActivityDeps, 'pool'>,
  connector: Connector,
  request: Omit<FetchPageInput, 'pageToken' | 'since' | 'until'>,
  target: { connectionId: string; resourceType: string; jobId: string; taskId: string; changedBefore: Date; held: boolean; readEpoch: string },
  secrets: () => readonly string[] = () => [],
): Promise<Deletable> {
  // A pass that held a cursor (the connector could not read past some time consistently) is no
  // consistent listing, whatever the connector's listing is otherwise.
  const consistent = (connector.consistentListing?.(request.config, request.resource) ?? false) && !target.held;
  if (!connector.recheck) return consistent ? { except: [], gone: 0 } : { only: [] };
  const { pool } = deps;
  // One more than are re-checked: whether any is left past the re-checks.
  const listed = await listDeletionCandidates(pool, target.connectionId, target.resourceType, target.taskId, target.changedBefore, MAX_RECHECKS + 1);
  const candidates = listed.slice(0, MAX_RECHECKS);
  const past = listed.length > MAX_RECHECKS;
  // Nothing to re-check: a consistent listing's word stands; without one nothing is confirmed gone
  // (none was looked up).
  if (candidates.length === 0) return consistent ? { except: [], gone: 0 } : { only: [] };
  // The database's clock, as a listing page's fetch time is (see `fetchTime`).
  const fetchedAt = await fetchTime(pool);
  const answer = await connector.recheck({ ...request, externalIds: candidates });
  const asked = new Set(candidates);
  // Stored as a listing page's records are: made storable, none over the record size cap (a failure
  // naming its record redacted with the run's credential values).
  const maxRecordBytes = (request.policy ?? DEFAULT_PROVIDER_POLICY).maxRecordBytes;
  const alive = storableRecords(answer.alive.filter((r) => asked.has(r.externalId)), maxRecordBytes, request.resource, secrets);
  if (alive.length > 0) {
    await withTransaction(pool, async (tx) => {
      const where = { connectionId: target.connectionId, resourceType: target.resourceType };
      // Only those the config selects now: a config change since the pass read its config may
      // have tombstoned some (a repository no longer configured), not to come back from here.
      const selected = await selectedNow(tx, connector, target.connectionId, target.resourceType, alive);
      await upsertRecords(tx, { ...where, jobId: target.jobId, fetchedAt, readEpoch: target.readEpoch }, selected);
      // Those found unchanged are noted as fetched now: the next pass re-checks the candidates
      // fetched longest ago first, so always-alive records never take every re-check.
      await confirmFetched(tx, { ...where, fetchedAt }, selected);
    });
  }
  const gone = new Set(answer.gone.filter((id) => asked.has(id)));
  // Past the re-checks, a listing's word tombstones the rest only when every candidate re-checked
  // was confirmed gone (a mass deletion: the listing's word held each time it was checked) or the
  // re-check looked nothing up; one found alive or unanswered leaves the rest live for the next
  // full pass's re-checks (a listing that lacked a record the provider has may lack more).
  const allGone = candidates.every((id) => gone.has(id));
  const trusted = consistent && (!past || allGone || answer.listingWord === true);
  return trusted ? { except: candidates.filter((id) => !gone.has(id)), gone: gone.size } : { only: [...gone] };
}

/** How a pass ended: records tombstoned (the task completed), or a lost seen-set (the pass starts again). */
export interface PassEnd {
  deleted: number;
  lost: SeenSetSize | null;
}

/**
 * Ends a pass read to its last page, in one transaction: a full pass with a complete seen-set
 * tombstones the records it may (`deletable`; none when a config change since the pass read its
 * config altered the listing or added a partition) and forgets its seen-set (a lost set sends the pass
 * back instead, deleting nothing), and one that tombstoned records no re-check confirmed gone
 * forgets every ETag of its type; the connection's own pass forgets the ETags it neither stored
 * nor confirmed and the cursors of partitions the config no longer names; the task completes.
 * All of it only while the run still holds the task (else TaskTakenOver, nothing written).
 */
export async function endPass(deps: Pick<ActivityDeps, 'pool'>, pass: Pass, deletable: Deletable): Promise<PassEnd> {
  const { input, connectionId, backfill } = pass;
  return withTransaction(deps.pool, async (tx) => {
    // Held for the transaction: no later claim can take the task over between here and the end.
    if (!(await holdTask(tx, input.taskId, pass.claim))) throw new TaskTakenOver(input.taskId);
    let deleted = 0;
    if (pass.full) {
      // Checked in the deletion's own transaction: the count holds a lock on sync_seen that a
      // TRUNCATE waits for, and a crash aborts the transaction, so the set cannot be lost
      // between this check and the delete.
      const lost = await restartIfSeenSetLost(tx, input.jobId, input.taskId);
      if (lost) return { deleted: 0, lost };
      // A config change that altered this listing (or added a partition) since the pass read its
      // config makes what the pass did not see no evidence: it tombstones nothing. Read under a
      // share lock held to the commit, so no such change commits between this check and the delete;
      // taken after the feed lock, in the order a page's store takes them.
      await lockChangeFeed(tx, connectionId);
      const current = await lockConfigForShare(tx, connectionId);
      const judged = listsAlike(pass.connector, input.resourceType, pass.task.config ?? {}, current) ? deletable : { only: [] };
      deleted = await tombstoneUnseenRecords(
        tx,
        { connectionId, resourceType: input.resourceType, taskId: input.taskId, changedBefore: pass.changedBefore },
        judged,
      );
      await forgetSeenOfTask(tx, input.taskId);
      // Records tombstoned on the listing's word alone may be alive at the provider (a listing that
      // missed them): every validator of the type goes, also those another pass stored or
      // confirmed by a 304 since this pass began, which may vouch for a page serving one of them
      // (a 304 confirms none of its records); the next incremental pass reads those pages again.
      if ('except' in judged && deleted > judged.gone) await forgetEtags(tx, connectionId, [input.resourceType]);
    }
    // Validators this complete pass neither stored nor confirmed go: no later 304 may vouch for
    // pages whose records it did not see (they may be tombstones by now).
    if (!backfill) await forgetEtagsBefore(tx, connectionId, input.resourceType, pass.passStart);
    // A partition the config no longer names loses its cursor: named again, it is read whole.
    const partitions = pass.connector.partitions?.(pass.task.config ?? {});
    if (!backfill && partitions) await forgetOtherPartitions(tx, connectionId, input.resourceType, ['', ...partitions]);
    // Held above, so still processing under this run: it completes.
    await completeTask(tx, input.taskId, deleted);
    await countCompletedTask(tx, input.jobId);
    return { deleted, lost: null };
  });
}
