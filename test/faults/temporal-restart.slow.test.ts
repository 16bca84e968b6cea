// Fault: the Temporal dev server (persisted with --db-filename) is stopped while connections sleep
// between cycles, stays down until every connection's next run has come due, and is started again.
// The worker process stays up throughout; every connection then runs the job it had queued, once.
import { describe, expect, it } from 'vitest';
import {
  activeDuplicates, countOf, insertDemoConnections, overlappingRuns, summariseCounts, untilEveryConnection, watchActiveJobs,
} from '../helpers/invariants';
import { startSynctide, workerEnv } from '../helpers/processes';
import { usePersistedStack } from '../helpers/servers';

const TASK_QUEUE = 'faults-temporal-restart';
const CONNECTIONS = 5;
const INTERVAL_SECONDS = 60; // the smallest allowed interval

describe('Temporal dev server restart while connections sleep', () => {
  const stack = usePersistedStack();

  it('runs every connection’s next cycle after the restart, exactly once', async () => {
    const { db, temporal } = stack;
    const ids = await insertDemoConnections(db.pool, {
      count: CONNECTIONS, prefix: 'restart-', intervalSeconds: INTERVAL_SECONDS, config: { records_per_resource: 20, page_size: 10 },
    });
    const watch = watchActiveJobs(db.pool);
    // The worker's first reconcile tick starts the connection workflows; each bootstraps at once.
    const worker = await startSynctide('worker', await workerEnv({ databaseUrl: db.url, temporalAddress: temporal.address, taskQueue: TASK_QUEUE }));
    await untilEveryConnection(db.pool, ids, { completed: 1, queued: 1 }, 120_000);

    // Every connection sleeps until its queued job's scheduled_at. Stop Temporal now, and keep it
    // down until all of those times have passed, so every timer comes due while the server is off.
    const { rows: queued } = await db.pool.query<{ id: string; connection_id: string; scheduled_at: Date }>(
      `select id, connection_id, scheduled_at from sync_jobs where connection_id = any($1::uuid[]) and status = 'queued'`,
      [ids],
    );
    const stoppedAt = new Date();
    await temporal.stop();
    const latestDue = Math.max(...queued.map((j) => j.scheduled_at.getTime()));
    while (Date.now() < latestDue + 2000) await new Promise((r) => setTimeout(r, 500));
    const downSeconds = Math.round((Date.now() - stoppedAt.getTime()) / 1000);
    // Nothing could start while Temporal was down, and the worker rode it out.
    expect(await countOf(db.pool, `sync_jobs where connection_id = any($1::uuid[]) and status = 'queued'`, [ids])).toBe(CONNECTIONS);
    expect(worker.running()).toBe(true);
    await temporal.start();
    const restartedAt = new Date();

    // Each connection runs the job it had queued before the stop, then queues the next cycle.
    const counts = await untilEveryConnection(db.pool, ids, { completed: 2, queued: 1 }, 180_000);
    const { samples, violations } = await watch.stop();

    const { rows: ran } = await db.pool.query<{ id: string; status: string; started_at: Date }>(
      `select id, status, started_at from sync_jobs where id = any($1::uuid[])`,
      [queued.map((j) => j.id)],
    );
    const jobs = await countOf(db.pool, 'sync_jobs');
    const records = await countOf(db.pool, 'records');
    const overlapping = await overlappingRuns(db.pool);
    console.log(
      `[temporal-restart] ${CONNECTIONS} connections every ${INTERVAL_SECONDS} s; Temporal down ${downSeconds} s ` +
        `(until ${Math.round((restartedAt.getTime() - latestDue) / 1000)} s after the last queued run came due); ` +
        `jobs ${jobs} (per connection ${JSON.stringify(summariseCounts(counts))}); ` +
        `queued-before-stop jobs completed after restart ${ran.filter((j) => j.status === 'completed' && j.started_at > stoppedAt).length}/${CONNECTIONS}; ` +
        `records ${records} (expected ${CONNECTIONS * 20 * 3}); duplicate active jobs: ${violations.length} in ${samples} samples; ` +
        `overlapping runs: ${overlapping.length}; worker restarts: ${worker.lines.filter((l) => l.msg === 'worker started').length - 1}`,
    );

    expect(ran).toHaveLength(CONNECTIONS);
    for (const job of ran) {
      expect(job.status).toBe('completed');
      expect(job.started_at.getTime()).toBeGreaterThan(stoppedAt.getTime());
    }
    expect(jobs).toBe(CONNECTIONS * 3);
    expect(records).toBe(CONNECTIONS * 20 * 3);
    expect(violations).toEqual([]);
    expect(samples).toBeGreaterThan(0);
    expect(overlapping).toEqual([]);
    expect(await activeDuplicates(db.pool)).toEqual([]);
    // One worker process did it all, without restarting.
    expect(worker.running()).toBe(true);
    expect(worker.lines.filter((l) => l.msg === 'worker started')).toHaveLength(1);
  }, 420_000);
});
