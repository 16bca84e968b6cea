import { addFailedTasks } from '../db/models/jobs';
import { forgetSeenOfTask } from '../db/models/seen';
import { failTask as failTaskRow } from '../db/models/tasks';
import { withTransaction } from '../db/transaction';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';

/** Records a task's failure (after its activity gave up) and counts it on the job. Idempotent. */
export function failTask({ pool }: ActivityDeps): Activities['failTask'] {
  return async (input) => {
    await withTransaction(pool, async (tx) => {
      if (!(await failTaskRow(tx, input.taskId, input.error))) return;
      await forgetSeenOfTask(tx, input.taskId);
      await addFailedTasks(tx, [input.jobId], [1]);
    });
  };
}
