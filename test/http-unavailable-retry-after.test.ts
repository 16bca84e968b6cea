// A provider down for maintenance mid-listing answers 503 with `Retry-After` (RFC 9110: how long it
// expects to be unavailable). The http connector failed the task as transient, ignoring the wait:
// the activity's quick retries (seconds apart) met the same 503, the job's attempt failed and
// counted toward the connection's circuit breaker, and the job failed while the provider had said
// when to come back. A 503 with Retry-After is now a rate limit with that wait (the job waits
// durably, then the task resumes after its last stored page); one without stays transient. Runs the
// sync activity against real Postgres and a fake provider on 127.0.0.1.
import { ApplicationFailure } from '@temporalio/common';
import { afterEach, describe, expect, it } from 'vitest';
import { reopenTasksForRetry } from '../db/models/tasks';
import { useTestDatabase } from './helpers/database';
import { closeFakeServers, serve } from './helpers/fake-server';
import { completeJob, createHttpConnection, runningJob, startTask, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const at = (minutes: number) => new Date(Date.now() - 2 * 3_600_000 + minutes * 60_000).toISOString();
const ITEMS = ['a', 'b', 'c', 'd', 'e', 'f'].map((id, k) => ({ id, updated_at: at(k) }));

describe('http connector: a 503 with Retry-After mid-listing', () => {
  it('fails the task as rate limited with the provider\'s wait, and the task resumes after its last stored page', async () => {
    let down = false;
    const asked: string[] = [];
    const fake = await serve((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const after = url.searchParams.get('after');
      if (down && after !== null) {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '120' });
        return res.end('{"error": "down for maintenance"}');
      }
      asked.push(after ?? '(first)');
      const rest = ITEMS.filter((i) => after === null || i.id > after);
      const page = rest.slice(0, 2);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: page, next: rest.length > 2 ? `/items?after=${page.at(-1)!.id}` : null }));
      // Down from the second page on, until the test brings it back.
      down = asked.length === 1 ? true : down;
    });
    const connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'next_url', path: 'next' }, resources: { items: { path: '/items', records: 'data', id: 'id', updated_at: 'updated_at' } } },
      'unavailable-retry-after',
    );
    const { jobId, tasks } = await runningJob(db.pool, connectionId, ['items'], 'full');
    const task = { jobId, taskId: tasks[0]!, resourceType: 'items', mode: 'full' as const };
    try {
      const failed = await startTask(db.pool, task, 1).result.catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(ApplicationFailure);
      expect({ type: (failed as ApplicationFailure).type, details: (failed as ApplicationFailure).details }).toEqual({ type: 'rate_limited', details: [{ retryAfterSeconds: 120 }] });

      // Back up: the job's next attempt reopens the task, which goes on from the second page and stores every record.
      down = false;
      await reopenTasksForRetry(db.pool, jobId, (failed as ApplicationFailure).message);
      const result = await startTask(db.pool, task, 1).result;
      expect(result).toMatchObject({ status: 'completed' });
      expect(asked).toEqual(['(first)', 'b', 'd']);
      const live = [...(await storedRecords(db.pool, connectionId, 'items')).values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
      expect(live).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    } finally {
      await completeJob(db.pool, jobId);
    }
  });
});
