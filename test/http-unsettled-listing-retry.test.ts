// A listing paged by position that never held still for `max_reads` reads fails its task as
// transient, and the job retries it: the next attempt resumes the task from its last stored page.
// Once the provider has held still, that attempt must be able to finish the pass, not fail again on
// the disagreement the earlier attempt saw. Runs the sync activity directly against real Postgres
// and the fake provider of test/helpers/fake-http-provider.ts.
import { describe, expect, it } from 'vitest';
import { reopenTasksForRetry } from '../db/models/tasks';
import { useTestDatabase } from './helpers/database';
import { initialItems, paginationOf, RECORDS_PATH, startFakeHttpProvider, type FakeHttpStyle } from './helpers/fake-http-provider';
import { completeJob, createHttpConnection, runningJob, startTask, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();

const HOUR = 3_600_000;

// By position, and by keyset (`order: 'change_ascending'`) with every item changed in one second:
// that block is paged by position, and read again until two reads agree.
const CASES = [
  ['page', 'position'],
  ['offset', 'position'],
  ['page', 'keyset'],
  ['offset', 'keyset'],
] as const;

describe.each(CASES)('http connector, %s paging by %s: a job retrying a listing that changed during max_reads reads', (style: FakeHttpStyle, by) => {
  it.each([['full'], ['incremental']] as const)('the %s pass finishes on the retry once the provider holds still, storing exactly its items', async (mode) => {
    const clock = { ms: Date.now() - 2 * HOUR };
    const fake = await startFakeHttpProvider({ size: 3, initial: initialItems(8, clock.ms, by === 'keyset' ? 8 : 1), clock: () => clock.ms });
    try {
      const connectionId = await createHttpConnection(
        db.pool,
        {
          base_url: fake.baseUrl,
          pagination: { ...paginationOf(style, 3), max_reads: 2 },
          resources: {
            items: {
              path: `/${style}/items`, records: RECORDS_PATH[style], id: 'id', updated_at: 'updated_at', since: { param: 'updated_since' },
              ...(by === 'keyset' && { order: 'change_ascending' }),
            },
          },
        },
        `unsettled-retry-${style}-${by}-${mode}`,
      );
      const { jobId, tasks } = await runningJob(db.pool, connectionId, ['items'], mode);
      const task = { jobId, taskId: tasks[0]!, resourceType: 'items', mode };

      // Attempt 1: an edit before every request (the item listed first moves to the end), so no two reads agree.
      fake.beforeRequest = () => {
        clock.ms += 1000;
        fake.edit(fake.list()[0]!.id);
      };
      const failed = await startTask(db.pool, task).result.catch((e: Error) => e);
      fake.beforeRequest = null;
      expect(String((failed as Error).message)).toMatch(/the listing changed during each of 2 reads/);

      // The job's next attempt: the task is pending again with its page progress, and the provider holds still.
      await reopenTasksForRetry(db.pool, jobId, String((failed as Error).message));
      clock.ms += 1000;
      const retried = await startTask(db.pool, task).result.catch((e: Error) => e);
      await completeJob(db.pool, jobId);
      expect(retried instanceof Error ? retried.message : retried.status).toBe('completed');
      const stored = await storedRecords(db.pool, connectionId, 'items');
      const live = [...stored.values()].filter((r) => r.deleted_at === null);
      expect(live.map((r) => r.external_id).sort()).toEqual([...fake.items.keys()].sort());
      for (const record of live) expect(record.data).toEqual(fake.items.get(record.external_id));
    } finally {
      await fake.close();
    }
  });
});
