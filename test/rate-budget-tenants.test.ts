// The shared rate budget between tenants, against a fake http provider on 127.0.0.1 and real
// Postgres, the sync activities run directly (no Temporal server): two tenants holding the same
// token have a budget each, so one tenant's connection mapping its `rate_limit` headers to a reset
// decades away (a poisoned budget) cannot hold the other's jobs or immediate syncs back; a stated
// reset beyond RATE_BUDGET_MAX_RESET_SECONDS is capped, and the job's error says so. The budget's
// fingerprint is an HMAC keyed from the credentials keyring, and a purge deletes the budgets its
// connection alone used.
import { createHash, randomUUID } from 'node:crypto';
import type { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toActivityFailure } from '../services/connector-failure';
import { purgeConnectionBatch } from '../activities/purge-connection';
import { credentialFingerprint } from '../services/rate-budget';
import { syncImmediately } from '../activities/sync-immediately';
import { RateLimited } from '../connectors/types';
import { parseKeyring, sealCredentials } from '../lib/credentials';
import type { ImmediateSyncResult } from '../temporal/immediate-sync';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING, testActivityDeps } from './helpers/deps';
import { initialItems, startFakeHttpProvider, type FakeHttpProvider } from './helpers/fake-http-provider';
import { runPass } from './helpers/http-sync';

const TOKEN = 'tok_shared_by_two_tenants_0123456789';
/** Epoch seconds in 2065: the reset tenant A's mapping reads. */
const POISON = '3000000000';

