// A connection whose listing of a resource changes (a PATCH of its path, params, records, id, ...)
// must read that resource whole on its next incremental pass: the cursor and ETags of the old
// listing say nothing of the records the new one serves. Runs the sync activity directly against
// real Postgres and a fake provider on 127.0.0.1 that honours `status` and `updated_since`.
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { syncTask } from '../activities/sync-task';
import { updateConnection } from '../commands/connections';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps, testCommandDeps } from './helpers/deps';
import { initialItems, useFakeHttpProviders } from './helpers/fake-http-provider';
import { closeFakeServers, serve } from './helpers/fake-server';
import { fakeTemporal } from './helpers/fake-temporal';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);
const startProvider = useFakeHttpProviders();

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

describe('http connector: a task resumed after its listing changed', () => {
  it('reads the new listing from its first page, not the rest of the old one: nothing the new listing serves is skipped for good', async () => {
    const items = [
      { id: 'closed-1', status: 'closed', updated_at: '2024-06-01T00:00:00Z' },
      { id: 'open-1', status: 'open', updated_at: '2025-01-01T00:00:00Z' },
      { id: 'open-2', status: 'open', updated_at: '2025-01-01T00:00:01Z' },
    ];
    let failAt: string | null = '1';
    // One item a page, by a cursor (its position); `status` and `updated_since` filter.
    const fake = await serve((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const at = url.searchParams.get('cursor') ?? '0';
      if (at === failAt) {
        failAt = null;
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"error": "try again"}');
        return;
      }
      const status = url.searchParams.get('status');
      const since = url.searchParams.get('updated_since');
      const listed = items.filter((i) => (!status || i.status === status) && (!since || i.updated_at >= since));
      const n = Number(at);
      const body = { items: listed.slice(n, n + 1), meta: { next: n + 1 < listed.length ? String(n + 1) : null } };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    const paged = (params: Record<string, string>) => ({ ...config(fake.url, params), pagination: { type: 'cursor', path: 'meta.next', param: 'cursor' } });
    const id = await createHttpConnection(db.pool, paged({ status: 'open' }), 'resumed');
    const { deps } = testActivityDeps({ pool: db.pool });

    // An incremental pass of the open items fails after its first page...
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status) values ($1, $2, 'acme', 'incremental', 'manual', 'running')`,
      [jobId, id],
    );
    const { rows } = await db.pool.query<{ id: string }>(`insert into sync_tasks (job_id, resource_type) values ($1, 'items') returning id`, [jobId]);
    const input = { jobId, taskId: rows[0]!.id, resourceType: 'items', mode: 'incremental' as const };
    await expect(new MockActivityEnvironment({ attempt: 1 }).run(syncTask(deps), input)).rejects.toThrow();
    expect([...(await storedRecords(db.pool, id, 'items')).keys()]).toEqual(['open-1']);

    // ...the listing is widened to every item, and the task's retry runs under the new config.
    await updateConnection(testCommandDeps(db.pool, fakeTemporal().client), id, { config: paged({}) });
    await new MockActivityEnvironment({ attempt: 2 }).run(syncTask(deps), input);
    await db.pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [jobId]);
    await runPass(deps, id, 'items', 'incremental');

    expect([...(await storedRecords(db.pool, id, 'items')).keys()].sort()).toEqual(['closed-1', 'open-1', 'open-2']);
  });
});

describe('http connector: a task resumed after its pagination changed', () => {
  it('pages with the new settings from the first page, not on from the old position: every record the provider has is stored', async () => {
    // Pages numbered from 0, two items each; the connection first says they count from 1 (the default).
    const fake = await startProvider({ size: 2, initial: initialItems(8, Date.parse('2025-01-01T00:00:00Z')), pagesFrom: 0 });
    const paged = (start: number) => ({
      base_url: fake.baseUrl,
      pagination: { type: 'page_number', param: 'page', start, size_param: 'per_page', size: 2 },
      resources: { items: { path: '/page/items', records: 'results', id: 'id', updated_at: 'updated_at', since: { param: 'updated_since' } } },
    });
    const id = await createHttpConnection(db.pool, paged(1), 'repaged');
    const { deps } = testActivityDeps({ pool: db.pool });

    // A full pass fails at its third page (page 3), pages 1 and 2 stored...
    fake.failRequest = (url) => url.searchParams.get('page') === '3';
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status) values ($1, $2, 'acme', 'full', 'manual', 'running')`,
      [jobId, id],
    );
    const { rows } = await db.pool.query<{ id: string }>(`insert into sync_tasks (job_id, resource_type) values ($1, 'items') returning id`, [jobId]);
    const input = { jobId, taskId: rows[0]!.id, resourceType: 'items', mode: 'full' as const };
    await expect(new MockActivityEnvironment({ attempt: 1 }).run(syncTask(deps), input)).rejects.toThrow();
    expect([...(await storedRecords(db.pool, id, 'items')).keys()].sort()).toEqual(['i00003', 'i00004', 'i00005', 'i00006']);

    // ...the pages are said to count from 0, and the task's retry runs under the new config.
    fake.failRequest = null;
    await updateConnection(testCommandDeps(db.pool, fakeTemporal().client), id, { config: paged(0) });
    await new MockActivityEnvironment({ attempt: 2 }).run(syncTask(deps), input);
    await db.pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [jobId]);

    const stored = await storedRecords(db.pool, id, 'items');
    expect([...stored.keys()].sort()).toEqual(fake.list().map((i) => i.id));
    expect([...stored.values()].filter((r) => r.deleted_at !== null)).toEqual([]);
  });
});
