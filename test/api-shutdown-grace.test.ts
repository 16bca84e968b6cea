// `npm run api` ends its shutdown within API_SHUTDOWN_GRACE_SECONDS even while a request's
// statement would run far longer (up to API_STATEMENT_TIMEOUT_SECONDS): requests in flight get
// what is left of the grace to answer, then their statements are cancelled and the process exits
// 0. Each write is one transaction, so a request cut this way changed nothing.
import { afterAll, describe, expect, it } from 'vitest';
import { apiEnv, startSynctide, stopAllSynctide, TEST_ADMIN_KEY, type ExitStatus } from './helpers/processes';
import { useServers } from './helpers/stack';
import { eventually } from './helpers/worker';

afterAll(async () => {
  await stopAllSynctide();
});

/** How long the test waits for the exit before it takes the process for stuck (far above the grace, far below the statement timeout). */
const STUCK_MS = 30_000;

describe('API shutdown', () => {
  const servers = useServers();

  it('cancels the statement of a request still waiting at the end of the grace and exits 0, the request changing nothing', async () => {
    const { env, db } = servers;
    await db.pool.query(`insert into tenant_limits (tenant_id, max_connections) values ('acme', 3)`);
    const api = await startSynctide(
      'api',
      await apiEnv(
        { databaseUrl: db.url, temporalAddress: env.address, taskQueue: 'api-shutdown-grace' },
        // A statement may run 10 minutes: only the grace can end this shutdown in time.
        { API_STATEMENT_TIMEOUT_SECONDS: '600', API_SHUTDOWN_GRACE_SECONDS: '2' },
      ),
    );

    // The tenant's limits row is held by another transaction: the API's update of it waits.
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query(`select * from tenant_limits where tenant_id = 'acme' for update`);
      const answer = fetch(`${api.url}/tenants/acme/limits`, {
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
    const { rows } = await db.pool.query(`select max_connections from tenant_limits where tenant_id = 'acme'`);
    expect(rows).toEqual([{ max_connections: 3 }]);
  }, 120_000);
});
