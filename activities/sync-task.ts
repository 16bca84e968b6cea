import { Context } from '@temporalio/activity';
import type { Activities, SyncTaskResult } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { heartbeatingWhile } from './heartbeat';
import { claimTask } from './sync-task/claim';
import { endPass } from './sync-task/deletion';
import { readPass } from './sync-task/pages';
import { openPass, PassProgress, TaskTakenOver, validatorsOf, type Pass } from './sync-task/pass';

/**
 * Syncs one resource type of a job. Claims the task (`pending → processing`; a task already
 * processing is taken over only by a retry of this same activity; a completed one answers with its
 * counts and runs nothing; a disabled connection's task is skipped), then pages through the
 * connector from where the task last stopped: each page's records, the `sync_seen` ids (full
 * mode), how many ids were new to the seen-set, the task's progress (with the newest change time
 * seen per partition) and the cursors of the partitions the page completed are written in one
 * transaction, and the activity heartbeats with the page token, so a retried attempt resumes after
 * the last stored page and cancellation arrives within one page. Each claim gives the task a new
 * token and every progress write goes ahead only under the run's own: an attempt that Temporal
 * timed out while it still ran stops at its next page (skipped) once its retry has claimed the
 * task, and stores nothing more. On success a full pass deletes
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
 *
 * One module per step under `sync-task/`: the claim (`claim.ts`), the pass and where it stands
 * (`pass.ts`), reading and storing its pages (`pages.ts`), the seen-set check (`seen-set.ts`), and
 * the deletion and the task's end (`deletion.ts`).
 */
export function syncTask(deps: ActivityDeps): Activities['syncTask'] {
  return async (input) => {
    const ctx = Context.current();
    const claimed = await claimTask(deps.pool, input, ctx.info.attempt);
    // Processing under another run (this is no retry), ended elsewhere, or its connection is
    // disabled: this attempt did not run it.
    if (!claimed) return { status: 'skipped', entityCount: 0, writtenCount: 0, deletedCount: 0, pages: 0 };
    if ('ended' in claimed) return claimed.ended;

    const pass = await openPass(deps, input, claimed);
    const progress = new PassProgress(claimed.task, ctx, pass.log);
    if (claimed.lost) progress.restart(claimed.lost, 'while the task was interrupted');
    else if (progress.pages > 0) pass.log.info({ pages_done: progress.pages, attempt: ctx.info.attempt }, 'resuming sync task after its last stored page');
    const validators = await validatorsOf(deps, pass);
    // Between two stored pages, or in the deletion step's re-checks, the run may work longer than
    // the heartbeat timeout (a slow provider, a wait for another worker's credential renewal).
    return heartbeatingWhile(ctx, () => progress.where(), () => runPasses(deps, ctx, pass, progress, validators));
  };
}

/**
 * Reads the pass to its end and ends it (tombstoning what a full pass may), starting it again
 * from its first page when its seen-set was found lost; a run whose task a later attempt took
 * over stops, skipped.
 */
async function runPasses(
  deps: ActivityDeps,
  ctx: Context,
  pass: Pass,
  progress: PassProgress,
  validators: Awaited<ReturnType<typeof validatorsOf>>,
): Promise<SyncTaskResult> {
  for (;;) {
    let end;
    try {
      end = await endPass(deps, pass, await readPass(deps, ctx, pass, progress, validators));
    } catch (err) {
      if (!(err instanceof TaskTakenOver)) throw err;
      pass.log.warn({ attempt: ctx.info.attempt, pages_done: progress.pages }, 'sync task no longer held by this run (a later attempt took it over, or it ended): this attempt stops');
      const { entityCount, writtenCount, pages } = progress;
      return { status: 'skipped', entityCount, writtenCount, deletedCount: 0, pages };
    }
    if (end.lost) {
      progress.restart(end.lost, 'before the deletion step');
      continue;
    }
    const { entityCount, writtenCount, pages } = progress;
    const { window } = pass;
    pass.log.info(
      {
        entity_count: entityCount, written_count: writtenCount, deleted_count: end.deleted, pages,
        ...(window && { window_start: window.start.toISOString(), window_end: window.end?.toISOString() ?? null, outside_window: progress.outsideWindow }),
      },
      pass.full ? 'full sync task completed; unseen records tombstoned' : 'sync task completed',
    );
    return { status: 'completed', entityCount, writtenCount, deletedCount: end.deleted, pages };
  }
}
