import { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import { getConnector } from '../connectors/registry';
import { upsertRecords } from '../db/upsert-records';
import { withTransaction } from '../db/transaction';
import { toActivityFailure } from './connector-failure';
import type { ActivityDeps } from './deps';

/** One resource type of a job. */
export interface SyncTaskInput {
  jobId: string;
  taskId: string;
  resourceType: string;
  mode: 'incremental' | 'full';
}

/** What a finished task did. */
export interface SyncTaskResult {
  status: 'completed' | 'skipped';
  entityCount: number;
  writtenCount: number;
  deletedCount: number;
  pages: number;
}

/**
 * Syncs one resource type of a job (SPEC §5). Claims the task (`pending → processing`; a task
 * already processing is taken over only by a retry of this same activity), then pages through
 * the connector from where the task last stopped: each page's records, the `sync_seen` ids (full
 * mode) and the task's progress are written in one transaction, and the activity heartbeats with
 * the page token, so a retried attempt resumes after the last stored page and cancellation
 * arrives within one page. On success a full pass deletes the records it did not see, the cursor
 * moves to the largest provider `updated_at` seen, and the task completes with its counts.
 */
export function syncTask({ pool, logger }: ActivityDeps) {
  return async (input: SyncTaskInput): Promise<SyncTaskResult> => {
    const ctx = Context.current();
    const attempt = ctx.info.attempt;
    const claimed = await withTransaction(pool, async (tx) => {
      const { rows } = await tx.query(
        `select t.status, t.page_token, t.pages_done, t.entity_count, t.written_count, t.high_water,
                j.connection_id, j.window_start, c.provider_slug, c.config, c.credentials, s.cursor
           from sync_tasks t
           join sync_jobs j on j.id = t.job_id
           join connections c on c.id = j.connection_id
           left join sync_state s on s.connection_id = j.connection_id and s.resource_type = t.resource_type
          where t.id = $1 for update of t skip locked`,
        [input.taskId],
      );
      const task = rows[0];
      if (!task) return null;
      const ours = task.status === 'pending' || (task.status === 'processing' && attempt > 1);
      if (!ours) return null;
      await tx.query(
        `update sync_tasks set status = 'processing', started_at = coalesce(started_at, now()), heartbeat_at = now()
          where id = $1`,
        [input.taskId],
      );
      return task;
    });
    if (!claimed) {
      return { status: 'skipped', entityCount: 0, writtenCount: 0, deletedCount: 0, pages: 0 };
    }

    const connector = getConnector(claimed.provider_slug);
    const connectionId: string = claimed.connection_id;
    // A backfill fetches from the start of its window instead of the cursor.
    const backfill = claimed.window_start !== null;
    const since: Date | null = input.mode === 'incremental' ? (claimed.window_start ?? claimed.cursor) : null;
    let pageToken: string | null = claimed.page_token;
    let pages: number = claimed.pages_done;
    let entityCount: number = claimed.entity_count;
    let writtenCount: number = claimed.written_count;
    let highWater: Date | null = claimed.high_water;
    const log = logger.child({ job_id: input.jobId, task_id: input.taskId, connection_id: connectionId, resource_type: input.resourceType });
    if (pages > 0) log.info({ pages_done: pages, attempt }, 'resuming sync task after its last stored page');

    try {
      for (;;) {
        if (ctx.cancellationSignal.aborted) throw new CancelledFailure('sync task cancelled');
        const page = await connector.fetchPage({
          resource: input.resourceType,
          since,
          pageToken,
          config: claimed.config ?? {},
          credentials: claimed.credentials ?? null,
          signal: ctx.cancellationSignal,
        });
        for (const record of page.records) {
          const t = record.updatedAt ? new Date(record.updatedAt) : null;
          if (t && (!highWater || t > highWater)) highWater = t;
        }
        const written = await withTransaction(pool, async (tx) => {
          const n = await upsertRecords(
            tx,
            { connectionId, resourceType: input.resourceType, jobId: input.jobId, at: new Date() },
            page.records,
          );
          if (input.mode === 'full' && page.records.length > 0) {
            await tx.query(
              `insert into sync_seen (task_id, external_id) select $1, unnest($2::text[]) on conflict do nothing`,
              [input.taskId, page.records.map((r) => r.externalId)],
            );
          }
          await tx.query(
            `update sync_tasks set page_token = $2, pages_done = pages_done + 1, entity_count = entity_count + $3,
                    written_count = written_count + $4, high_water = $5, heartbeat_at = now()
              where id = $1`,
            [input.taskId, page.nextPageToken, page.records.length, n, highWater],
          );
          await tx.query(
            `update sync_jobs set processed_entities = processed_entities + $2 where id = $1`,
            [input.jobId, page.records.length],
          );
          return n;
        });
        pages += 1;
        entityCount += page.records.length;
        writtenCount += written;
        pageToken = page.nextPageToken;
        ctx.heartbeat({ pageToken, pages });
        if (!pageToken) break;
      }
    } catch (err) {
      if (ctx.cancellationSignal.aborted) throw new CancelledFailure('sync task cancelled');
      throw toActivityFailure(err);
    }

    const deletedCount = await withTransaction(pool, async (tx) => {
      let deleted = 0;
      if (input.mode === 'full') {
        const result = await tx.query(
          `delete from records r
            where r.connection_id = $1 and r.resource_type = $2
              and not exists (select 1 from sync_seen s where s.task_id = $3 and s.external_id = r.external_id)
              -- A record written after this pass began (by a job running beside it) is not the pass's to judge.
              and r.synced_at < (select started_at from sync_tasks where id = $3)`,
          [connectionId, input.resourceType, input.taskId],
        );
        deleted = result.rowCount ?? 0;
        await tx.query('delete from sync_seen where task_id = $1', [input.taskId]);
      }
      // The cursor belongs to the connection's own syncs: a backfill of an older window must not
      // move it (nor skip ahead past changes it did not fetch). It never moves backwards.
      if (!backfill) {
        await tx.query(
          `insert into sync_state (connection_id, resource_type, cursor, last_synced_at)
           values ($1, $2, $3, now())
           on conflict (connection_id, resource_type) do update
              set cursor = greatest(excluded.cursor, sync_state.cursor), last_synced_at = excluded.last_synced_at`,
          [connectionId, input.resourceType, highWater],
        );
      }
      const done = await tx.query(
        `update sync_tasks set status = 'completed', deleted_count = $2, completed_at = now(), heartbeat_at = now()
          where id = $1 and status = 'processing'`,
        [input.taskId, deleted],
      );
      if (done.rowCount) {
        await tx.query('update sync_jobs set completed_tasks = completed_tasks + 1 where id = $1', [input.jobId]);
      }
      return deleted;
    });
    log.info(
      { entity_count: entityCount, written_count: writtenCount, deleted_count: deletedCount, pages },
      input.mode === 'full' ? 'full sync task completed; unseen records deleted' : 'sync task completed',
    );
    return { status: 'completed', entityCount, writtenCount, deletedCount, pages };
  };
}

