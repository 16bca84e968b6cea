import type { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import { fetchingAhead, pagesOf } from '../../connectors/pages';
import type { ConnectorRecord, FetchPageResult, StoredValidator } from '../../connectors/types';
import { fetchTime, upsertRecords } from '../../db/models/records';
import { confirmEtags, saveEtags } from '../../db/models/provider-etags';
import { advanceCursors, pullCursorsBack } from '../../db/models/state';
import { holdTask } from '../../db/models/tasks';
import type { Queryable } from '../../db/queryable';
import { withTransaction } from '../../db/transaction';
import { nextCursor } from '../../policy/cursor';
import { DEFAULT_BUDGET_SETTINGS } from '../../policy/rate-budget';
import { inWindow } from '../../policy/window';
import { toActivityFailure } from '../../services/connector-failure';
import type { ActivityDeps } from '../deps';
import { requestBudget } from '../../services/rate-budget';
import { confirmDeletions, type Deletable } from './deletion';
import { storeUnderCurrentConfig } from '../selected-now';
import { TaskTakenOver, type Pass, type PassProgress } from './pass';

/**
 * Reads the pass from where `progress` stands to its last page, storing each page as it comes
 * (`storePage`), then, for a full pass, confirms which unseen records it may tombstone. Every
 * error of the provider calls leaves as an activity failure redacted with the credential values
 * this run sent; a cancellation as a CancelledFailure.
 */
export async function readPass(
  deps: ActivityDeps,
  ctx: Context,
  pass: Pass,
  progress: PassProgress,
  validators: Map<string, StoredValidator> | undefined,
): Promise<Deletable> {
  const { pool, metrics, providers, connectors: settings } = deps;
  const { input, task, connectionId, connector } = pass;
  try {
    // Opened by the credential provider, in the activity that calls the provider; the shared
    // budget is keyed by the tenant and the opened credential's fingerprint (never the sealed
    // envelope, which differs per row), for an OAuth 2 grant by the grant (its tokens change
    // with each refresh).
    const budget = requestBudget({
      pool, metrics, keyring: deps.credentials, settings: settings?.rateBudget ?? DEFAULT_BUDGET_SETTINGS, maxResetSeconds: settings?.maxResetSeconds,
      tenantId: task.tenant_id, connectionId, provider: task.provider_slug, credentials: pass.source.budgetKey, config: task.config ?? {},
    });
    const context = {
      resource: input.resourceType,
      config: task.config ?? {},
      credentials: null,
      signal: ctx.cancellationSignal,
      policy: providers,
      budget,
    };
    const { cursors } = pass;
    const request = { ...context, since: pass.since, until: pass.until, ...(cursors && { cursors }), ...(validators && { validators }) };
    // The next page is fetched while this one is stored: pages are still stored one by one, in
    // order, each with the page token after it, so a retry resumes exactly as without the overlap.
    // A pass that stored pages and no next page token has stored its last page: a run resuming it
    // (its attempt ended between that page and the task's end step) reads nothing again, since a
    // null token would read from the first page and count every page twice.
    if (!progress.pagedToTheEnd()) {
      const pages = pagesOf(connector, request, progress.pageToken, { pages: progress.pages, records: progress.entityCount }, () => pass.source.secrets(), () => fetchTime(pool));
      for await (const page of fetchingAhead(pages)) {
        await storePage(deps, pass, progress, page);
      }
    }
    if (!pass.full) return { only: [] };
    return await confirmDeletions({ pool }, connector, context, {
      connectionId, resourceType: input.resourceType, jobId: input.jobId, taskId: input.taskId, changedBefore: pass.changedBefore, held: progress.holds.size > 0,
      readEpoch: task.config_epoch,
    }, () => pass.source.secrets());
  } catch (err) {
    if (err instanceof TaskTakenOver) throw err;
    if (ctx.cancellationSignal.aborted) throw new CancelledFailure('sync task cancelled');
    // Every error of the provider calls is redacted with the credential values this run sent.
    throw toActivityFailure(err, pass.source.secrets(), settings?.maxResetSeconds);
  }
}

/**
 * Stores one page atomically: its records (of a window, only those inside it), the `sync_seen`
 * ids (full mode), the task's progress with the partitions' marks and the job's progress, all in
 * the upsert's one statement, which is the page's whole transaction unless the page also has
 * ETags to save or partitions whose cursors it completed (then one transaction holds those
 * statements too); then counts it and heartbeats.
 *
 * The statement writes only while the connection's config is the one the pass read (its count of
 * config changes, read under a share lock held to the commit). After a config change (even one
 * undone since) the page is stored under the config as it is now: only the records it selects (a
 * partition or resource type it stopped selecting had its records tombstoned by the change, and
 * none of them may come back from a pass of the older config), and neither ETags nor cursors: the
 * pass read some of its pages under another config, so they vouch for nothing the next pass may
 * skip (a dropped repository named again must be read whole; a changed listing too).
 *
 * A pass of the connection's own incremental syncs moves its cursors past what it read, so it must
 * not pass what it could not store: a record the page serves (in a new version or in the one
 * stored) that a full pass's deletion step tombstoned after the page was fetched (created again
 * after that pass's listing missed it, alive all along where that listing missed it past the
 * step's re-checks, or deleted after the fetch: the page cannot tell) stays a tombstone, and the pass holds
 * each partition's cursor at the change times of those records (the statement reports them, writing
 * nothing, and the page is stored again with the holds in its marks; a cursor already past them, moved
 * by the full pass beside this one, goes back to them). The next pass reads them again,
 * fetched after the tombstone: brought back if alive (so such a page stores no ETag, which would
 * answer that read 304). A full pass's pages need no such check (no
 * other full pass runs beside it), nor a backfill's (it moves no cursor).
 */
async function storePage(deps: Pick<ActivityDeps, 'pool'>, pass: Pass, progress: PassProgress, page: FetchPageResult & { fetchedAt: Date }): Promise<void> {
  const { input, task, connectionId, connector, window, backfill } = pass;
  const records = window ? page.records.filter((r) => inWindow(r.updatedAt, window)) : page.records;
  progress.outsideWindow += page.records.length - records.length;
  progress.mark(records, page.holdCursors);
  // The partitions this page ended: those it names, and every one with the pass's last page.
  const completed = page.nextPageToken === null
    ? new Set(['', ...(connector.partitions?.(task.config ?? {}) ?? []), ...progress.highWater.keys(), ...(page.completedPartitions ?? [])])
    : new Set(page.completedPartitions ?? []);
  // The cursor belongs to the connection's own syncs: a backfill of an older window must not move
  // it (nor skip ahead past changes it did not fetch), nor store ETags.
  const etags = !backfill && page.validators?.length ? page.validators : null;
  const movesCursors = !backfill && completed.size > 0;
  // Read after the page is written: a record it could not store may hold a cursor (see above).
  const cursorsNow = () =>
    [...completed].map((p) => ({ partition: p, cursor: nextCursor(progress.highWater.get(p) ?? null, pass.passStart, progress.holds.get(p) ?? null) }));
  // Known to stand behind a later tombstone, their change times held (see above).
  const behindKnown: string[] | undefined = !pass.full && !backfill ? [] : undefined;
  const write = async (db: Queryable, stored: ConnectorRecord[], configEpoch?: string) => {
    for (;;) {
      const counts = await upsertRecords(
        db,
        {
          connectionId, resourceType: input.resourceType, jobId: input.jobId, fetchedAt: page.fetchedAt, readEpoch: task.config_epoch,
          seenBy: pass.full ? input.taskId : undefined, ...(configEpoch !== undefined && { configEpoch }), ...(behindKnown && { behindKnown }),
        },
        stored,
        { taskId: input.taskId, claim: pass.claim, nextPageToken: page.nextPageToken, records: stored.length, partitions: progress.logged() },
      );
      // Nothing was written: the ETags and cursors are not this run's to store either.
      if (!counts.held) throw new TaskTakenOver(input.taskId);
      if (!counts.behind?.length || counts.current === false) return counts;
      // Nothing was written: stored again with the cursors held at those records' change times.
      const behind = new Set(counts.behind);
      // Each such record's (partition, change time), mapped once for the marks and the cursors.
      const holds = stored
        .filter((r) => behind.has(r.externalId) && r.updatedAt !== null)
        .map((r) => ({ partition: r.partition ?? '', at: new Date(r.updatedAt!) }));
      progress.hold(holds);
      // A cursor already past them (a full pass beside this one moved it) goes back to them.
      await pullCursorsBack(db, connectionId, input.resourceType, holds);
      behindKnown!.push(...behind);
    }
  };
  const { stored, counts } = await storeUnderCurrentConfig({ connector, connectionId, resourceType: input.resourceType, records, configEpoch: task.config_epoch }, write, {
    first: (store) => etags || movesCursors
      ? withTransaction(deps.pool, async (tx) => {
        const counts = await store(tx);
        if (counts.current === false) return counts;
        // A validator vouches for its page as stored: none for a page some of whose records stand
        // behind a later tombstone (not written), else the next pass, which reads that page again
        // for them (its cursor is held there), would be answered 304 and skip them.
        // A 304's validator is only noted as confirmed, never stored again: forgotten meanwhile by a
        // full pass that tombstoned records on its listing's word, it may vouch for one of them.
        if (etags && !behindKnown?.length) await (page.notModified ? confirmEtags : saveEtags)(tx, connectionId, input.resourceType, etags);
        if (movesCursors) await advanceCursors(tx, connectionId, input.resourceType, cursorsNow());
        return counts;
      })
      : store(deps.pool),
    again: (store) => withTransaction(deps.pool, async (tx) => {
      // The task row first, then the feed lock and the config's (the order the page statement takes them).
      if (!(await holdTask(tx, input.taskId, pass.claim))) throw new TaskTakenOver(input.taskId);
      return store(tx);
    }),
  });
  progress.stored(page.nextPageToken, stored.length, counts.added + counts.updated);
}
