import type { Pool } from '../../db/pool';
import { lockTaskToSync, markTaskProcessing, type TaskToSync } from '../../db/models/tasks';
import type { SeenSetSize } from '../../db/models/seen';
import { withTransaction } from '../../db/transaction';
import type { SyncTaskInput, SyncTaskResult } from '../../temporal/activities';
import { restartIfSeenSetLost } from './seen-set';

/** A task this run claimed: its row, the seen-set sizes when the claim restarted its pass, and the pass start. */
export interface ClaimedTask {
  task: TaskToSync;
  /** The sizes found when a resumed full pass had lost its seen-set (the pass then starts again); else null. */
  lost: SeenSetSize | null;
  /** The task's first start (a resumed task keeps it): the pass start, which caps every cursor. */
  startedAt: Date;
  /** This run's claim token, which each of its progress writes names. */
  claim: string;
}

/**
 * Claims task `input.taskId` for this run in one transaction: `pending → processing`; a task
 * already processing is taken over only by a retry of this same activity (`attempt > 1`), and
 * the new claim token fences off the attempt it replaces should that one still run; a
 * completed one is answered as it ended (`ended`, its counts). A resumed full pass whose seen-set
 * was lost is sent back to its first page in the same transaction. Null when this run may not run
 * it: processing under another run and this is no retry, ended elsewhere, or its connection is
 * disabled.
 */
export async function claimTask(pool: Pool, input: SyncTaskInput, attempt: number): Promise<ClaimedTask | { ended: SyncTaskResult } | null> {
  return withTransaction(pool, async (tx) => {
    const task = await lockTaskToSync(tx, input.taskId);
    if (!task) return null;
    // Done by an earlier attempt of the job: answer as it ended, run nothing again.
    if (task.status === 'completed') return { ended: endedResult(task) };
    if (task.connection_status === 'disabled') return null;
    const ours = task.status === 'pending' || (task.status === 'processing' && attempt > 1);
    if (!ours) return null;
    const { startedAt, claim } = await markTaskProcessing(tx, input.taskId, task.config_epoch);
    const lost = input.mode === 'full' && task.pages_done > 0 ? await restartIfSeenSetLost(tx, input.jobId, input.taskId) : null;
    return { task, lost, startedAt, claim };
  });
}

/** The answer of a task an earlier attempt completed: its counts as it ended. */
function endedResult(task: TaskToSync): SyncTaskResult {
  return { status: 'completed', entityCount: task.entity_count, writtenCount: task.written_count, deletedCount: task.deleted_count, pages: task.pages_done };
}
