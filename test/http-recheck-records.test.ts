// What a full pass's deletion step stores of the records its item lookups find alive: the same as a
// listing page would store of them (connectors/pages.ts), since both are provider data written to
// the same rows. Runs the sync activity directly against real Postgres and a fake provider on
// 127.0.0.1 whose listing is declared not consistent (`stable: false`), so every record it did not
// list is looked up by id before anything is deleted.
import { afterEach, describe, expect, it } from 'vitest';
import { upsertRecords } from '../db/models/records';
import type { Pool } from '../db/pool';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass, storedRecords } from './helpers/http-sync';

const db = useTestDatabase();
afterEach(closeFakeServers);

const OLD = new Date(Date.now() - 2 * 3_600_000).toISOString();

/**
 * A provider listing `listed` ids of `items` (cursor paging, one page) and answering each item by
 * id, after `lookupMs` (none by default).
 */
async function provider(items: Map<string, Record<string, unknown>>, listed: () => string[], lookupMs = 0) {
  return serve(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const one = /^\/items\/([^/]+)$/.exec(url.pathname);
    if (one && lookupMs > 0) await new Promise((r) => setTimeout(r, lookupMs));
    res.writeHead(one && !items.has(decodeURIComponent(one[1]!)) ? 404 : 200, { 'content-type': 'application/json' });
    if (one) res.end(JSON.stringify(items.has(decodeURIComponent(one[1]!)) ? { item: items.get(decodeURIComponent(one[1]!)) } : { error: 'not found' }));
    else res.end(JSON.stringify({ items: listed().map((id) => items.get(id)), meta: { next_cursor: null } }));
  });
}

let seq = 0;
async function connection(baseUrl: string) {
  seq += 1;
  return createHttpConnection(
    db.pool,
    {
      base_url: baseUrl,
      pagination: { type: 'cursor', path: 'meta.next_cursor', param: 'cursor', stable: false },
      resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at', item: { path: '/items/{id}', record: 'item' } } },
    },
    `recheck-${seq}`,
  );
}

describe('http connector: records a full pass finds alive by item lookup', () => {
  it('are looked up with the run heartbeating meanwhile: a deletion step of many lookups of a slow provider outlasts a heartbeat timeout', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `r${i}`);
    const items = new Map<string, Record<string, unknown>>(ids.map((id) => [id, { id, name: id, updated_at: OLD }]));
    let listed = ids;
    const fake = await provider(items, () => listed, 400);
    const connectionId = await connection(fake.url);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');

    // The listing leaves every record out this time: each is looked up (400 ms each, 4.8 s in all).
    listed = [];
    const heartbeats: unknown[] = [];
    const { result } = await runPass(deps, connectionId, 'items', 'full', undefined, undefined, heartbeats);

    expect([result.status, result.deletedCount]).toEqual(['completed', 0]);
    // Once for its one stored page, and again while the lookups go on (where the pass stands).
    const afterLastPage = heartbeats.filter((d) => JSON.stringify(d) === JSON.stringify({ pageToken: null, pages: 1 }));
    expect(afterLastPage.length).toBeGreaterThanOrEqual(3);
  });

  it('are stored as a listing page stores them: a NUL stripped and a lone surrogate replaced, the pass completing', async () => {
    const items = new Map<string, Record<string, unknown>>([
      ['a', { id: 'a', name: 'a', updated_at: OLD }],
      ['b', { id: 'b', name: 'b', updated_at: OLD }],
    ]);
    let listed = ['a', 'b'];
    const fake = await provider(items, () => listed);
    const connectionId = await connection(fake.url);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');

    // The listing leaves 'b' out this time (it is not consistent), and the lookup finds it alive
    // with text Postgres cannot store as given: a NUL, and half of an emoji.
    listed = ['a'];
    items.set('b', { id: 'b', name: 'b\u0000 v2 \ud83d', updated_at: OLD });
    const { result } = await runPass(deps, connectionId, 'items', 'full');

    expect(result.status).toBe('completed');
    expect(result.deletedCount).toBe(0);
    const b = (await storedRecords(db.pool, connectionId, 'items')).get('b');
    expect(b?.deleted_at).toBeNull();
    expect(b?.data.name).toBe('b v2 \ufffd');
  });

  it('over PROVIDER_MAX_RECORD_BYTES fails the pass as permanent, as in a listing, storing nothing of it', async () => {
    const items = new Map<string, Record<string, unknown>>([
      ['a', { id: 'a', name: 'a', updated_at: OLD }],
      ['b', { id: 'b', name: 'b', updated_at: OLD }],
    ]);
    let listed = ['a', 'b'];
    const fake = await provider(items, () => listed);
    const connectionId = await connection(fake.url);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');

    listed = ['a'];
    items.set('b', { id: 'b', name: 'x'.repeat(deps.providers!.maxRecordBytes + 1), updated_at: OLD });
    await expect(runPass(deps, connectionId, 'items', 'full')).rejects.toMatchObject({ type: 'permanent', message: expect.stringContaining('PROVIDER_MAX_RECORD_BYTES') });
    expect((await storedRecords(db.pool, connectionId, 'items')).get('b')?.data.name).toBe('b');
  });
});

