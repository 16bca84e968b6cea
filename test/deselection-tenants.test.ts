// The reconcile tick's deselection step (finishDeselections) shares its batches between tenants:
// one tenant's large deselection, or its many, written before another tenant's, must not keep the
// other tenant's deselected records live in its feed tick after tick. Real commands (createConnection,
// updateConnection) on a real Postgres, the demo provider, Temporal faked (no workflow is involved).
import { describe, expect, it } from 'vitest';
import { finishDeselections } from '../activities/finish-deselections';
import { createConnection, updateConnection } from '../commands/connections';
import { DESELECTION_BATCH } from '../db/models/records';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { useTestDatabase } from './helpers/database';
import { fakeTemporal } from './helpers/fake-temporal';

describe("the reconcile tick's deselections, between tenants (real Postgres)", () => {
  const db = useTestDatabase();
  const commands = () => testCommandDeps(db.pool, fakeTemporal().client);
  const quietDeps = () => testActivityDeps({ pool: db.pool }).deps;

  /** A demo connection of `tenant` syncing `items` and `extras`, with `extras` records stored. */
  async function withExtras(tenant: string, appKey: string, extras: number): Promise<string> {
    const row = await createConnection(commands(), {
      tenantId: tenant, appKey, provider: 'demo', config: { resource_types: ['items', 'extras'] }, credentials: null, schedule: null, status: 'paused',
    });
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, fetched_at)
       select $1, 'extras', 'x-' || lpad(n::text, 8, '0'), jsonb_build_object('n', n), now(), now() from generate_series(1, $2::int) n`,
      [row.id, extras],
    );
    return row.id;
  }
  /** Stops selecting `extras`: the request tombstones one batch, the rest is left to the tick. */
  const dropExtras = (id: string) => updateConnection(commands(), id, { config: { resource_types: ['items'] } });
  const liveExtras = async (id: string) =>
    (await db.pool.query<{ n: number }>(`select count(*)::int as n from records where connection_id = $1 and resource_type = 'extras' and deleted_at is null`, [id])).rows[0]!.n;
  const pending = async (id: string) => (await db.pool.query('select 1 from pending_deselections where connection_id = $1', [id])).rowCount;

  it("one tenant's large deselection, older than another tenant's, does not take every batch of a tick: each tenant's oldest unit gets batches in turn", async () => {
    // Tenant "bulk" stops selecting a type of four batches on each of two connections first ...
    const bulk = [await withExtras('bulk', 'bulk-1', 4 * DESELECTION_BATCH), await withExtras('bulk', 'bulk-2', 4 * DESELECTION_BATCH)];
    for (const id of bulk) await dropExtras(id);
    // ... then tenant "small" stops selecting a type of two batches' worth.
    const small = await withExtras('small', 'small-1', 2 * DESELECTION_BATCH + 10);
    await dropExtras(small);
    expect(await liveExtras(small)).toBe(DESELECTION_BATCH + 10);

    // One tick of four batches: the small tenant's deselection is finished within it (two batches:
    // the second visits fewer than a batch), the bulk tenant's goes on with the rest.
    const tick = await finishDeselections(quietDeps(), 4);
    expect({ smallLive: await liveExtras(small), smallPending: await pending(small) }).toEqual({ smallLive: 0, smallPending: 0 });
    expect(tick).toEqual({ tombstoned: 2 * DESELECTION_BATCH + DESELECTION_BATCH + 10, finished: 1, batches: 4 });
    // The bulk tenant is not starved either: its older unit had the other batches.
    expect(await liveExtras(bulk[0]!)).toBe(DESELECTION_BATCH);
  }, 300_000);
});
