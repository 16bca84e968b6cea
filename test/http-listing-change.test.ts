// A connection whose listing of a resource changes (a PATCH of its path, params, records, id, ...)
// must read that resource whole on its next incremental pass: the cursor and ETags of the old
// listing say nothing of the records the new one serves. Runs the sync activity directly against
// real Postgres and a fake provider on 127.0.0.1 that honours `status` and `updated_since`.
import { afterEach, describe, expect, it } from 'vitest';
import { updateConnection } from '../commands/connections';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { fakeTemporal } from './helpers/fake-temporal';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const ITEMS = [
  { id: 'open-1', status: 'open', updated_at: '2025-01-01T00:00:00Z' },
  { id: 'closed-1', status: 'closed', updated_at: '2025-01-01T00:00:00Z' },
];

/** A provider listing ITEMS, filtered by `status` and `updated_since` when asked; `onRequest` runs before each answer. */
async function provider(onRequest: () => Promise<void> = async () => {}) {
  return serve(async (req, res) => {
    await onRequest();
    const url = new URL(req.url ?? '/', 'http://x');
    const status = url.searchParams.get('status');
    const since = url.searchParams.get('updated_since');
    const items = ITEMS.filter((i) => (!status || i.status === status) && (!since || i.updated_at >= since));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items }));
  });
}

const config = (baseUrl: string, params: Record<string, string>) => ({
  base_url: baseUrl,
  resources: { items: { path: '/items', params, records: 'items', id: 'id', updated_at: 'updated_at', since: { param: 'updated_since' } } },
});
const cursorRows = async (id: string) =>
  (await db.pool.query('select resource_type, cursor from sync_state where connection_id = $1 and cursor is not null', [id])).rows;

describe('http connector: a changed listing is read whole', () => {
  it("a PATCH that widens a resource's params makes the next incremental pass read the records it now includes, unchanged since the cursor", async () => {
    const fake = await provider();
    const id = await createHttpConnection(db.pool, config(fake.url, { status: 'open' }), 'widened');
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, id, 'items', 'incremental');
    // A later pass, so the cursor stands past the items' change time.
    await runPass(deps, id, 'items', 'incremental');
    expect([...(await storedRecords(db.pool, id, 'items')).keys()]).toEqual(['open-1']);
    expect(await cursorRows(id)).toHaveLength(1);

    await updateConnection(testCommandDeps(db.pool, fakeTemporal().client), id, { config: config(fake.url, {}) });
    expect(await cursorRows(id)).toEqual([]);
    await runPass(deps, id, 'items', 'incremental');
    expect([...(await storedRecords(db.pool, id, 'items')).keys()].sort()).toEqual(['closed-1', 'open-1']);
  });

  it('a PATCH that leaves the listing as it was keeps the cursor', async () => {
    const fake = await provider();
    const id = await createHttpConnection(db.pool, config(fake.url, { status: 'open' }), 'kept');
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, id, 'items', 'incremental');
    const before = await cursorRows(id);
    await updateConnection(testCommandDeps(db.pool, fakeTemporal().client), id, { config: { ...config(fake.url, { status: 'open' }), pagination: { type: 'none' } } });
    expect(await cursorRows(id)).toEqual(before);
  });

  it('a pass of the old listing that ends after the PATCH committed does not set the cursor the PATCH dropped', async () => {
    let patch: (() => Promise<unknown>) | null = null;
    const fake = await provider(async () => {
      const change = patch;
      patch = null;
      await change?.();
    });
    const id = await createHttpConnection(db.pool, config(fake.url, { status: 'open' }), 'raced');
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, id, 'items', 'incremental');
    // The next pass has read the old config when its request reaches the provider, which then sees the PATCH commit.
    patch = () => updateConnection(testCommandDeps(db.pool, fakeTemporal().client), id, { config: config(fake.url, {}) });
    await runPass(deps, id, 'items', 'incremental');
    expect(patch).toBeNull();
    expect(await cursorRows(id)).toEqual([]);
    await runPass(deps, id, 'items', 'incremental');
    expect([...(await storedRecords(db.pool, id, 'items')).keys()].sort()).toEqual(['closed-1', 'open-1']);
  });

  it('a full pass of the old listing that ends after the PATCH committed tombstones nothing the new listing serves', async () => {
    let patch: (() => Promise<unknown>) | null = null;
    const fake = await provider(async () => {
      const change = patch;
      patch = null;
      await change?.();
    });
    const id = await createHttpConnection(db.pool, config(fake.url, {}), 'full-raced');
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, id, 'items', 'full');
    const commands = testCommandDeps(db.pool, fakeTemporal().client);
    // Narrowed to the open items, then, while a full pass reads that listing, widened again.
    await updateConnection(commands, id, { config: config(fake.url, { status: 'open' }) });
    patch = () => updateConnection(commands, id, { config: config(fake.url, {}) });
    const { result } = await runPass(deps, id, 'items', 'full');
    expect(patch).toBeNull();
    expect(result.status).toBe('completed');

    // The provider has both items, and the stored config lists both: neither is a tombstone.
    const stored = await storedRecords(db.pool, id, 'items');
    expect([...stored.values()].filter((r) => r.deleted_at !== null).map((r) => r.external_id)).toEqual([]);
    expect(result.deletedCount).toBe(0);
  });
});
