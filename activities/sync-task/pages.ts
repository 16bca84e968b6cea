import type { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import { fetchingAhead, pagesOf } from '../../connectors/pages';
import type { FetchPageResult, StoredValidator } from '../../connectors/types';
import { upsertRecords } from '../../db/models/records';
import { saveEtags } from '../../db/models/provider-etags';
import { advanceCursors } from '../../db/models/state';
import { lockConfigForShare } from '../../db/models/connections';
import type { Queryable } from '../../db/queryable';
import { withTransaction } from '../../db/transaction';
import { nextCursor } from '../../policy/cursor';
import { DEFAULT_BUDGET_SETTINGS } from '../../policy/rate-budget';
import { inWindow } from '../../policy/window';
import { toActivityFailure } from '../../services/connector-failure';
import type { ActivityDeps } from '../deps';
import { requestBudget } from '../../services/rate-budget';
import { confirmDeletions, type Deletable } from './deletion';
import { listingOf, TaskTakenOver, type Pass, type PassProgress } from './pass';

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
      ...(budget && { budget }),
    };
    const { cursors } = pass;
    const request = { ...context, since: pass.since, until: pass.until, ...(cursors && { cursors }), ...(validators && { validators }) };
    // The next page is fetched while this one is stored: pages are still stored one by one, in
    // order, each with the page token after it, so a retry resumes exactly as without the overlap.
    // A pass that stored pages and no next page token has stored its last page: a run resuming it
    // (its attempt ended between that page and the task's end step) reads nothing again, since a
    // null token would read from the first page and count every page twice.
    if (!progress.pagedToTheEnd()) {
      const pages = pagesOf(connector, request, progress.pageToken, { pages: progress.pages, records: progress.entityCount });
      for await (const page of fetchingAhead(pages)) {
        await storePage(deps, pass, progress, page);
      }
    }
    if (!pass.full) return { only: [] };
    return await confirmDeletions({ pool }, connector, context, {
      connectionId, resourceType: input.resourceType, jobId: input.jobId, taskId: input.taskId, changedBefore: pass.changedBefore, held: progress.holds.size > 0,
    });
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
  const cursors = !backfill && completed.size > 0
    ? [...completed].map((p) => ({ partition: p, cursor: nextCursor(progress.highWater.get(p) ?? null, pass.passStart, progress.holds.get(p) ?? null) }))
    : null;
  const write = async (db: Queryable) => {
    const counts = await upsertRecords(
      db,
      {
        connectionId, resourceType: input.resourceType, jobId: input.jobId, at: new Date(), fetchedAt: page.fetchedAt,
        seenBy: pass.full ? input.taskId : undefined,
      },
      records,
      { taskId: input.taskId, claim: pass.claim, nextPageToken: page.nextPageToken, records: records.length, partitions: progress.logged() },
    );
    // Nothing was written: the ETags and cursors are not this run's to store either.
    if (!counts.held) throw new TaskTakenOver(input.taskId);
    return counts.added + counts.updated;
  };
  const written = etags || cursors
    ? await withTransaction(deps.pool, async (tx) => {
      const n = await write(tx);
      // A config change that altered this listing since the pass read its config dropped the
      // listing's cursors and ETags: this pass's are the old listing's, not stored. The config is
      // read locked (FOR SHARE) until the page commits, so such a change waits or is seen.
      if (pass.listing !== undefined) {
        const current = await lockConfigForShare(tx, connectionId);
        if (current === null || listingOf(connector, current, input.resourceType) !== pass.listing) return n;
      }
      if (etags) await saveEtags(tx, connectionId, input.resourceType, etags);
      if (cursors) await advanceCursors(tx, connectionId, input.resourceType, cursors);
      return n;
    })
    : await write(deps.pool);
  progress.stored(page.nextPageToken, records.length, written);
}
