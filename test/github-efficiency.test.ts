// Efficient GitHub syncs, end to end through real sync jobs (time-skipping server, Postgres) against
// the fake GitHub on 127.0.0.1: pull requests newest first, stopping at the cursor; conditional
// requests (an unchanged repository costs one 304); and no pull request lost when pages shift
// because items are updated while a pass pages through them.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobResult } from '../temporal/sync-job';
import type { TestDatabase } from './helpers/database';
import { sealedTestCredentials } from './helpers/deps';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { useWorkerStack } from './helpers/stack';

const TASK_QUEUE = 'github-efficiency';
const TOKEN = 'ghp_efficiency_token_1234567890';

describe('github: efficient pull-request syncs', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let gh: FakeGitHub | undefined;
  beforeAll(() => {
    ({ env, db } = stack);
  });
  afterEach(async () => {
    await gh?.close();
    gh = undefined;
  });

  let seq = 0;
  async function connection(fake: FakeGitHub, repositories: string[]) {
    seq += 1;
    const id = randomUUID();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials, metadata)
       values ($4, 'acme', 'github', $1, $2, $3, '{"sync": {"interval_seconds": 3600}}') returning id`,
      [`eff-${seq}`, { base_url: fake.baseUrl, repositories, resource_types: ['pull_requests'], per_page: 100 }, sealedTestCredentials(id, { token: TOKEN }), id],
    );
    return rows[0]!.id;
  }
  async function runJob(connectionId: string, mode: 'full' | 'incremental') {
    const jobId = randomUUID();
    await db.pool.query(`insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', $3, 'manual')`, [
      jobId,
      connectionId,
      mode,
    ]);
    const result = await env.client.workflow.execute<(i: { jobId: string; connectionId: string }) => Promise<SyncJobResult>>('syncJobWorkflow', {
      taskQueue: TASK_QUEUE,
      workflowId: syncJobWorkflowId(jobId),
      args: [{ jobId, connectionId }],
    });
    expect(result.status).toBe('completed');
  }
  const stored = async (connectionId: string) =>
    new Map(
      (
        await db.pool.query<{ external_id: string; data: { title: string; updated_at: string } }>(
          'select external_id, data from records where connection_id = $1 and deleted_at is null',
          [connectionId],
        )
      ).rows.map((r) => [r.external_id, r.data]),
    );
  /** Requests since `from`, by repository path and status as the fake answered (304 or 200). */
  const requestsSince = (fake: FakeGitHub, from: number) => fake.requests.slice(from).map((r) => new URL(r.url, 'http://x').pathname);

  it('after a change to 1 of 1,000 pull requests an incremental sync makes one request for that repository, and an unchanged repository costs one 304', async () => {
    gh = await startFakeGitHub({ token: TOKEN, repos: { 'octo/big': { id: 501, pulls: 1000 }, 'octo/quiet': { id: 502, pulls: 40 } } });
    const id = await connection(gh, ['octo/big', 'octo/quiet']);

    await runJob(id, 'full');
    // 10 pages of big, then the head once more (unchanged: 304); quiet fits one page.
    expect((await stored(id)).size).toBe(1040);
    const afterFull = gh.requests.length;

    const touched = gh.touch('octo/big', 500);
    await runJob(id, 'incremental');
    const incremental = gh.requests.slice(afterFull);
    const perRepo = (path: string) => incremental.filter((r) => new URL(r.url, 'http://x').pathname.includes(path));
    expect(perRepo('/repos/octo/big/pulls').length + perRepo('/repositories/501/').length).toBeLessThanOrEqual(2);
    expect(perRepo('/repos/octo/big/pulls')[0]!.headers['if-none-match']).toBeDefined(); // sent, and no longer matching
    expect(perRepo('/repos/octo/quiet/pulls')).toHaveLength(1);
    expect(perRepo('/repos/octo/quiet/pulls')[0]!.headers['if-none-match']).toBeDefined();
    const records = await stored(id);
    expect(records.get('octo/big#500')).toMatchObject({ title: touched.title, updated_at: touched.updated_at });

    // Nothing changed since: one conditional request per repository, each a 304.
    const before = gh.requests.length;
    await runJob(id, 'incremental');
    expect(requestsSince(gh, before)).toEqual(['/repos/octo/big/pulls', '/repos/octo/quiet/pulls']);
    const { rows: etags } = await db.pool.query('select url from provider_etags where connection_id = $1', [id]);
    expect(etags).toHaveLength(2);
  });

  it('a pull request updated while a pass pages through (moving to the head, out of the pages ahead) is still fetched in that pass and never deleted', async () => {
    gh = await startFakeGitHub({ token: TOKEN, repos: { 'octo/shift': { id: 601, pulls: 250 } } });
    const id = await connection(gh, ['octo/shift']);
    await runJob(id, 'full');
    expect((await stored(id)).size).toBe(250);

    // Newest first, #1 is the newest: page 1 holds #1–#100, page 3 #201–#250. After page 1 of the
    // next full pass, #230 (on a page still ahead) and #5 (already read) are edited: both move to
    // the head, and every item shifts down by two. Without a second look at the head #230 would
    // never be read in this pass, and the full pass would delete it as unseen.
    const start = gh.requests.length;
    let edited: ReturnType<FakeGitHub['touch']>[] = [];
    gh.afterServe = (n) => {
      if (n === start + 1) edited = [gh!.touch('octo/shift', 230), gh!.touch('octo/shift', 5)];
    };
    await runJob(id, 'full');
    gh.afterServe = null;
    const records = await stored(id);
    expect(records.size).toBe(250);
    for (const item of edited) expect(records.get(`octo/shift#${item.number}`)).toMatchObject({ title: item.title, updated_at: item.updated_at });
    // Three pages, after each but the first the page before asked again (page 1 moved, page 2 not),
    // then the head again: one page down to where the pass began.
    expect(requestsSince(gh, start)).toEqual([
      '/repos/octo/shift/pulls',
      '/repositories/601/pulls',
      '/repos/octo/shift/pulls',
      '/repositories/601/pulls',
      '/repositories/601/pulls',
      '/repos/octo/shift/pulls',
    ]);
    const { rows: tombstones } = await db.pool.query('select count(*)::int as n from records where connection_id = $1 and deleted_at is not null', [id]);
    expect(tombstones[0].n).toBe(0);
  });
});
