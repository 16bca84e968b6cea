import { openCredentials } from '../lib/credentials';
import { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import type { PoolClient } from 'pg';
import { pagesOf } from '../connectors/pages';
import { getConnector } from '../connectors/registry';
import { addProcessedEntities, countCompletedTask } from '../db/models/jobs';
import { tombstoneUnseenRecords, upsertRecords } from '../db/models/records';
import { forgetSeenOfTask, seenSetSize, type SeenSetSize } from '../db/models/seen';
import { findEtags, saveEtags } from '../db/models/provider-etags';
import { advanceCursor } from '../db/models/state';
import { completeTask, lockTaskToSync, markTaskProcessing, recordPage, restartTaskPass } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import { inWindow, type SyncWindow } from '../policy/window';
import type { Activities } from '../temporal/activities';
import { toActivityFailure } from './connector-failure';
import { requestBudget } from './rate-budget';
import { DEFAULT_BUDGET_SETTINGS } from '../policy/rate-budget';
import type { ActivityDeps } from './deps';

/**
 * How often one run of a task may start its full pass again because the seen-set was lost. Beyond
 * that the run fails, and the job's retry policy decides.
 */
const MAX_PASS_RESTARTS = 3;

/**
 * When a full pass's seen-set is incomplete (its rows in `sync_seen` differ from the logged
 * `seen_count`), sends the pass back to its first page in transaction `tx`: the paging progress,
 * the seen rows and the count go, and the job's `processed_entities` drops what the discarded pages
 * counted. Returns the sizes it found when it restarted the pass, null when the set was complete.
 */
async function restartIfSeenSetLost(tx: PoolClient, jobId: string, taskId: string): Promise<SeenSetSize | null> {
  const size = await seenSetSize(tx, taskId);
  if (size.stored === size.counted) return null;
  const discarded = await restartTaskPass(tx, taskId);
  await forgetSeenOfTask(tx, taskId);
  if (discarded > 0) await addProcessedEntities(tx, jobId, -discarded);
  return size;
}

/**
 * Syncs one resource type of a job. Claims the task (`pending → processing`; a task already
 * processing is taken over only by a retry of this same activity; a completed one answers with its
 * counts and runs nothing; a disabled connection's task is skipped), then pages through the
 * connector from where the task last stopped: each page's records, the `sync_seen` ids (full
 * mode), how many ids were new to the seen-set and the task's progress are written in one
 * transaction, and the activity heartbeats with the page token, so a retried attempt resumes after
 * the last stored page and cancellation arrives within one page. On success a full pass deletes
 * the records it did not see, the cursor moves to the largest provider `updated_at` seen, and the
 * task completes with its counts.
 *
 * An incremental backfill asks the connector for its window [start, end) and stores only the
 * records changed inside it (`policy/window.ts`), so a connector that ignores a bound still cannot
 * store a record outside; `entity_count` counts the records stored, not those dropped.
 *
 * A full pass deletes only by a complete seen-set. `sync_seen` is UNLOGGED, so a Postgres crash
 * (or a failover to a standby) empties it while the task's logged progress survives. When a full
 * pass resumes, and again in the transaction of its deletion step, the set's size is compared with
 * the task's `seen_count`; when they differ the pass starts again from its first page in this same
 * run and deletes nothing until a complete pass has a complete set. On such a restart
 * `entity_count` (and the job's `processed_entities`) count the new pass only, `written_count`
 * keeps the rows already written (re-reading an unchanged record writes nothing), and
 * `pages_done` counts from zero again.
 */
export function syncTask({ pool, logger, metrics, providers, credentials, connectors: settings }: ActivityDeps): Activities['syncTask'] {
  return async (input) => {
    const ctx = Context.current();
    const attempt = ctx.info.attempt;
    const full = input.mode === 'full';
    const claimed = await withTransaction(pool, async (tx) => {
      const task = await lockTaskToSync(tx, input.taskId);
      if (!task) return null;
      // Done by an earlier attempt of the job: answer as it ended, run nothing again.
      if (task.status === 'completed') return { task, lost: null };
      if (task.connection_status === 'disabled') return null;
      const ours = task.status === 'pending' || (task.status === 'processing' && attempt > 1);
      if (!ours) return null;
      await markTaskProcessing(tx, input.taskId);
      const lost = full && task.pages_done > 0 ? await restartIfSeenSetLost(tx, input.jobId, input.taskId) : null;
      return { task, lost };
    });
    if (!claimed) {
      // Held by an earlier attempt (locked, or processing), ended elsewhere, or its connection
      // is disabled: this attempt did not run it.
      return { status: 'skipped', entityCount: 0, writtenCount: 0, deletedCount: 0, pages: 0 };
    }
    const { task } = claimed;
    if (task.status === 'completed') {
      return { status: 'completed', entityCount: task.entity_count, writtenCount: task.written_count, deletedCount: task.deleted_count, pages: task.pages_done };
    }

    const connector = getConnector(task.provider_slug);
    const connectionId = task.connection_id;
    // A backfill never moves the cursor. An incremental backfill fetches its window [start, end)
    // instead of from the cursor (the connector's `since` and `until`) and stores only the records
    // changed inside it, whatever the connector served: a record changed at `end` belongs to the
    // next window, one without a change time to none.
    const backfill = task.window_start !== null;
    const window: SyncWindow | null =
      input.mode === 'incremental' && task.window_start !== null ? { start: task.window_start, end: task.window_end } : null;
    const since = input.mode === 'incremental' ? (window?.start ?? task.cursor) : null;
    const until = window?.end ?? null;
    let outsideWindow = 0;
    const log = logger.child({ job_id: input.jobId, task_id: input.taskId, connection_id: connectionId, resource_type: input.resourceType });
    let pageToken = task.page_token;
    let pages = task.pages_done;
    let entityCount = task.entity_count;
    let writtenCount = task.written_count;
    let highWater = task.high_water;
    let restarts = 0;
    const restart = (size: SeenSetSize, when: string) => {
      restarts += 1;
      log.warn(
        { seen_stored: size.stored, seen_counted: size.counted, pages_discarded: pages, restarts, attempt },
        `full sync task: the seen-set does not match its logged count (${size.stored} ids stored, ${size.counted} counted) ${when}; restarting the pass from its first page, deleting nothing`,
      );
      if (restarts > MAX_PASS_RESTARTS) {
        throw new Error(`full sync task: the seen-set was lost ${restarts} times in one run; giving up this attempt without deleting`);
      }
      pageToken = null;
      pages = 0;
      entityCount = 0;
      highWater = null;
      ctx.heartbeat({ pageToken, pages });
    };
    if (claimed.lost) restart(claimed.lost, 'while the task was interrupted');
    else if (pages > 0) log.info({ pages_done: pages, attempt }, 'resuming sync task after its last stored page');

    // Conditional requests (stored ETags) for the connection's own incremental passes; a backfill
    // neither uses nor stores them (its pass is bounded by a window).
    const validators = !backfill && input.mode === 'incremental' ? await findEtags(pool, connectionId, input.resourceType) : undefined;
    for (;;) {
      try {
        // Opened here, in the activity that calls the provider; the shared budget is keyed by the
        // opened credential's fingerprint (never the sealed envelope, which differs per row).
        const opened = openCredentials(credentials, connectionId, task.credentials);
        const budget = requestBudget({
          pool, metrics, settings: settings?.rateBudget ?? DEFAULT_BUDGET_SETTINGS, provider: task.provider_slug,
          credentials: opened, config: task.config ?? {},
        });
        const request = {
          resource: input.resourceType,
          since,
          until,
          config: task.config ?? {},
          credentials: opened,
          signal: ctx.cancellationSignal,
          policy: providers,
          ...(validators && { validators }),
          ...(budget && { budget }),
        };
        for await (const page of pagesOf(connector, request, pageToken, { pages, records: entityCount })) {
          const records = window ? page.records.filter((r) => inWindow(r.updatedAt, window)) : page.records;
          outsideWindow += page.records.length - records.length;
          for (const record of records) {
            const t = record.updatedAt ? new Date(record.updatedAt) : null;
            if (t && (!highWater || t > highWater)) highWater = t;
          }
          const written = await withTransaction(pool, async (tx) => {
            const { seen, ...counts } = await upsertRecords(
              tx,
              { connectionId, resourceType: input.resourceType, jobId: input.jobId, at: new Date(), seenBy: full ? input.taskId : undefined },
              records,
            );
            await recordPage(tx, input.taskId, input.jobId, { nextPageToken: page.nextPageToken, records: records.length, counts, highWater, seen });
            if (!backfill && page.validators?.length) await saveEtags(tx, connectionId, input.resourceType, page.validators);
            return counts.added + counts.updated;
          });
          pageToken = page.nextPageToken;
          pages += 1;
          entityCount += records.length;
          writtenCount += written;
          ctx.heartbeat({ pageToken, pages });
        }
      } catch (err) {
        if (ctx.cancellationSignal.aborted) throw new CancelledFailure('sync task cancelled');
        throw toActivityFailure(err);
      }

      const outcome = await withTransaction(pool, async (tx) => {
        let deleted = 0;
        if (full) {
          // Checked in the deletion's own transaction: the count holds a lock on sync_seen that a
          // TRUNCATE waits for, and a crash aborts the transaction, so the set cannot be lost
          // between this check and the delete.
          const lost = await restartIfSeenSetLost(tx, input.jobId, input.taskId);
          if (lost) return { deleted: 0, lost, completed: false };
          deleted = await tombstoneUnseenRecords(tx, connectionId, input.resourceType, input.taskId, new Date());
          await forgetSeenOfTask(tx, input.taskId);
        }
        // The cursor belongs to the connection's own syncs: a backfill of an older window must not
        // move it (nor skip ahead past changes it did not fetch). It never moves backwards.
        if (!backfill) await advanceCursor(tx, connectionId, input.resourceType, highWater);
        const completed = await completeTask(tx, input.taskId, deleted);
        if (completed) await countCompletedTask(tx, input.jobId);
        return { deleted, lost: null, completed };
      });
      if (outcome.lost) {
        restart(outcome.lost, 'before the deletion step');
        continue;
      }
      // Ended elsewhere meanwhile (reaped, cancelled): this run did not complete it.
      if (!outcome.completed) return { status: 'skipped', entityCount, writtenCount, deletedCount: outcome.deleted, pages };
      log.info(
        {
          entity_count: entityCount, written_count: writtenCount, deleted_count: outcome.deleted, pages,
          ...(window && { window_start: window.start.toISOString(), window_end: window.end?.toISOString() ?? null, outside_window: outsideWindow }),
        },
        full ? 'full sync task completed; unseen records tombstoned' : 'sync task completed',
      );
      return { status: 'completed', entityCount, writtenCount, deletedCount: outcome.deleted, pages };
    }
  };
}
