// Fault: the whole stack — the `npm run worker` process and the Temporal dev server (persisted with
// --db-filename) — is stopped for three intervals while connections sleep, then started again
// (Postgres stays up). Each connection then runs exactly one catch-up job, not one per missed
// slot, and plans its next run a full interval after that job.
import { describe, expect, it } from 'vitest';
import {
  activeDuplicates, countOf, insertDemoConnections, overlappingRuns, summariseCounts, untilEveryConnection, watchActiveJobs,
} from '../helpers/invariants';
import { startSynctide, workerEnv } from '../helpers/processes';
import { usePersistedStack } from '../helpers/servers';

const TASK_QUEUE = 'faults-stack-downtime';
const CONNECTIONS = 5;
const INTERVAL_SECONDS = 60; // the smallest allowed interval
const MISSED_INTERVALS = 3;

describe('the whole stack stopped for three intervals', () => {
  const stack = usePersistedStack();

  it('runs exactly one catch-up job per connection after the restart', async () => {
    const { db, temporal } = stack;
    const ids = await insertDemoConnections(db.pool, {
      count: CONNECTIONS, prefix: 'downtime-', intervalSeconds: INTERVAL_SECONDS, config: { records_per_resource: 20, page_size: 10 },
    });
    const watch = watchActiveJobs(db.pool);
    const env = () => workerEnv({ databaseUrl: db.url, temporalAddress: temporal.address, taskQueue: TASK_QUEUE });
    const first = await startSynctide('worker', await env(), { name: 'worker-before' });
    // Bootstrapped; every connection sleeps until its next run.
    await untilEveryConnection(db.pool, ids, { completed: 1, queued: 1 }, 120_000);

    // Stop everything but Postgres, for three intervals after the latest finished sync.
    const stoppedAt = Date.now();
    expect(await first.stop()).toEqual({ code: 0, signal: null });
    await temporal.stop();
    const { rows: before } = await db.pool.query<{ connection_id: string; finished_at: Date }>(
      `select connection_id, finished_at from sync_jobs where connection_id = any($1::uuid[]) and status = 'completed'`,
      [ids],
    );
    const lastFinished = Math.max(...before.map((j) => j.finished_at.getTime()));
    const restartAt = Math.max(stoppedAt, lastFinished) + MISSED_INTERVALS * INTERVAL_SECONDS * 1000 + 5000;
    while (Date.now() < restartAt) await new Promise((r) => setTimeout(r, 1000));
    const restartedAt = new Date();
    await temporal.start();
    const worker = await startSynctide('worker', await env(), { name: 'worker-after' });

    // One catch-up job each, then the next run waits a full interval.
    const counts = await untilEveryConnection(db.pool, ids, { completed: 2, queued: 1 }, 180_000);
    const { samples, violations } = await watch.stop();
    const { rows: after } = await db.pool.query<{ connection_id: string; status: string; started_at: Date | null; finished_at: Date | null; scheduled_at: Date }>(
      `select connection_id, status, started_at, finished_at, scheduled_at from sync_jobs
        where connection_id = any($1::uuid[]) and (started_at >= $2 or status = 'queued') order by scheduled_at`,
      [ids, restartedAt],
    );
    const missed = before.map((j) => Math.floor((restartedAt.getTime() - j.finished_at.getTime()) / (INTERVAL_SECONDS * 1000)));
    const jobs = await countOf(db.pool, 'sync_jobs');
    const enqueuedAfter = worker.lines.filter((l) => l.msg === 'sync job enqueued');
    const overlapping = await overlappingRuns(db.pool);
    console.log(
      `[stack-downtime] ${CONNECTIONS} connections every ${INTERVAL_SECONDS} s; worker and Temporal down ` +
        `${Math.round((restartedAt.getTime() - stoppedAt) / 1000)} s, slots missed per connection ${missed.join('/')}; ` +
        `jobs run after the restart per connection ${ids.map((id) => after.filter((j) => j.connection_id === id && j.status !== 'queued').length).join('/')}; ` +
        `jobs ${jobs} (per connection ${JSON.stringify(summariseCounts(counts))}); next runs planned after the restart ${enqueuedAfter.length} ` +
        `(modes ${[...new Set(enqueuedAfter.map((l) => l.mode))].join(',')}); ` +
        `duplicate active jobs: ${violations.length} in ${samples} samples; overlapping runs: ${overlapping.length}`,
    );

    expect(Math.min(...missed)).toBeGreaterThanOrEqual(MISSED_INTERVALS);
    for (const id of ids) {
      const ran = after.filter((j) => j.connection_id === id && j.status !== 'queued');
      const next = after.filter((j) => j.connection_id === id && j.status === 'queued');
      // Exactly one catch-up job ran (not one per missed slot) ...
      expect(ran).toHaveLength(1);
      expect(ran[0]!.status).toBe('completed');
      // ... and the next one is planned a full interval after it, not as another catch-up.
      expect(next).toHaveLength(1);
      expect(next[0]!.scheduled_at.getTime() - ran[0]!.finished_at!.getTime()).toBeGreaterThanOrEqual(INTERVAL_SECONDS * 1000);
    }
    expect(jobs).toBe(CONNECTIONS * 3);
    expect(await countOf(db.pool, `sync_jobs where status in ('failed', 'cancelled')`)).toBe(0);
    expect(violations).toEqual([]);
    expect(samples).toBeGreaterThan(0);
    expect(overlapping).toEqual([]);
    expect(await activeDuplicates(db.pool)).toEqual([]);
  }, 600_000);
});
