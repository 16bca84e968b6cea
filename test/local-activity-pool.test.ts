// The worker's local activities (the bookkeeping a workflow task waits for, holding its slot) run
// on a pool of their own, so they never queue for a connection behind paging activities; the same
// activity run as a regular activity uses the worker's pool. Real Postgres, two real pools, the
// activity run as a worker runs it (MockActivityEnvironment, local or not).
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../activities';
import { createPool, type Pool } from '../db/pool';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

let db: TestDatabase;
let paging: Pool;
let local: Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  paging = createPool(db.url, 2);
  local = createPool(db.url, 2);
});
afterAll(async () => {
  await Promise.all([paging?.end(), local?.end()]);
  await db?.drop();
});

describe('the local activities pool', () => {
  it('serves an activity run as a local activity; the worker pool serves it run as a regular one', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, '{}') returning id`,
      [`local-${randomUUID().slice(0, 8)}`],
    );
    const { deps } = testActivityDeps({ pool: paging });
    const activities = createActivities({ ...deps, localPool: local });
    const load = () => activities.loadConnectionContext(rows[0]!.id, Date.now());

    const asLocal = (await new MockActivityEnvironment({ isLocal: true }).run(load)) as Awaited<ReturnType<typeof load>>;
    expect(asLocal?.connectionId).toBe(rows[0]!.id);
    expect([local.totalCount, paging.totalCount]).toEqual([1, 0]);

    const asRegular = await new MockActivityEnvironment({ isLocal: false }).run(load);
    expect(asRegular).toEqual(asLocal);
    expect([local.totalCount, paging.totalCount]).toEqual([1, 1]);
  });
});
