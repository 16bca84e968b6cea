// Credentials given through the API while a sync runs with the ones before: a real provider on
// 127.0.0.1 (test/helpers/fake-oauth.ts, its `/pages` resource behind a bearer token), real
// Postgres, the sync activity run as a worker runs it (MockActivityEnvironment). The run that meets
// the provider's refusal of the token it opened is tried again with the credentials stored now, not
// failed for good.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { updateConnection } from '../commands/connections';
import type { CommandDeps } from '../commands/deps';
import { createTestDatabase, type TestDatabase } from './helpers/database';
import { TEST_KEYRING, TEST_PROVIDER_POLICY } from './helpers/deps';
import { startFakeOAuth, type FakeOAuth } from './helpers/fake-oauth';
import { completeJob, createHttpConnection, runningJob, startTask } from './helpers/http-sync';

let db: TestDatabase;
let oauth: FakeOAuth;

beforeAll(async () => {
  [db, oauth] = await Promise.all([createTestDatabase(), startFakeOAuth()]);
});
afterAll(async () => {
  await oauth?.close();
  await db?.drop();
});

const commandDeps = () => ({ pool: db.pool, credentials: TEST_KEYRING, providers: TEST_PROVIDER_POLICY, maxIntervalSeconds: 86_400 }) as unknown as CommandDeps;

const config = () => ({
  base_url: oauth.url,
  auth: { type: 'bearer' },
  pagination: { type: 'page_number', param: 'page', max_reads: 1 },
  resources: { pages: { path: '/pages', id: 'id', updated_at: 'updated_at' } },
});

describe('a static token replaced through the API while a sync uses the one before', () => {
  it('the 401 the old token meets fails the run as retryable, and its retry syncs every record with the new token', async () => {
    oauth.pageCount = 4;
    oauth.pageSize = 5;
    const oldToken = 'static_token_old_0123456789abcdef';
    const newToken = 'static_token_new_0123456789abcdef';
    oauth.accessTokens.add(oldToken);
    oauth.accessTokens.add(newToken);
    const id = await createHttpConnection(db.pool, config(), 'static-replaced');
    await updateConnection(commandDeps(), id, { credentials: { token: oldToken } });
    const { jobId, tasks } = await runningJob(db.pool, id, ['pages'], 'full');
    // While page 2 is answered, the user gives the new token and revokes the old one at the provider.
    oauth.beforePageAnswer = async (page) => {
      if (page !== 2) return;
      oauth.beforePageAnswer = null;
      const row = await updateConnection(commandDeps(), id, { credentials: { token: newToken } });
      expect([row.status, row.credential_kind]).toEqual(['active', 'token']);
      oauth.accessTokens.delete(oldToken);
    };
    const task = { jobId, taskId: tasks[0]!, resourceType: 'pages', mode: 'full' as const };
    try {
      const first = await startTask(db.pool, task).result.then(() => null, (e: Error & { nonRetryable?: boolean }) => e);
      expect(first?.message).toMatch(/credentials changed/);
      expect(first?.nonRetryable).toBe(false);
      // Temporal's retry of the activity (attempt 2) takes the task over and syncs with the new token.
      const retried = await startTask(db.pool, task, 2).result;
      expect(retried.status).toBe('completed');
      const { rows } = await db.pool.query<{ n: number }>('select count(*)::int as n from records where connection_id = $1 and deleted_at is null', [id]);
      expect(rows[0]!.n).toBe(oauth.pageCount * oauth.pageSize);
    } finally {
      oauth.beforePageAnswer = null;
      await completeJob(db.pool, jobId);
    }
  });

  it('a token refused while it is still the one stored fails the run for good, as before', async () => {
    oauth.pageCount = 2;
    oauth.pageSize = 5;
    const id = await createHttpConnection(db.pool, config(), 'static-refused');
    await updateConnection(commandDeps(), id, { credentials: { token: 'static_token_revoked_0123456789' } });
    const { jobId, tasks } = await runningJob(db.pool, id, ['pages'], 'full');
    try {
      const err = await startTask(db.pool, { jobId, taskId: tasks[0]!, resourceType: 'pages', mode: 'full' }).result.then(() => null, (e: Error & { nonRetryable?: boolean }) => e);
      expect(err?.message).toMatch(/rejected the credentials/);
      expect(err?.nonRetryable).toBe(true);
    } finally {
      await completeJob(db.pool, jobId);
    }
  });
});
