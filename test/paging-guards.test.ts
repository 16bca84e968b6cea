// No job can page forever: a provider whose Link header points back to an earlier page fails its
// task within two pages of the cycle, as a permanent error naming the connector and the page, and
// a task past PROVIDER_MAX_PAGES_PER_TASK fails the same way. The Link cycle runs as a real sync job on the
// time-skipping server with Postgres and the github connector against a local fake on 127.0.0.1.
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pagesOf } from '../connectors/pages';
import { DEFAULT_PROVIDER_POLICY } from '../connectors/provider-http';
import { Permanent, type Connector } from '../connectors/types';
import { syncJobWorkflowId } from '../temporal/ids';
import type { SyncJobResult } from '../temporal/sync-job';
import type { TestDatabase } from './helpers/database';
import { sealedTestCredentials } from './helpers/deps';
import { serve } from './helpers/fake-server';
import { useWorkerStack } from './helpers/stack';

const TASK_QUEUE = 'paging-guards';
const TOKEN = 'ghp_cycle_token_value_123456';

/** A GitHub-like pulls endpoint of 3 pages whose page 3 links back to page 2 (rel="next"). */
async function startCycleServer() {
  const requests: string[] = [];
  const server = await serve((req, res, self) => {
    requests.push(req.url ?? '');
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const page = Number(url.searchParams.get('page') ?? 1);
    const link = (p: number) => `<${self.url}/repositories/7/pulls?page=${p}>; rel="next"`;
    const next = page === 3 ? 2 : page + 1;
    res.writeHead(200, { 'content-type': 'application/json', link: link(next) });
    res.end(JSON.stringify([{ number: page, updated_at: `2025-01-0${page}T00:00:00Z`, title: `PR ${page}` }]));
  });
  return { baseUrl: server.url, requests, close: () => server.close() };
}

describe('paging guards', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let fake: Awaited<ReturnType<typeof startCycleServer>>;
  beforeAll(async () => {
    ({ env, db } = stack);
    fake = await startCycleServer();
  });
  afterAll(async () => {
    await fake?.close();
  });

  it('a Link header pointing back to page 2 fails the task after page 3 with a permanent error naming the connector and the page', async () => {
    const id = randomUUID();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (id, tenant_id, provider_slug, app_key, config, credentials, metadata)
       values ($3, 'acme', 'github', 'cycle', $1, $2, '{"sync": {"interval_seconds": 3600}}') returning id`,
      [{ base_url: fake.baseUrl, repositories: ['octo/cycle'], resource_types: ['pull_requests'] }, sealedTestCredentials(id, { token: TOKEN }), id],
    );
    const connectionId = rows[0]!.id;
    const jobId = randomUUID();
    await db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger) values ($1, $2, 'acme', 'full', 'manual')`,
      [jobId, connectionId],
    );
    const result = await env.client.workflow.execute<(i: { jobId: string; connectionId: string }) => Promise<SyncJobResult>>('syncJobWorkflow', {
      taskQueue: TASK_QUEUE,
      workflowId: syncJobWorkflowId(jobId),
      args: [{ jobId, connectionId }],
    });
    expect(result.status).toBe('failed');
    // Pages 1, 2, 3, each page before asked again once the next was read (newest first, pages are
    // positions) — and page 3's link back to page 2 is refused before page 2 is read as a next page again.
    expect(fake.requests.map((u) => new URL(u, 'http://x').searchParams.get('page') ?? '1')).toEqual(['1', '2', '1', '3', '2']);
    const { rows: jobs } = await db.pool.query<{ status: string; error: string; retry_count: number }>(
      'select status, last_error as error, retry_count from sync_jobs where id = $1',
      [jobId],
    );
    expect(jobs[0]).toMatchObject({ status: 'failed', retry_count: 0 });
    expect(jobs[0]!.error).toContain('github connector');
    expect(jobs[0]!.error).toContain('paging loop');
    expect(jobs[0]!.error).toContain(`${fake.baseUrl}/repositories/7/pulls?page=2`);
    expect(jobs[0]!.error).not.toContain(TOKEN);
  });

  it('a task past the maximum pages fails as permanent, naming the connector and the page it stopped before', async () => {
    let fetched = 0;
    const endless: Connector = {
      slug: 'endless',
      resourceTypes: () => ['items'],
      fetchPage: async ({ pageToken }) => {
        fetched += 1;
        const n = Number(pageToken ?? 0) + 1;
        return { records: [], nextPageToken: String(n) };
      },
    };
    const request = { resource: 'items', since: null, until: null, config: {}, credentials: null, policy: { ...DEFAULT_PROVIDER_POLICY, maxPagesPerTask: 5 } };
    const err = await (async () => {
      try {
        for await (const _page of pagesOf(endless, request, null)) {
          // consume
        }
      } catch (e) {
        return e as Error;
      }
      throw new Error('expected the loop to fail');
    })();
    expect(err).toBeInstanceOf(Permanent);
    expect(err.message).toMatch(/^endless connector: items: more than 5 pages in one task \(PROVIDER_MAX_PAGES_PER_TASK\); stopped before page '5'/);
    expect(fetched).toBe(5);

    // A resumed task counts the pages it had already fetched.
    fetched = 0;
    const resumed = pagesOf(endless, request, '3', { pages: 3, records: 0 });
    await expect((async () => {
      for await (const _page of resumed) {
        // consume
      }
    })()).rejects.toThrow(/more than 5 pages/);
    expect(fetched).toBe(2);
    expect(DEFAULT_PROVIDER_POLICY.maxPagesPerTask).toBeGreaterThan(1000);
  });

  it('a cursor that repeats an earlier token fails at once instead of fetching it again', async () => {
    const tokens = ['a', 'b', 'c', 'b'];
    let i = 0;
    const circular: Connector = {
      slug: 'circular',
      resourceTypes: () => ['items'],
      fetchPage: async () => ({ records: [], nextPageToken: tokens[i++] ?? null }),
    };
    const seen: (string | null)[] = [];
    const run = async () => {
      for await (const page of pagesOf(circular, { resource: 'items', since: null, until: null, config: {}, credentials: null }, null)) {
        seen.push(page.nextPageToken);
      }
    };
    await expect(run()).rejects.toThrow("circular connector: items: paging loop: page 4 points back to 'b'");
    expect(i).toBe(4);
  });
});
