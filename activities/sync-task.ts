import { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import type { PoolClient } from 'pg';
import { pagesOf } from '../connectors/pages';
import { getConnector } from '../connectors/registry';
import { addProcessedEntities, countCompletedTask } from '../db/models/jobs';
import { listDeletionCandidates, tombstoneUnseenRecords, upsertRecords } from '../db/models/records';
import { forgetSeenOfTask, seenSetSize, type SeenSetSize } from '../db/models/seen';
import { findEtags, forgetEtagsBefore, saveEtags } from '../db/models/provider-etags';
import { advanceCursors, findCursors, forgetOtherPartitions } from '../db/models/state';
import { completeTask, lockTaskToSync, markTaskProcessing, recordPage, restartTaskPass } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import { inWindow, type SyncWindow } from '../policy/window';
import { CURSOR_CLOCK_SKEW_MS, nextCursor } from '../policy/cursor';
import type { Connector, FetchPageInput } from '../connectors/types';
import type { Activities } from '../temporal/activities';
import { toActivityFailure } from '../services/connector-failure';
import { credentialProvider, withCurrentCredential } from './credential-provider';
import { requestBudget } from '../services/rate-budget';
import { DEFAULT_BUDGET_SETTINGS } from '../policy/rate-budget';
import type { ActivityDeps } from './deps';

/**
 * How often one run of a task may start its full pass again because the seen-set was lost. Beyond
 * that the run fails, and the job's retry policy decides.
 */
const MAX_PASS_RESTARTS = 3;

/** Most deletion candidates one full pass asks the connector to re-check (each costs a request). */
export const MAX_RECHECKS = 100;

/**
 * The deletion step's confirmation: re-checks up to MAX_RECHECKS candidates with the connector's
 * `recheck` (when it has one), stores those alive (they are then no candidates: written after the
 * pass began), and says which it may tombstone: with a consistent listing every candidate but
 * those not confirmed gone; without one (or when the pass held a cursor) only those confirmed gone
 * (none without `recheck`).
 */
async function confirmDeletions(
  deps: Pick<ActivityDeps, 'pool'>,
  connector: Connector,
  request: Omit<FetchPageInput, 'pageToken' | 'since' | 'until'>,
  target: { connectionId: string; resourceType: string; jobId: string; taskId: string; changedBefore: Date; held: boolean },
): Promise<{ except: string[] } | { only: string[] }> {
  // A pass that held a cursor (the connector could not read past some time consistently) is no
  // consistent listing, whatever the connector's listing is otherwise.
  const consistent = (connector.consistentListing?.(request.config, request.resource) ?? false) && !target.held;
  if (!connector.recheck) return consistent ? { except: [] } : { only: [] };
  const { pool } = deps;
  const candidates = await listDeletionCandidates(pool, target.connectionId, target.resourceType, target.taskId, target.changedBefore, MAX_RECHECKS);
  if (candidates.length === 0) return { except: [] };
  const fetchedAt = new Date();
  const answer = await connector.recheck({ ...request, externalIds: candidates });
  const asked = new Set(candidates);
  const alive = answer.alive.filter((r) => asked.has(r.externalId));
  if (alive.length > 0) {
    await withTransaction(pool, (tx) =>
      upsertRecords(tx, { connectionId: target.connectionId, resourceType: target.resourceType, jobId: target.jobId, at: new Date(), fetchedAt }, alive),
    );
  }
  const gone = new Set(answer.gone.filter((id) => asked.has(id)));
  return consistent ? { except: candidates.filter((id) => !gone.has(id)) } : { only: [...gone] };
}

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
 * mode), how many ids were new to the seen-set, the task's progress (with the newest change time
 * seen per partition) and the cursors of the partitions the page completed are written in one
 * transaction, and the activity heartbeats with the page token, so a retried attempt resumes after
 * the last stored page and cancellation arrives within one page. On success a full pass deletes
 * the records it did not see (only as far as the connector's listing or its re-check confirms
 * them gone) and the task completes with its counts.
 *
 * Cursors are per partition (see connectors/types.ts): an incremental pass gives the connector
 * every partition's cursor, and a partition read to its end moves its own cursor to
 * min(newest change time seen there, task start − clock skew), never backwards.
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
export function syncTask(deps: ActivityDeps): Activities['syncTask'] {
  const { pool, logger, metrics, providers, connectors: settings } = deps;
  return async (input) => {
    const ctx = Context.current();
    const attempt = ctx.info.attempt;
    const full = input.mode === 'full';
    const claimed = await withTransaction(pool, async (tx) => {
      const task = await lockTaskToSync(tx, input.taskId);
      if (!task) return null;
      // Done by an earlier attempt of the job: answer as it ended, run nothing again.
      if (task.status === 'completed') return { task, lost: null, startedAt: task.started_at ?? new Date() };
      if (task.connection_status === 'disabled') return null;
      const ours = task.status === 'pending' || (task.status === 'processing' && attempt > 1);
      if (!ours) return null;
      const startedAt = await markTaskProcessing(tx, input.taskId);
      const lost = full && task.pages_done > 0 ? await restartIfSeenSetLost(tx, input.jobId, input.taskId) : null;
      return { task, lost, startedAt };
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

    const connectionId = task.connection_id;
    // The connector asks for the current credential with every request (an OAuth 2 token is
    // refreshed near its expiry and once after a 401); it never sees how it was obtained.
    const source = credentialProvider(deps, connectionId, task.credentials);
    const connector = withCurrentCredential(getConnector(task.provider_slug), source);
    // A backfill never moves the cursor. An incremental backfill fetches its window [start, end)
    // instead of from the cursor (the connector's `since` and `until`) and stores only the records
    // changed inside it, whatever the connector served: a record changed at `end` belongs to the
    // next window, one without a change time to none.
    const backfill = task.window_start !== null;
    const window: SyncWindow | null =
      input.mode === 'incremental' && task.window_start !== null ? { start: task.window_start, end: task.window_end } : null;
    // An incremental pass of the connection's own (no window) starts each partition at its cursor.
    const cursors = input.mode === 'incremental' && !window ? await findCursors(pool, connectionId, input.resourceType) : undefined;
    const since = input.mode === 'incremental' ? (window?.start ?? cursors?.get('') ?? null) : null;
    const until = window?.end ?? null;
    // The pass start: the task's first start (a resumed task keeps it), which caps every cursor.
    const passStart = claimed.startedAt;
    // A record the provider changed at or after the pass start (less the clock skew) was alive
    // during the pass: the deletion step never judges it.
    const changedBefore = new Date(passStart.getTime() - CURSOR_CLOCK_SKEW_MS);
    let outsideWindow = 0;
    const log = logger.child({ job_id: input.jobId, task_id: input.taskId, connection_id: connectionId, resource_type: input.resourceType });
    let pageToken = task.page_token;
    let pages = task.pages_done;
    let entityCount = task.entity_count;
    let writtenCount = task.written_count;
    const marks = (field: 'high' | 'hold') => new Map(Object.entries(task.partition_progress?.[field] ?? {}).map(([p, t]) => [p, new Date(t)]));
    const highWater = marks('high');
    const holds = marks('hold');
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
      highWater.clear();
      holds.clear();
      ctx.heartbeat({ pageToken, pages });
    };
    if (claimed.lost) restart(claimed.lost, 'while the task was interrupted');
    else if (pages > 0) log.info({ pages_done: pages, attempt }, 'resuming sync task after its last stored page');

    // Conditional requests (stored ETags) for the connection's own incremental passes; a backfill
    // neither uses nor stores them (its pass is bounded by a window).
    const validators = !backfill && input.mode === 'incremental' ? await findEtags(pool, connectionId, input.resourceType) : undefined;
    for (;;) {
      let deletable: { except: string[] } | { only: string[] } = { only: [] };
      try {
        // Opened by the credential provider, in the activity that calls the provider; the shared
        // budget is keyed by the tenant and the opened credential's fingerprint (never the sealed
        // envelope, which differs per row), for an OAuth 2 grant by the grant (its tokens change
        // with each refresh).
        const budget = requestBudget({
          pool, metrics, keyring: deps.credentials, settings: settings?.rateBudget ?? DEFAULT_BUDGET_SETTINGS, maxResetSeconds: settings?.maxResetSeconds,
          tenantId: task.tenant_id, connectionId, provider: task.provider_slug, credentials: source.budgetKey, config: task.config ?? {},
        });
        const context = {
          resource: input.resourceType,
          config: task.config ?? {},
          credentials: null,
          signal: ctx.cancellationSignal,
          policy: providers,
          ...(budget && { budget }),
        };
        const request = { ...context, since, until, ...(cursors && { cursors }), ...(validators && { validators }) };
        for await (const page of pagesOf(connector, request, pageToken, { pages, records: entityCount })) {
          const records = window ? page.records.filter((r) => inWindow(r.updatedAt, window)) : page.records;
          outsideWindow += page.records.length - records.length;
          for (const record of records) {
            const t = record.updatedAt ? new Date(record.updatedAt) : null;
            const partition = record.partition ?? '';
            const seen = highWater.get(partition);
            if (t && !Number.isNaN(t.getTime()) && (!seen || t > seen)) highWater.set(partition, t);
          }
          for (const { partition, at } of page.holdCursors ?? []) {
            const t = new Date(at);
            const held = holds.get(partition);
            if (!Number.isNaN(t.getTime()) && (!held || t < held)) holds.set(partition, t);
          }
          // The partitions this page ended: those it names, and every one with the pass's last page.
          const completed = page.nextPageToken === null
            ? new Set(['', ...(connector.partitions?.(task.config ?? {}) ?? []), ...highWater.keys(), ...(page.completedPartitions ?? [])])
            : new Set(page.completedPartitions ?? []);
          const written = await withTransaction(pool, async (tx) => {
            const { seen, ...counts } = await upsertRecords(
              tx,
              {
                connectionId, resourceType: input.resourceType, jobId: input.jobId, at: new Date(), fetchedAt: page.fetchedAt,
                seenBy: full ? input.taskId : undefined,
              },
              records,
            );
            const iso = (m: Map<string, Date>) => Object.fromEntries([...m].map(([p, t]) => [p, t.toISOString()]));
            const progress = { high: iso(highWater), hold: iso(holds) };
            await recordPage(tx, input.taskId, input.jobId, { nextPageToken: page.nextPageToken, records: records.length, counts, progress, seen });
            if (!backfill && page.validators?.length) await saveEtags(tx, connectionId, input.resourceType, page.validators);
            // The cursor belongs to the connection's own syncs: a backfill of an older window must
            // not move it (nor skip ahead past changes it did not fetch).
            if (!backfill && completed.size > 0) {
              const moved = [...completed].map((p) => ({ partition: p, cursor: nextCursor(highWater.get(p) ?? null, passStart, holds.get(p) ?? null) }));
              await advanceCursors(tx, connectionId, input.resourceType, moved);
            }
            return counts.added + counts.updated;
          });
          pageToken = page.nextPageToken;
          pages += 1;
          entityCount += records.length;
          writtenCount += written;
          ctx.heartbeat({ pageToken, pages });
        }
        if (full) {
          deletable = await confirmDeletions({ pool }, connector, context, {
            connectionId, resourceType: input.resourceType, jobId: input.jobId, taskId: input.taskId, changedBefore, held: holds.size > 0,
          });
        }
      } catch (err) {
        if (ctx.cancellationSignal.aborted) throw new CancelledFailure('sync task cancelled');
        // Every error of the provider calls is redacted with the credential values this run sent.
        throw toActivityFailure(err, source.secrets(), settings?.maxResetSeconds);
      }

      const outcome = await withTransaction(pool, async (tx) => {
        let deleted = 0;
        if (full) {
          // Checked in the deletion's own transaction: the count holds a lock on sync_seen that a
          // TRUNCATE waits for, and a crash aborts the transaction, so the set cannot be lost
          // between this check and the delete.
          const lost = await restartIfSeenSetLost(tx, input.jobId, input.taskId);
          if (lost) return { deleted: 0, lost, completed: false };
          deleted = await tombstoneUnseenRecords(
            tx,
            { connectionId, resourceType: input.resourceType, taskId: input.taskId, changedBefore, at: new Date() },
            deletable,
          );
          await forgetSeenOfTask(tx, input.taskId);
        }
        // Validators this complete pass neither stored nor confirmed go: no later 304 may vouch for
        // pages whose records it did not see (they may be tombstones by now).
        if (!backfill) await forgetEtagsBefore(tx, connectionId, input.resourceType, passStart);
        // A partition the config no longer names loses its cursor: named again, it is read whole.
        const partitions = connector.partitions?.(task.config ?? {});
        if (!backfill && partitions) await forgetOtherPartitions(tx, connectionId, input.resourceType, ['', ...partitions]);
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
