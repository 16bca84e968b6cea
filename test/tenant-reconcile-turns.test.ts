// The reconcile tick's per-tick work goes to tenants in turns: one tenant's backlog (purges whose
// workflows never started, as after a Temporal outage) does not hold another tenant's back for
// tick after tick. Real Postgres.
import { describe, expect, it } from 'vitest';
import { findOpenPurgesCreatedBefore } from '../db/models/purges';
import { useTestDatabase } from './helpers/database';

describe('open purges the reconcile tick starts (real Postgres)', () => {
  const db = useTestDatabase();

  it("takes each tenant's oldest in turn, so one tenant's backlog of unstarted purges does not hold another's back for ticks", async () => {
    /** `n` open purges of `tenant` whose workflows never started, created `minutesAgo` minutes ago (a minute apart, oldest first). */
    const backlog = async (tenant: string, n: number, minutesAgo: number) => {
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into connection_purges (connection_id, tenant_id, created_at)
         select gen_random_uuid(), $1, now() - make_interval(mins => $3 - k) from generate_series(0, $2 - 1) k
         returning id`,
        [tenant, n, minutesAgo],
      );
      return rows.map((r) => r.id);
    };
    // A tenant's thousand purges whose workflows never started, older than the other tenant's two.
    const noisy = await backlog('noisy', 1000, 2000);
    const quiet = await backlog('quiet', 2, 10);
    const picked = (await findOpenPurgesCreatedBefore(db.pool, new Date(), [], 4)).map((p) => p.id);
    expect(picked.filter((id) => quiet.includes(id))).toHaveLength(2);
    expect(picked.filter((id) => noisy.includes(id))).toHaveLength(2);
    // Purges the tick found running are left out before the turns are counted.
    const next = (await findOpenPurgesCreatedBefore(db.pool, new Date(), [...quiet, ...noisy.slice(0, 2)], 4)).map((p) => p.id);
    expect(next).toHaveLength(4);
    expect(next.every((id) => noisy.includes(id) && !noisy.slice(0, 2).includes(id))).toBe(true);
  });
});