describe('rate budgets between tenants', () => {
  let db: TestDatabase;
  let provider: FakeHttpProvider;

  beforeAll(async () => {
    db = await createTestDatabase();
    // Every answer carries a header saying 0 and one saying 3000000000: whoever maps them as the
    // remaining count and the reset reads "none left until 2065".
    provider = await startFakeHttpProvider({ size: 4, initial: initialItems(10, Date.parse('2025-01-01T00:00:00Z')), headers: { 'x-zero': '0', 'x-big': POISON } });
  });
  afterAll(async () => {
    await provider?.close();
    await db?.drop();
  });

  const config = (extra: Record<string, unknown> = {}) => ({
    base_url: provider.baseUrl,
    auth: { type: 'bearer' },
    pagination: { type: 'link_header' },
    resources: { items: { path: '/link/items', id: 'id', updated_at: 'updated_at' } },
    ...extra,
  });
  /** A poisoning connection: its `rate_limit` mapping reads the provider's 0 and 3000000000. */
  const POISONED = { rate_limit: { remaining_header: 'x-zero', reset_header: 'x-big', reset_format: 'epoch_seconds' } };

  async function connection(tenant: string, cfg: Record<string, unknown>): Promise<string> {
    const id = randomUUID();
    await db.pool.query(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials) values ($1, $2, 'http', $3, $4, $5)`,
      [id, tenant, `c-${id}`, cfg, JSON.stringify(sealCredentials(TEST_KEYRING, id, { token: TOKEN }))],
    );
    return id;
  }
  const budgets = async () =>
    (await db.pool.query<{ fingerprint: string; tenant_id: string; remaining: number | null; reset_at: Date | null; reset_capped_from: Date | null; capped_by: Date }>(
      `select fingerprint, tenant_id, remaining, reset_at, reset_capped_from, now() + interval '3600 seconds' as capped_by from rate_budgets order by tenant_id`,
    )).rows;

  it("tenant A's poisoned reset neither holds tenant B's job nor its immediate sync; A's own wait is capped at an hour and its error says so", async () => {
    const { deps } = testActivityDeps({ pool: db.pool });
    const a = await connection('tenant-a', config(POISONED));
    const b = await connection('tenant-b', config());

    // A: the first page's answer says "0 left until 2065"; the next request waits, at most an hour.
    const err = (await runPass(deps, a, 'items', 'full').catch((e: unknown) => e)) as ApplicationFailure;

    // B holds the same token: its job and its immediate sync run to the end.
    const { result } = await runPass(deps, b, 'items', 'full');
    expect(result).toMatchObject({ status: 'completed', entityCount: 10 });
    const env = new MockActivityEnvironment({ attempt: 1 });
    const immediate = (await env.run(syncImmediately(deps), { connectionId: b, mode: 'full' as const })) as ImmediateSyncResult;
    expect(immediate.resources).toEqual([expect.objectContaining({ resourceType: 'items', entityCount: 10 })]);

    // A's own wait: capped.
    expect(err.type).toBe('rate_limited');
    expect(err.message).toMatch(/down to its reserve \(0 left of 5 kept\); waiting for the provider's reset at .*\(the provider stated a reset at 2065-01-24T05:20:00.000Z, more than RATE_BUDGET_MAX_RESET_SECONDS = 3600 s away: capped\)/);
    const wait = (err.details?.[0] as { retryAfterSeconds: number }).retryAfterSeconds;
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(3600);

    // A budget each; A's reset stored as the cap, the stated one kept beside it; B's never poisoned.
    const [budgetA, budgetB] = await budgets();
    expect(budgetA).toMatchObject({ tenant_id: 'tenant-a', remaining: 0, reset_capped_from: new Date(Number(POISON) * 1000) });
    expect(budgetA!.reset_at!.getTime()).toBeLessThanOrEqual(budgetA!.capped_by.getTime());
    expect(budgetB).toMatchObject({ tenant_id: 'tenant-b', reset_capped_from: null });
    expect(budgetB!.reset_at).toBeNull();

    // The bound is configurable (RATE_BUDGET_MAX_RESET_SECONDS).
    const cappedDeps = testActivityDeps({ pool: db.pool, connectors: { maxResetSeconds: 120 } }).deps;
    await db.pool.query('delete from rate_budgets');
    const again = (await runPass(cappedDeps, a, 'items', 'full').catch((e: unknown) => e)) as ApplicationFailure;
    expect(again.message).toContain('more than RATE_BUDGET_MAX_RESET_SECONDS = 120 s away: capped');
    expect((again.details?.[0] as { retryAfterSeconds: number }).retryAfterSeconds).toBeLessThanOrEqual(120);

    // A rate limit's own wait (a 429's Retry-After or stated reset) is capped where it becomes the activity's failure.
    const limited = toActivityFailure(new RateLimited('http connector: rate limited on items (429)', 3_000_000_000), [], 3600) as ApplicationFailure;
    expect(limited.details).toEqual([{ retryAfterSeconds: 3600 }]);
    expect(limited.message).toBe('http connector: rate limited on items (429) (the provider asked to wait 3000000000 s, more than RATE_BUDGET_MAX_RESET_SECONDS = 3600 s: capped)');
  });

  it('fingerprints are HMACs keyed from the keyring, per tenant; a purge deletes the budgets no other connection of the tenant uses', async () => {
    const credentials = { token: TOKEN };
    const fingerprint = credentialFingerprint(TEST_KEYRING, 'tenant-a', 'http', credentials);
    // Not the old unsalted SHA-256, and not computable without the key.
    const unsalted = createHash('sha256').update('synctide rate budget v1\0').update('http').update('\0').update(JSON.stringify(credentials)).digest('hex');
    expect(fingerprint).not.toBe(unsalted);
    const otherKey = parseKeyring({ CREDENTIALS_KEY: Buffer.alloc(32, 7).toString('base64') })!;
    expect(credentialFingerprint(otherKey, 'tenant-a', 'http', credentials)).not.toBe(fingerprint);
    expect(credentialFingerprint(TEST_KEYRING, 'tenant-b', 'http', credentials)).not.toBe(fingerprint);
    expect(credentialFingerprint(TEST_KEYRING, 'tenant-a', 'http', { token: TOKEN })).toBe(fingerprint);

    await db.pool.query('delete from rate_budgets');
    const { deps } = testActivityDeps({ pool: db.pool });
    const [a1, a2, b] = [await connection('tenant-c', config()), await connection('tenant-c', config()), await connection('tenant-d', config())];
    for (const id of [a1, a2, b]) expect((await runPass(deps, id, 'items', 'full')).result.status).toBe('completed');
    const stored = await budgets();
    expect(stored.map((r) => r.tenant_id)).toEqual(['tenant-c', 'tenant-d']);
    expect(stored[0]!.fingerprint).toBe(credentialFingerprint(TEST_KEYRING, 'tenant-c', 'http', credentials));
    expect(JSON.stringify(stored)).not.toContain(TOKEN);

    const purge = async (connectionId: string, tenant: string) => {
      const { rows } = await db.pool.query<{ id: string }>('insert into connection_purges (connection_id, tenant_id) values ($1, $2) returning id', [connectionId, tenant]);
      const env = new MockActivityEnvironment({ attempt: 1 });
      expect(await env.run(purgeConnectionBatch(deps), { purgeId: rows[0]!.id, connectionId })).toMatchObject({ done: true });
    };
    // a2 still uses tenant-c's budget: it stays; once a2 goes too, so does the budget.
    await purge(a1, 'tenant-c');
    expect((await budgets()).map((r) => r.tenant_id)).toEqual(['tenant-c', 'tenant-d']);
    await purge(a2, 'tenant-c');
    expect((await budgets()).map((r) => r.tenant_id)).toEqual(['tenant-d']);
    const { rows: usage } = await db.pool.query<{ connection_id: string }>('select connection_id from rate_budget_connections where connection_id = any($1)', [[a1, a2, b]]);
    expect(usage.map((r) => r.connection_id)).toEqual([b]);
  });
});
