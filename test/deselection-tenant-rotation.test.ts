// The reconcile tick's deselection step (finishDeselections) has DESELECTION_BATCHES_PER_TICK
// batches a tick, one per tenant per round. With more tenants than batches, every tenant with
// pending deselections must still get a batch within a bounded number of ticks: the turns go on
// from the tenant served last, and a process that has served none (just started, or another
// worker's tick) starts from a point the tick's time moves on, never from the same tenants tick
// after tick. Real commands (createConnection, updateConnection) on a real Postgres, the demo
// provider, Temporal faked (no workflow is involved).
import { beforeEach, describe, expect, it } from 'vitest';
import { finishDeselections } from '../activities/finish-deselections';
import { createConnection, updateConnection } from '../commands/connections';
import { createPool } from '../db/pool';
import { DESELECTION_BATCH } from '../db/models/records';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { useTestDatabase } from './helpers/database';
import { fakeTemporal } from './helpers/fake-temporal';

/**
 * Batches a tick runs here: the rotation is the same for any number (the tick runs
 * DESELECTION_BATCHES_PER_TICK), and fewer tenants of 3,000 records each keep the test short.
 */
const BATCHES = 4;
/** More tenants than one tick has batches. */
const TENANTS = BATCHES + 5;
/** Ticks within which every tenant must have had a batch: enough for every tenant once. */
const TICKS = Math.ceil(TENANTS / BATCHES);

describe("the reconcile tick's deselections, more tenants than a tick's batches (real Postgres)", () => {
  const db = useTestDatabase();
  const commands = () => testCommandDeps(db.pool, fakeTemporal().client);

  /**
   * One demo connection for each of TENANTS tenants (named `prefix-NN`), each with a large
   * deselection pending: `extras` dropped with 3 batches and a few records of it stored (the
   * request tombstones one batch, so two ticks' batches still leave more). Answers the connection
   * ids and their live `extras` counts once the requests are done.
   */
  async function largeDeselections(prefix: string): Promise<{ ids: string[]; before: Map<string, number> }> {
    const ids: string[] = [];
    for (let k = 0; k < TENANTS; k += 1) {
      const tenant = `${prefix}-${String(k).padStart(2, '0')}`;
      const row = await createConnection(commands(), {
        tenantId: tenant, appKey: `${tenant}-app`, provider: 'demo', config: { resource_types: ['items', 'extras'] }, credentials: null, schedule: null, status: 'paused',
      });
      await db.pool.query(
        `insert into records (connection_id, resource_type, external_id, data, synced_at, fetched_at)
         select $1, 'extras', 'x-' || lpad(n::text, 8, '0'), jsonb_build_object('n', n), now(), now() from generate_series(1, $2::int) n`,
        [row.id, 3 * DESELECTION_BATCH + 10],
      );
      await updateConnection(commands(), row.id, { config: { resource_types: ['items'] } });
      ids.push(row.id);
    }
    return { ids, before: await liveExtras(ids) };
  }
  async function liveExtras(ids: string[]): Promise<Map<string, number>> {
    const { rows } = await db.pool.query<{ id: string; n: number }>(
      `select c.id, (select count(*)::int from records r where r.connection_id = c.id and r.resource_type = 'extras' and r.deleted_at is null) as n
         from connections c where c.id = any($1::uuid[])`,
      [ids],
    );
    return new Map(rows.map((row) => [row.id, row.n]));
  }
  /** The tenants of the connections among `ids` whose live `extras` did not go down since `before`. */
  async function withoutProgress(ids: string[], before: Map<string, number>): Promise<string[]> {
    const now = await liveExtras(ids);
    const stuck = ids.filter((id) => now.get(id)! >= before.get(id)!);
    const { rows } = await db.pool.query<{ tenant_id: string }>('select tenant_id from connections where id = any($1::uuid[]) order by tenant_id', [stuck]);
    return rows.map((row) => row.tenant_id);
  }

  beforeEach(async () => {
    await db.pool.query('delete from pending_deselections');
  });

  it('ticks of one process go on from the tenant it served last: every tenant has a batch within ceil(tenants / batches) ticks', async () => {
    const { ids, before } = await largeDeselections('rot');
    const deps = testActivityDeps({ pool: db.pool }).deps;
    const ticks = [];
    for (let tick = 0; tick < TICKS; tick += 1) ticks.push(await finishDeselections(deps, BATCHES));
    expect(ticks.map((t) => t.batches)).toEqual(Array(TICKS).fill(BATCHES));
    expect(await withoutProgress(ids, before)).toEqual([]);
  }, 600_000);

  it('ticks each run by a process that has served none (a fresh pool each) start from a point the tick time moves on: every tenant has a batch within ceil(tenants / batches) ticks', async () => {
    const { ids, before } = await largeDeselections('fresh');
    const tickMs = 60_000;
    const start = Date.UTC(2026, 11, 1, 12, 0, 0);
    for (let tick = 0; tick < TICKS; tick += 1) {
      const pool = createPool(db.url, 2);
      try {
        const deps = { ...testActivityDeps({ pool }).deps, reconcile: { tickSeconds: tickMs / 1000, retentionDays: 7 } };
        const done = await finishDeselections(deps, BATCHES, start + tick * tickMs);
        expect(done.batches).toBe(BATCHES);
      } finally {
        await pool.end();
      }
    }
    expect(await withoutProgress(ids, before)).toEqual([]);
  }, 600_000);
});
