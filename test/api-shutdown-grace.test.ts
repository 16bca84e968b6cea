// The API's shutdown ends within API_SHUTDOWN_GRACE_SECONDS even while a request's statement
// would run far longer (up to API_STATEMENT_TIMEOUT_SECONDS): requests in flight get what is left
// of the grace to answer, then their statements are cancelled. Each write is one transaction, so a
// request cut this way changed nothing. The same rule holds in `npm run api` and in `npm start`
// (where the worker beside the API then stops, and the process exits 0 all the same).
import { afterAll, describe, expect, it } from 'vitest';
import { apiEnv, startEnv, startSynctide, stopAllSynctide, TEST_ADMIN_KEY, type ExitStatus, type ServerEnv } from './helpers/processes';
import { useServers } from './helpers/stack';
import { eventually } from './helpers/worker';

afterAll(async () => {
  await stopAllSynctide();
});

/** How long the test waits for the exit before it takes the process for stuck (far above the grace, far below the statement timeout). */
const STUCK_MS = 30_000;

/** The process serving the API: `npm run api`, or `npm start` on the test's servers. */
const PROCESSES = [
  { script: 'api', env: apiEnv },
  { script: 'start', env: startEnv },
] as const satisfies readonly { script: 'api' | 'start'; env: (servers: ServerEnv, extra: Record<string, string>) => Promise<Record<string, string>> }[];

const servers = useServers();

describe.each(PROCESSES)('API shutdown of npm $script', ({ script, env: envOf }) => {
  it('cancels the statement of a request still waiting at the end of the grace and exits 0, the request changing nothing', async () => {
    const { env, db } = servers;
    const tenant = `acme-${script}`;
    await db.pool.query(`insert into tenant_limits (tenant_id, max_connections) values ($1, 3)`, [tenant]);
    const api = await startSynctide(
      script,
      await envOf(
        { databaseUrl: db.url, temporalAddress: env.address, taskQueue: `api-shutdown-grace-${script}` },
        // A statement may run 10 minutes: only the grace can end this shutdown in time.
        { API_STATEMENT_TIMEOUT_SECONDS: '600', API_SHUTDOWN_GRACE_SECONDS: '2', SCHEDULER_TICK_SECONDS: '3600' },
      ),
    );

    // The tenant's limits row is held by another transaction: the API's update of it waits.
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query(`select * from tenant_limits where tenant_id = $1 for update`, [tenant]);
      const answer = fetch(`${api.url}/tenants/${tenant}/limits`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${TEST_ADMIN_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ max_connections: 7 }),
      }).then(
        (res) => res.status,
        () => 'cut' as const,
      );
      const apiBackends = async () =>
        (await db.pool.query<{ pid: number; waiting: boolean }>(
          `select pid, wait_event_type = 'Lock' as waiting from pg_stat_activity where datname = current_database() and application_name = 'synctide-api'`,
        )).rows;
      await eventually(async () => ((await apiBackends()).some((b) => b.waiting) ? true : undefined));

      api.kill('SIGTERM');
      const stuck = new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), STUCK_MS).unref());
      // The lock is still held here: the statement cannot have ended by itself.
      const ended: ExitStatus | 'still running' = await Promise.race([api.exit, stuck]);
      expect(ended).toEqual({ code: 0, signal: null });
      expect(api.lines.some((l) => l.msg === 'shutdown complete')).toBe(true);
      expect(api.lines.some((l) => l.msg === 'grace over: statements still running cancelled' && l.connections === 1)).toBe(true);
      expect(await answer).not.toBe(200);
      // Its statement was cancelled, not left waiting on the server for its client that is gone.
      await eventually(async () => ((await apiBackends()).length === 0 ? true : undefined), { timeoutMs: 10_000, describe: apiBackends });
    } finally {
      await holder.query('rollback');
      holder.release();
    }
    const { rows } = await db.pool.query(`select max_connections from tenant_limits where tenant_id = $1`, [tenant]);
    expect(rows).toEqual([{ max_connections: 3 }]);
  }, 120_000);
});