describe('http connector: re-checks across full passes', () => {
  it('a record deleted at the provider is tombstoned even when more unlisted records than one pass re-checks are always found alive (the re-checks rotate)', async () => {
    // 120 records the listing leaves out but the item lookup always finds (a listing filtered by
    // the provider, say), sorting before 'z', which the provider deletes. One pass re-checks at
    // most 100 unlisted records; the next must re-check others, so 'z' is reached.
    const alive = Array.from({ length: 120 }, (_, i) => `a${String(i).padStart(3, '0')}`);
    const items = new Map<string, Record<string, unknown>>([...alive, 'z'].map((id) => [id, { id, name: id, updated_at: OLD }]));
    let listed = [...items.keys()];
    const fake = await provider(items, () => listed);
    const connectionId = await connection(fake.url);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');
    expect((await storedRecords(db.pool, connectionId, 'items')).size).toBe(121);

    listed = [];
    items.delete('z');
    for (let pass = 0; pass < 3; pass += 1) await runPass(deps, connectionId, 'items', 'full');

    const stored = await storedRecords(db.pool, connectionId, 'items');
    expect(stored.get('z')?.deleted_at, "'z' is gone at the provider").not.toBeNull();
    expect(alive.filter((id) => stored.get(id)?.deleted_at !== null)).toEqual([]);
  });
});

describe('http connector: a full pass with nothing to re-check', () => {
  it('tombstones nothing the provider did not confirm gone, even a record another job stored meanwhile from a page fetched before the pass began', async () => {
    const items = new Map<string, Record<string, unknown>>([
      ['a', { id: 'a', name: 'a', updated_at: OLD }],
      ['b', { id: 'b', name: 'b', updated_at: OLD }],
    ]);
    // The listing (not consistent) leaves 'b' out; the provider has it.
    const fake = await provider(items, () => ['a']);
    const connectionId = await connection(fake.url);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');

    // Right after the next full pass found no deletion candidate, another job of the connection
    // stores 'b' from a page it fetched 5 s before the pass began.
    let concurrent: (() => Promise<unknown>) | null = async () => {
      const { rows } = await db.pool.query<{ started_at: Date }>(
        `select t.started_at from sync_tasks t join sync_jobs j on j.id = t.job_id where j.connection_id = $1 and t.status = 'processing'`,
        [connectionId],
      );
      const at = new Date(rows[0]!.started_at.getTime() - 5000);
      await upsertRecords(db.pool, { connectionId, resourceType: 'items', jobId: null, fetchedAt: at }, [{ externalId: 'b', updatedAt: OLD, data: items.get('b')! }]);
    };
    const query = (async (...args: Parameters<Pool['query']>) => {
      const answer = await (db.pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
      if (typeof args[0] === 'string' && args[0].includes('from records r where') && concurrent) {
        const write = concurrent;
        concurrent = null;
        await write();
      }
      return answer;
    }) as Pool['query'];
    const pool = new Proxy(db.pool, {
      get: (target, key) => (key === 'query' ? query : (Reflect.get(target, key) as unknown)),
    });
    const watched = testActivityDeps({ pool }).deps;
    const { result } = await runPass(watched, connectionId, 'items', 'full');

    expect(concurrent).toBeNull();
    expect(result.status).toBe('completed');
    expect((await storedRecords(db.pool, connectionId, 'items')).get('b')?.deleted_at).toBeNull();
  });
});

describe('http connector: re-checks after the id prefix changed', () => {
  it('a record whose id lacks the current id_prefix is gone (no listing of the config serves it): a full pass tombstones it', async () => {
    const items = new Map<string, Record<string, unknown>>([
      ['a', { id: 'a', name: 'a', updated_at: OLD }],
      ['b', { id: 'b', name: 'b', updated_at: OLD }],
    ]);
    const fake = await provider(items, () => ['a', 'b']);
    const connectionId = await connection(fake.url);
    const { deps } = testActivityDeps({ pool: db.pool });
    await runPass(deps, connectionId, 'items', 'full');

    // The same items, now stored under ids with a prefix.
    const { rows } = await db.pool.query<{ config: { resources: { items: Record<string, unknown> } } }>('select config from connections where id = $1', [connectionId]);
    const config = rows[0]!.config;
    config.resources.items.id_prefix = 'item:';
    await db.pool.query('update connections set config = $2 where id = $1', [connectionId, config]);
    const { result } = await runPass(deps, connectionId, 'items', 'full');

    expect(result.status).toBe('completed');
    const stored = await storedRecords(db.pool, connectionId, 'items');
    const live = [...stored.values()].filter((r) => r.deleted_at === null).map((r) => r.external_id).sort();
    expect(live).toEqual(['item:a', 'item:b']);
  });
});
