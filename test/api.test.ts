// The REST API end to end over HTTP: a real API server (Hono on node:http) in front of the
// Temporal dev server, a Synctide worker and Postgres. Covers POST /sync and job status, backfills
// with POST /jobs/schedule, connection management through the workflow, metrics,
// redaction and the OpenAPI document.
import { Validator } from '@seriousme/openapi-schema-validator';
import { Pool } from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../api/app';
import { createSynctideClient, type SynctideClient } from '../clients/typescript';
import { BackgroundStarts } from '../lib/background-starts';
import { listen, type HttpServer } from '../lib/http';
import { countActiveJobsByStatus } from '../db/models/jobs';
import { registerQueueDepthGauge, registerStateGauges } from '../lib/metrics';
import { ensureConnectionWorkflow } from '../temporal/client';
import { connectionWorkflowId } from '../temporal/ids';
import { startFakeGitHub, type FakeGitHub } from './helpers/fake-github';
import { DEFAULT_RATE_LIMIT_SETTINGS, TEST_KEYRING, TEST_PROVIDER_POLICY } from './helpers/deps';
import { DEFAULT_RATE_LIMIT_POLICY } from '../policy/rate-limit';
import { capturingLogger } from './helpers/logs';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';
import { databaseStateCounts } from '../infra/boot';

const TASK_QUEUE = 'api-e2e';
const KEY = 'test-admin-key-0123456789abcdef';
const TOKEN = 'ghp_secret_token_do_not_log_0123456789';

interface Answer<T = any> {
  status: number;
  body: T;
  text: string;
}

describe('REST API over HTTP', () => {
  // A rate-limited task is tried again after 1 s (the provider's Retry-After), not the default 5 s.
  const stack = useWorkerStack('dev-server', TASK_QUEUE, { rateLimit: { ...DEFAULT_RATE_LIMIT_SETTINGS, defaults: { ...DEFAULT_RATE_LIMIT_POLICY, baseSeconds: 1 } } });
  const apiLog = capturingLogger();
  const answers: string[] = [];
  let server: HttpServer;
  let github: FakeGitHub;
  /** The generated typed client (clients/typescript) against this file's real server. */
  let api: SynctideClient;

  beforeAll(async () => {
    // As boot.ts does for api/main.ts: the queue depth and the state gauges are read from Postgres at each scrape.
    registerQueueDepthGauge(stack.registry, () => countActiveJobsByStatus(stack.db.pool));
    registerStateGauges(stack.registry, databaseStateCounts(stack.db.pool));
    // As api/main.ts runs it: a requested job's workflow starts after the answer.
    server = await listen(appWith(stack.db.pool, { background: new BackgroundStarts((err) => console.error(err)) }), '127.0.0.1', 0);
    api = createSynctideClient({ baseUrl: server.url, apiKey: KEY });
    // Its answers are checked with the hand-made calls' (no secret in any answer).
    api.use({ onResponse: async ({ response }) => void answers.push(await response.clone().text()) });
    github = await startFakeGitHub({ token: TOKEN, repos: { 'acme/app': { issues: 30, pulls: 5 } } });
  });
  // Shown when a test failed: the API's own account of its 5xx answers.
  afterEach((context) => {
    if (context.task.result?.state === 'fail') {
      for (const line of apiLog.lines) if (line.level === 'error' || line.level === 'fatal') console.error(JSON.stringify(line));
    }
  });
  afterAll(async () => {
    await server?.close();
    await github?.close();
  });

  /** The API app on this file's Temporal server and registry, with `pool` (and any other `deps`). */
  const appWith = (pool: typeof stack.db.pool, deps: Partial<Parameters<typeof createApp>[0]> = {}) =>
    createApp({
      pool,
      temporal: stack.env.client,
      registry: stack.registry,
      metrics: stack.metrics,
      logger: apiLog.logger,
      taskQueue: TASK_QUEUE,
      adminApiKey: KEY,
      credentials: TEST_KEYRING,
      maxIntervalSeconds: 86_400,
      immediateSyncTimeoutMs: 60_000,
      providers: TEST_PROVIDER_POLICY,
      ...deps,
    });

  /** One HTTP call; the admin key is sent unless `auth` says otherwise. */
  async function call<T = any>(
    method: string,
    path: string,
    body?: unknown,
    opts: { auth?: string | null; headers?: Record<string, string>; raw?: string } = {},
  ): Promise<Answer<T>> {
    const headers: Record<string, string> = { ...opts.headers };
    const auth = opts.auth === undefined ? KEY : opts.auth;
    if (auth !== null) headers.authorization = `Bearer ${auth}`;
    const payload = opts.raw ?? (body === undefined ? undefined : JSON.stringify(body));
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${server.url}${path}`, { method, headers, body: payload });
    const text = await res.text();
    answers.push(text);
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON (metrics, docs)
    }
    return { status: res.status, body: parsed as T, text };
  }

  const count = async (sql: string, params: unknown[] = []) =>
    (await stack.db.pool.query<{ n: number }>(`select count(*)::int as n from ${sql}`, params)).rows[0]!.n;

  async function createConnection(appKey: string, extra: Record<string, unknown> = {}) {
    const { data, error, response } = await api.POST('/connections', {
      body: {
        tenant_id: 'acme',
        app_key: appKey,
        provider: 'demo',
        config: { records_per_resource: 20, page_size: 10 },
        schedule: { interval_seconds: 3600 },
        ...extra,
      },
    });
    expect(response.status, JSON.stringify(error)).toBe(201);
    return data!;
  }

  const jobDone = (id: string) =>
    eventually(async () => {
      const { data } = await api.GET('/jobs/{id}', { params: { path: { id }, query: { include_tasks: 'true' } } });
      return data && ['completed', 'failed', 'cancelled'].includes(data.status) ? (data as any) : undefined;
    });

  it('answers 401 without or with a wrong key and creates nothing', async () => {
    const before = { jobs: await count('sync_jobs'), connections: await count('connections') };
    for (const auth of [null, 'wrong-key-wrong-key-wrong', '']) {
      const sync = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'anything' }, { auth });
      expect(sync.status).toBe(401);
      expect(sync.body.error.code).toBe('unauthorized');
      const create = await call('POST', '/connections', { tenant_id: 't', app_key: 'k', provider: 'demo' }, { auth });
      expect(create.status).toBe(401);
      expect((await call('GET', '/jobs', undefined, { auth })).status).toBe(401);
    }
    expect({ jobs: await count('sync_jobs'), connections: await count('connections') }).toEqual(before);
    // Only the probes and docs are open; /metrics needs the admin key (its labels carry tenant ids).
    expect((await call('GET', '/healthz', undefined, { auth: null })).status).toBe(200);
    const ready = await call('GET', '/readyz', undefined, { auth: null });
    expect(ready.status).toBe(200);
    expect(ready.body.details).toEqual({ stale_connections: expect.any(Number) });
    expect((await call('GET', '/metrics', undefined, { auth: null })).status).toBe(401);
    expect((await call('GET', '/metrics')).status).toBe(200);
    expect((await call('GET', '/openapi.json', undefined, { auth: null })).status).toBe(200);
  });

  it('rejects a bad app_key (400), unknown keys (400), and a 2 MiB body (413) with JSON errors', async () => {
    const bad = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'bad key!' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
    expect(bad.body.error.message).toMatch(/app_key/);
    const unknown = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'ok', surprise: 1 });
    expect(unknown.status).toBe(400);
    const huge = await call('POST', '/sync', undefined, { raw: JSON.stringify({ app_key: 'x', pad: 'x'.repeat(2 * 1024 * 1024) }) });
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe('payload_too_large');
    const notJson = await call('POST', '/sync', undefined, { raw: '{"app_key":' });
    expect(notJson.status).toBe(400);
    const missing = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'no-such-app' });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
  });

  it('creates a connection whose workflow runs; PATCH, pause, resume and sync-now show in its live state', async () => {
    const conn = await createConnection('managed');
    const described = await stack.env.client.workflow.getHandle(connectionWorkflowId(conn.id)).describe();
    expect(described.status.name).toBe('RUNNING');
    // The bootstrap job runs, then the workflow sleeps an hour.
    const sleeping = await eventually(async () => {
      const res = await call('GET', `/connections/${conn.id}`);
      return res.body.live?.phase === 'sleeping' && res.body.live.last_outcome === 'completed' ? res.body : undefined;
    });
    expect(sleeping).not.toHaveProperty('credentials');
    expect(sleeping.breaker).toMatchObject({ open: false, consecutive_failures: 0 });
    const hourAway = Date.parse(sleeping.live.next_run_at);

    const patched = await api.PATCH('/connections/{id}', { params: { path: { id: conn.id } }, body: { schedule: { interval_seconds: 120 } } });
    expect(patched.response.status, JSON.stringify(patched.error)).toBe(200);
    expect(patched.data!.schedule).toMatchObject({ interval_seconds: 120 });
    const replanned = await eventually(async () => {
      const live = (await call('GET', `/connections/${conn.id}`)).body.live;
      return live && Date.parse(live.next_run_at) < hourAway - 30 * 60_000 ? live : undefined;
    });
    // 120 s after the bootstrap finished, plus at most 20 % jitter and another interval.
    expect(Date.parse(replanned.next_run_at) - Date.now()).toBeLessThan(2 * 144_000);

    const badPatch = await call('PATCH', `/connections/${conn.id}`, { schedule: { interval_seconds: 5 } });
    expect(badPatch.status).toBe(400);
    const badZone = await call('PATCH', `/connections/${conn.id}`, { schedule: { cron: '30 2 * * *', timezone: 'Mars/Olympus_Mons' } });
    expect(badZone.status).toBe(400);
    expect(badZone.body.error.message).toMatch(/^schedule\.timezone: must be an IANA time zone name/);
    const zoneWithoutCron = await call('PATCH', `/connections/${conn.id}`, { schedule: { interval_seconds: 120, timezone: 'Europe/Berlin' } });
    expect(zoneWithoutCron.status).toBe(400);
    expect(zoneWithoutCron.body.error.message).toBe('schedule.timezone: only applies to a cron schedule');
    const badEvery = await call('PATCH', `/connections/${conn.id}`, { schedule: { interval_seconds: 120, full_sync_every: '3 fortnights' } });
    expect(badEvery.status).toBe(400);
    expect(badEvery.body.error.message).toMatch(/^schedule\.full_sync_every: /);
    const zoned = await call('PATCH', `/connections/${conn.id}`, { schedule: { cron: '30 2 * * *', timezone: 'Europe/Berlin', full_sync_every: '7d' } });
    expect(zoned.status, zoned.text).toBe(200);
    expect(zoned.body.schedule).toMatchObject({ cron: '30 2 * * *', timezone: 'Europe/Berlin', full_sync_every: '7d' });
    const stored = await stack.db.pool.query<{ sync: Record<string, unknown> }>(`select metadata -> 'sync' as sync from connections where id = $1`, [conn.id]);
    expect(stored.rows[0]!.sync).toMatchObject({ timezone: 'Europe/Berlin', full_sync_every: '7d' });

    expect((await call('POST', `/connections/${conn.id}/pause`)).status).toBe(200);
    await eventually(async () => ((await call('GET', `/connections/${conn.id}`)).body.live?.phase === 'paused' ? true : undefined));
    const pausedSync = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'managed' });
    expect(pausedSync.status).toBe(409);
    expect(pausedSync.body.error.code).toBe('connection_paused');

    expect((await call('POST', `/connections/${conn.id}/resume`)).status).toBe(200);
    await eventually(async () => ((await call('GET', `/connections/${conn.id}`)).body.live?.phase === 'sleeping' ? true : undefined));

    const now = await api.POST('/connections/{id}/sync', { params: { path: { id: conn.id } }, body: { mode: 'full' } });
    expect(now.response.status, JSON.stringify(now.error)).toBe(202);
    expect(now.data!.mode).toBe('full');
    const done = await jobDone(now.data!.job_id);
    expect(done.status).toBe('completed');

    const listed = await api.GET('/connections', { params: { query: { tenant_id: 'acme', limit: 1 } } });
    expect(listed.response.status).toBe(200);
    expect(listed.data!.items).toHaveLength(1);
    expect(listed.data!.items[0]).not.toHaveProperty('credentials');

    expect((await call('POST', `/connections/${conn.id}/disable`)).status).toBe(200);
    await eventually(async () => {
      const d = await stack.env.client.workflow.getHandle(connectionWorkflowId(conn.id)).describe();
      return d.status.name !== 'RUNNING' ? d.status.name : undefined;
    });
    expect(await count(`sync_jobs where connection_id = $1 and status in ('queued', 'running', 'retrying')`, [conn.id])).toBe(0);
  });

  it('PATCH of a schedule answers the row as stored, written in one statement: what GET shows at once', async () => {
    // Paused: no enqueue writes the row between the answer and the GET.
    const conn = await createConnection('stored-answer', { status: 'paused', schedule: { interval_seconds: 3600, full_sync_every: 7 } });
    const before = (await call('GET', `/connections/${conn.id}`)).body;
    const patched = await call('PATCH', `/connections/${conn.id}`, { schedule: { cron: '  0 * * * *  ', timezone: 'Europe/Berlin' } });
    expect(patched.status, patched.text).toBe(200);
    const { live: _live, breaker: _breaker, ...shown } = (await call('GET', `/connections/${conn.id}`)).body;
    // The whole schedule is replaced (no interval, no full_sync_every left), the cron as stored.
    expect({ answer: patched.body, schedule: patched.body.schedule }).toEqual({
      answer: shown,
      schedule: { cron: '0 * * * *', timezone: 'Europe/Berlin' },
    });
    expect(Date.parse(patched.body.updated_at)).toBeGreaterThan(Date.parse(before.updated_at));
    const stored = await stack.db.pool.query<{ sync: Record<string, unknown> }>(`select metadata -> 'sync' as sync from connections where id = $1`, [conn.id]);
    expect(stored.rows[0]!.sync).toMatchObject({ cron: '0 * * * *', timezone: 'Europe/Berlin' });
    expect(stored.rows[0]!.sync).not.toHaveProperty('full_sync_every');

    // The deployment's maximum is the command's parse: refused before anything is written.
    const tooLong = await call('PATCH', `/connections/${conn.id}`, { schedule: { interval_seconds: 86_401 } });
    expect({ status: tooLong.status, message: tooLong.body.error?.message }).toEqual({
      status: 400,
      message: 'schedule.interval_seconds: exceeds MAX_OVERRIDDEN_INTERVAL_SECONDS (86400)',
    });
    expect((await call('GET', `/connections/${conn.id}`)).body.schedule).toEqual(shown.schedule);
  });

  it('refuses schedule text longer than any schedule needs (cron, timezone, full_sync_every) with one 400 naming the field, storing none of it', async () => {
    const conn = await createConnection('long-schedule', { status: 'paused' });
    const before = (await call('GET', `/connections/${conn.id}`)).body.schedule;
    const connections = await count('connections');
    // A valid cron of 200 KB (one minute listed a hundred thousand times), a zone and a duration padded with spaces.
    const cases: [Record<string, unknown>, string][] = [
      [{ cron: `${'1,'.repeat(100_000)}1 * * * *` }, 'schedule.cron: must be at most 1000 characters'],
      [{ cron: '0 * * * *', timezone: `Europe/Berlin${' '.repeat(100_000)}` }, 'schedule.timezone: must be at most 100 characters'],
      [{ interval_seconds: 3600, full_sync_every: `${' '.repeat(100_000)}7d` }, 'schedule.full_sync_every: must be at most 32 characters'],
    ];
    for (const [schedule, message] of cases) {
      const patched = await call('PATCH', `/connections/${conn.id}`, { schedule });
      expect({ status: patched.status, body: patched.body }, patched.text.slice(0, 300)).toEqual({ status: 400, body: { error: { code: 'invalid_request', message } } });
      const created = await call('POST', '/connections', {
        tenant_id: 'acme', app_key: 'long-schedule-2', provider: 'demo', status: 'paused', config: { records_per_resource: 1 }, schedule,
      });
      expect({ status: created.status, body: created.body }, created.text.slice(0, 300)).toEqual({ status: 400, body: { error: { code: 'invalid_request', message } } });
    }
    expect((await call('GET', `/connections/${conn.id}`)).body.schedule).toEqual(before);
    expect(await count('connections')).toBe(connections);
  });

  it('PATCH schedule, pause, resume, cancel and sync-now reach a connection whose workflow is not running: it runs again with the change applied', async () => {
    const conn = await createConnection('orphaned');
    const handle = stack.env.client.workflow.getHandle(connectionWorkflowId(conn.id));
    const live = async () => (await call('GET', `/connections/${conn.id}`)).body.live;
    const liveWhen = (ok: (state: any) => boolean) => eventually(async () => {
      const state = await live();
      return state && ok(state) ? state : undefined;
    });
    const row = async () => (await stack.db.pool.query('select status, metadata from connections where id = $1', [conn.id])).rows[0];
    const killWorkflow = async () => {
      await handle.terminate('test: the connection workflow is gone');
      expect((await handle.describe()).status.name).toBe('TERMINATED');
    };
    await liveWhen((s) => s.phase === 'sleeping' && s.last_outcome === 'completed');

    // The command stores the schedule; its replan signal starts the workflow, which plans from it.
    await killWorkflow();
    const patched = await call('PATCH', `/connections/${conn.id}`, { schedule: { interval_seconds: 7200 } });
    expect(patched.status, patched.text).toBe(200);
    expect((await row()).metadata.sync.interval_seconds).toBe(7200);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    await liveWhen((s) => s.phase === 'sleeping');

    await killWorkflow();
    const paused = await call('POST', `/connections/${conn.id}/pause`);
    expect(paused.status, paused.text).toBe(200);
    await liveWhen((s) => s.phase === 'paused');
    expect((await row()).status).toBe('paused');

    await killWorkflow();
    const resumed = await call('POST', `/connections/${conn.id}/resume`);
    expect(resumed.status, resumed.text).toBe(200);
    const sleeping = await liveWhen((s) => s.phase === 'sleeping' && s.current_job_id);
    expect((await row()).status).toBe('active');

    // The queued job of a scheduler that is gone: nothing would ever run or cancel it but this.
    await killWorkflow();
    const cancelled = await call('POST', `/jobs/${sleeping.current_job_id}/cancel`);
    expect(cancelled.status, cancelled.text).toBe(202);
    expect((await call('GET', `/jobs/${sleeping.current_job_id}`)).body.status).toBe('cancelled');
    const next = await liveWhen((s) => s.phase === 'sleeping' && s.current_job_id && s.current_job_id !== sleeping.current_job_id);

    // Sync now, while the scheduler that queued the job is gone: the answered job is one that runs.
    await killWorkflow();
    const now = await call('POST', `/connections/${conn.id}/sync`, {});
    expect(now.status, now.text).toBe(202);
    expect(now.body.job_id).not.toBe(next.current_job_id);
    expect((await jobDone(now.body.job_id)).status).toBe('completed');
    expect((await call('GET', `/jobs/${next.current_job_id}`)).body.status).toBe('cancelled');
    await liveWhen((s) => s.phase === 'sleeping');
    expect((await handle.describe()).status.name).toBe('RUNNING');
  });

  it('sync and cancel of a job queued by a run that ended reach no later run still held by its start delay (a cold start): the request gets a job that runs, the cancel cancels', async () => {
    const conn = await createConnection('left-behind');
    const ref = { id: conn.id, tenantId: 'acme', providerSlug: 'demo' };
    const handle = stack.env.client.workflow.getHandle(connectionWorkflowId(conn.id));
    const sleepingWithJob = () =>
      eventually(async () => {
        const live = (await call('GET', `/connections/${conn.id}`)).body.live;
        return live?.phase === 'sleeping' && live.current_job_id ? (live.current_job_id as string) : undefined;
      });
    /** The run that queued the job ends; a new run waits for its start, as a cold start's tick starts it. */
    const replaceByDelayedRun = async () => {
      await handle.terminate('test: the run that queued the job is gone');
      await ensureConnectionWorkflow(stack.env.client, TASK_QUEUE, ref, 10 * 60_000);
      expect((await handle.describe()).status.name).toBe('RUNNING');
    };

    const leftBehind = await sleepingWithJob();
    await replaceByDelayedRun();
    const sync = await call('POST', `/connections/${conn.id}/sync`, {});
    expect(sync.status, sync.text).toBe(202);
    expect(sync.body.job_id).not.toBe(leftBehind);
    expect((await jobDone(sync.body.job_id)).status).toBe('completed');
    expect((await call('GET', `/jobs/${leftBehind}`)).body.status).toBe('cancelled');

    // A schedule PATCH (signal-with-start) ends the wait; the new run queues its own job.
    expect((await call('PATCH', `/connections/${conn.id}`, { schedule: { interval_seconds: 7200 } })).status).toBe(200);
    const queued = await sleepingWithJob();
    await replaceByDelayedRun();
    const cancel = await call('POST', `/jobs/${queued}/cancel`);
    expect(cancel.status, cancel.text).toBe(202);
    expect((await call('GET', `/jobs/${queued}`)).body.status).toBe('cancelled');
  });

  it('creates a connection asked for as paused in one INSERT: its row is never active and a reconcile tick makes no job for it', async () => {
    // Every status a connection row is written with, in order (a test-only audit trigger).
    await stack.db.pool.query(`create table connection_status_writes (connection_id uuid, op text, status text, n bigserial)`);
    await stack.db.pool.query(`create function log_connection_status() returns trigger language plpgsql as $$
      begin insert into connection_status_writes (connection_id, op, status) values (new.id, tg_op, new.status); return new; end $$`);
    await stack.db.pool.query(`create trigger connection_status_writes after insert or update of status on connections
      for each row execute function log_connection_status()`);
    try {
      const conn = await createConnection('born-paused', { status: 'paused' });
      expect((conn as { status?: string }).status).toBe('paused');
      await stack.tick();
      await eventually(async () => ((await call('GET', `/connections/${conn.id}`)).body.live?.phase === 'paused' ? true : undefined));
      const writes = await stack.db.pool.query('select op, status from connection_status_writes where connection_id = $1 order by n', [conn.id]);
      expect(writes.rows).toEqual([{ op: 'INSERT', status: 'paused' }]);
      expect(await count('sync_jobs where connection_id = $1', [conn.id])).toBe(0);
    } finally {
      await stack.db.pool.query('drop trigger connection_status_writes on connections');
      await stack.db.pool.query('drop function log_connection_status(); drop table connection_status_writes');
    }
  });

  it('POST /sync answers once the job row is committed; its workflow starts just after, off the request path', async () => {
    const outbox = await createConnection('outbox');
    // Its first sync (a full one: no cursor yet) has ended, so the full sync asked for is a job of its own.
    await eventually(async () => ((await count(`sync_jobs where connection_id = $1 and status = 'completed'`, [outbox.id])) > 0 ? true : undefined));
    // A starter held shut: the answer cannot have waited for the workflow's start.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const held = new BackgroundStarts((err) => console.error(err));
    const run = held.run.bind(held);
    held.run = (what, start) => run(what, async () => {
      await gate;
      await start();
    });
    const gated = await listen(appWith(stack.db.pool, { background: held }), '127.0.0.1', 0);
    try {
      const res = await fetch(`${gated.url}/sync`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tenant_id: 'acme', app_key: 'outbox', mode: 'full' }),
      });
      expect(res.status).toBe(202);
      const { job_id: jobId } = (await res.json()) as { job_id: string };
      const { rows } = await stack.db.pool.query('select status from sync_jobs where id = $1', [jobId]);
      expect(rows[0].status).toBe('queued');
      await expect(stack.env.client.workflow.getHandle(`sync-job:${jobId}`).describe()).rejects.toThrow();
      open();
      await held.drain();
      expect((await jobDone(jobId)).status).toBe('completed');
    } finally {
      await gated.close();
    }
  });

  it('POST /sync creates a job; GET /jobs/:id shows its progress, tasks and 404 for an unknown id', async () => {
    const conn = await createConnection('sync-me');
    // Its first sync (a full one: no cursor yet) has ended, so the full sync asked for is a job of its own.
    await eventually(async () => ((await count(`sync_jobs where connection_id = $1 and status = 'completed'`, [conn.id])) > 0 ? true : undefined));
    const res = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'sync-me', mode: 'full' });
    expect(res.status, res.text).toBe(202);
    expect(res.body).toMatchObject({ status: 'queued', total_tasks: 3, connection_id: conn.id, mode: 'full' });
    expect(res.body.resource_types).toEqual(['issues', 'pull_requests', 'users']);
    expect(res.body.job_id).toMatch(/^[0-9a-f-]{36}$/);
    // Its audit row names the job it answered with.
    const audited = await stack.db.pool.query(`select actor, tenant_id, method, path, target_id, status from audit_log where target_id = $1`, [res.body.job_id]);
    expect(audited.rows).toEqual([{ actor: 'admin', tenant_id: 'acme', method: 'POST', path: '/sync', target_id: res.body.job_id, status: 202 }]);

    const job = await jobDone(res.body.job_id);
    expect(job).toMatchObject({
      status: 'completed', total_tasks: 3, completed_tasks: 3, failed_tasks: 0, processed_entities: 60,
      progress_percentage: 100, trigger: 'api', job_type: 'full', error: null,
    });
    expect(job.tasks).toHaveLength(3);
    for (const task of job.tasks) {
      expect(task).toMatchObject({ status: 'completed', entity_count: 20, error_message: null });
      expect(typeof task.resource_type).toBe('string');
    }
    const plain = await call('GET', `/jobs/${res.body.job_id}`);
    expect(plain.body).not.toHaveProperty('tasks');

    expect((await call('GET', '/jobs/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await call('GET', '/jobs/not-a-uuid')).status).toBe(400);

    const subset = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'sync-me', mode: 'full', resource_types: ['users'] });
    expect(subset.status).toBe(202);
    expect(subset.body).toMatchObject({ total_tasks: 1, resource_types: ['users'] });
    expect((await jobDone(subset.body.job_id)).tasks.map((t: { resource_type: string }) => t.resource_type)).toEqual(['users']);
    expect((await call('POST', '/sync', { tenant_id: 'acme', app_key: 'sync-me', resource_types: ['nope'] })).status).toBe(400);

    // Listing, filtered and paged by cursor.
    const first = (await api.GET('/jobs', { params: { query: { connection_id: conn.id, limit: 1 } } })).data!;
    expect(first.items).toHaveLength(1);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = (await api.GET('/jobs', { params: { query: { connection_id: conn.id, limit: 1, cursor: first.next_cursor! } } })).data!;
    expect(second.items).toHaveLength(1);
    expect(second.items[0]!.id).not.toBe(first.items[0]!.id);
    const all = (await api.GET('/jobs', { params: { query: { connection_id: conn.id, trigger: 'api' } } })).data!;
    expect(all.items.map((j) => j.id).sort()).toEqual([res.body.job_id, subset.body.job_id].sort());
    const garbage = await api.GET('/jobs', { params: { query: { cursor: 'garbage' } } });
    expect({ status: garbage.response.status, code: garbage.error?.error.code }).toEqual({ status: 400, code: 'invalid_request' });
  });

  it('webhooks through the typed client: created with its secret once, listed and shown without it', async () => {
    // A tenant with no connections: no event is ever delivered to this address.
    const created = await api.POST('/webhooks', {
      body: { tenant_id: 'typed-client', url: 'https://hooks.example.com/synctide', event_types: ['sync.completed', 'sync.failed'] },
    });
    expect(created.response.status, JSON.stringify(created.error)).toBe(201);
    const hook = created.data!;
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    const listed = await api.GET('/webhooks', { params: { query: { tenant_id: 'typed-client' } } });
    expect(listed.response.status).toBe(200);
    const { secret: _secret, ...shown } = hook;
    expect(listed.data!.items).toEqual([shown]);
    const one = await api.GET('/webhooks/{id}', { params: { path: { id: hook.id } } });
    expect(one.data).toEqual(shown);
    expect(answers.slice(-2).join('\n')).not.toContain(hook.secret);
    const refused = await api.POST('/webhooks', { body: { tenant_id: 'typed-client', url: 'ftp://hooks.example.com/', event_types: ['sync.completed'] } });
    expect({ status: refused.response.status, code: refused.error?.error.code }).toEqual({ status: 400, code: 'invalid_request' });
    expect(refused.error?.error.message).toMatch(/url/);
  });

  it('immediate: true answers with the results and writes no job or task rows', async () => {
    await createConnection('now-please');
    const jobs = await count('sync_jobs');
    const tasks = await count('sync_tasks');
    const res = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'now-please', mode: 'full', immediate: true });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ immediate: true, mode: 'full', total_entities: 60 });
    expect(res.body.resources).toHaveLength(3);
    // The connection's own bootstrap job may have been enqueued meanwhile; nothing from this call.
    expect(await count(`sync_jobs where trigger = 'api'`)).toBeLessThanOrEqual(jobs);
    expect(await count('sync_tasks where job_id in (select id from sync_jobs where trigger = $1)', ['api'])).toBeLessThanOrEqual(tasks);
  });

  it('immediate: true answers 504 with what it fetched once its deadline has passed, and leaves no immediate sync running', async () => {
    // Inserted without a workflow of its own, so only the immediate sync reads this connection.
    const { rows } = await stack.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', 'slow-now', $1) returning id`,
      [{ records_per_resource: 300, page_size: 10, latency_ms: 150 }],
    );
    const id = rows[0]!.id;
    // 90 pages of 150 ms each cannot be fetched within this app's 2 s deadline.
    const app = appWith(stack.db.pool, { immediateSyncTimeoutMs: 2000 });
    const res = await app.request('/sync', {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tenant_id: 'acme', app_key: 'slow-now', mode: 'full', immediate: true }),
    });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(504);
    expect(body.error).toMatchObject({ code: 'timeout', message: expect.stringMatching(/2 s/) });
    const { fetched } = body.error;
    expect(fetched.total_entities).toBe(fetched.resources.reduce((sum: number, r: { entity_count: number }) => sum + r.entity_count, 0));
    for (const r of fetched.resources) {
      expect(['issues', 'pull_requests', 'users']).toContain(r.resource_type);
      // Counted after each stored page of 10.
      expect(r).toEqual({ resource_type: r.resource_type, entity_count: r.pages * 10, written_count: expect.any(Number), pages: r.pages });
    }
    // What it reports fetched was written first.
    expect(await count('records where connection_id = $1', [id])).toBeGreaterThanOrEqual(fetched.total_entities);
    // Its workflow was cancelled; it closes only once its activity has stopped.
    const runs = await eventually(async () => {
      const found: { id: string; status: string }[] = [];
      for await (const run of stack.env.client.workflow.list({ query: `WorkflowType = 'immediateSyncWorkflow'` })) {
        if (run.workflowId === `immediate-sync:${id}`) found.push({ id: run.workflowId, status: run.status.name });
      }
      return found.length > 0 && found.every((run) => run.status !== 'RUNNING') ? found : undefined;
    });
    expect(runs.map((run) => run.status)).toEqual(['CANCELLED']);
  });

  it('immediate: true refuses a paused connection and one paused by its circuit breaker with 409, as a queued sync does', async () => {
    await createConnection('now-paused', { status: 'paused' });
    const paused = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'now-paused', immediate: true });
    expect(paused.status, paused.text).toBe(409);
    expect(paused.body.error.code).toBe('connection_paused');

    const conn = await createConnection('now-breaker');
    const until = new Date(Date.now() + 30 * 60_000);
    await stack.db.pool.query(
      `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, last_failure_at, paused_until)
       values ($1, 'demo', 5, now(), $2)`,
      [conn.id, until],
    );
    await stack.db.pool.query(
      `insert into alerts (category, severity, connection_id, context) values ('sync_circuit_breaker', 'warning', $1, $2)`,
      [conn.id, { connection_id: conn.id, consecutive_failures: 5, paused_until: until.toISOString() }],
    );
    const queued = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'now-breaker' });
    const now = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'now-breaker', immediate: true });
    expect(now.status, now.text).toBe(409);
    expect(now.body.error).toMatchObject({ code: 'circuit_breaker_open', paused_until: until.toISOString(), consecutive_failures: 5 });
    expect(now.body.error.alert).toMatchObject({ severity: 'warning', context: { consecutive_failures: 5 } });
    expect(now.body).toEqual(queued.body);
  });

  it("a failed job's error summarises the failure without internals", async () => {
    await createConnection('doomed', {
      config: { records_per_resource: 20, page_size: 10, fail: { resource: 'users', at_page: 1, kind: 'permanent' } },
    });
    const res = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'doomed', mode: 'full' });
    const job = await jobDone(res.body.job_id);
    expect(job.status).toBe('failed');
    expect(job.error.message).toMatch(/users/);
    expect(job.error.failed_tasks).toEqual([{ resource_type: 'users', message: expect.any(String) }]);
    const text = JSON.stringify(job.error);
    expect(text).not.toMatch(/\n|\bat \w+ \(|select |insert |update |node_modules|\.ts:\d+/i);
  });

  it('POST /jobs/schedule: 202 with the job, strict body, one row for 20 concurrent requests with one Idempotency-Key', async () => {
    const conn = await createConnection('backfill');
    // Let the first (bootstrap) sync finish, then wind the cursor back: a backfill must not move it.
    await eventually(async () => ((await count(`sync_jobs where connection_id = $1 and status = 'completed'`, [conn.id])) > 0 ? true : undefined));
    await stack.db.pool.query(`update sync_state set cursor = '2025-01-01T00:00:05Z' where connection_id = $1`, [conn.id]);
    // Demo records of one resource are updated at 00:00:00 + i s (i < 20): the window from 00:00:10 holds 10.
    const body = { pairId: conn.id, window: { start: '2025-01-01T00:00:10Z', end: '2025-01-02T00:00:00Z' }, payload: { reason: 'manual_test' } };
    const res = await call('POST', '/jobs/schedule', body);
    expect(res.status, res.text).toBe(202);
    expect(res.body).toMatchObject({ connection_id: conn.id, trigger: 'backfill', status: 'queued', window: { start: '2025-01-01T00:00:10.000Z' } });
    const row = await stack.db.pool.query('select window_start, payload from sync_jobs where id = $1', [res.body.id]);
    expect(row.rows[0].payload).toEqual({ reason: 'manual_test' });
    expect(await jobDone(res.body.id)).toMatchObject({ status: 'completed', job_type: 'incremental', processed_entities: 30 });
    const cursors = await stack.db.pool.query(`select distinct cursor from sync_state where connection_id = $1`, [conn.id]);
    expect(cursors.rows.map((r) => r.cursor.toISOString())).toEqual(['2025-01-01T00:00:05.000Z']);

    expect((await call('POST', '/jobs/schedule', { ...body, extra: true })).status).toBe(400);
    expect((await call('POST', '/jobs/schedule', { ...body, window: { start: body.window.end, end: body.window.start } })).status).toBe(400);
    expect((await call('POST', '/jobs/schedule', { ...body, pairId: 'nope' })).status).toBe(400);

    const backfills = `sync_jobs where connection_id = $1 and trigger = 'backfill'`;
    const before = await count(backfills, [conn.id]);
    const key = 'idem-key-20-at-once';
    const answers20 = await Promise.all(
      Array.from({ length: 20 }, () => call('POST', '/jobs/schedule', body, { headers: { 'Idempotency-Key': key } })),
    );
    expect(answers20.map((a) => a.status)).toEqual(Array(20).fill(202));
    expect(new Set(answers20.map((a) => a.body.id)).size).toBe(1);
    expect(await count(backfills, [conn.id])).toBe(before + 1);
    expect(await count('sync_jobs where idempotency_key = $1', [key])).toBe(1);
    await jobDone(answers20[0]!.body.id);
    // A later repeat still answers with the same job and inserts nothing.
    const repeat = await call('POST', '/jobs/schedule', body, { headers: { 'Idempotency-Key': key } });
    expect(repeat.status).toBe(202);
    expect(repeat.body.id).toBe(answers20[0]!.body.id);
    expect(await count(backfills, [conn.id])).toBe(before + 1);
    const reused = await call('POST', '/jobs/schedule', { ...body, window: { ...body.window, end: '2025-01-03T00:00:00Z' } }, { headers: { 'Idempotency-Key': key } });
    expect(reused.status).toBe(409);
  });

  it('POST /jobs/schedule stores exactly the records updated inside [window.start, window.end)', async () => {
    const conn = await createConnection('backfill-window', { config: { resource_types: ['issues', 'users'], records_per_resource: 20, page_size: 3 } });
    await eventually(async () => ((await count(`sync_jobs where connection_id = $1 and status = 'completed'`, [conn.id])) > 0 ? true : undefined));
    // Start from no records, so what the backfill stores is all there is.
    await stack.db.pool.query('delete from records where connection_id = $1', [conn.id]);
    // Record i of each resource is updated at 00:00:00 + i s: the window holds records 5–11; the one
    // at 00:00:12 (the window's end) belongs to the next window.
    const window = { start: '2025-01-01T00:00:05Z', end: '2025-01-01T00:00:12Z' };
    const res = await call('POST', '/jobs/schedule', { pairId: conn.id, window });
    expect(res.status, res.text).toBe(202);
    const done = await jobDone(res.body.id);
    expect(done).toMatchObject({ status: 'completed', processed_entities: 14 });
    expect(done.tasks.map((t: { entity_count: number }) => t.entity_count)).toEqual([7, 7]);
    const stored = await stack.db.pool.query<{ resource_type: string; external_id: string }>(
      `select resource_type, external_id from records where connection_id = $1 order by resource_type, (data ->> 'index')::int`,
      [conn.id],
    );
    const inWindow = [5, 6, 7, 8, 9, 10, 11];
    expect(stored.rows).toEqual([
      ...inWindow.map((i) => ({ resource_type: 'issues', external_id: `issues-${i}` })),
      ...inWindow.map((i) => ({ resource_type: 'users', external_id: `users-${i}` })),
    ]);
  });

  it('a connection paused by its circuit breaker answers 409 with the alert, and nothing is inserted', async () => {
    const conn = await createConnection('breaker');
    const until = new Date(Date.now() + 30 * 60_000);
    await stack.db.pool.query(
      `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, last_failure_at, paused_until)
       values ($1, 'demo', 5, now(), $2)`,
      [conn.id, until],
    );
    await stack.db.pool.query(
      `insert into alerts (category, severity, connection_id, context) values ('sync_circuit_breaker', 'warning', $1, $2)`,
      [conn.id, { connection_id: conn.id, consecutive_failures: 5, paused_until: until.toISOString() }],
    );
    const before = await count('sync_jobs where connection_id = $1', [conn.id]);
    const res = await call('POST', '/jobs/schedule', { pairId: conn.id, window: { start: '2025-01-01T00:00:00Z', end: '2025-01-02T00:00:00Z' } });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'circuit_breaker_open', paused_until: until.toISOString(), consecutive_failures: 5 });
    expect(res.body.error.alert).toMatchObject({ severity: 'warning', context: { consecutive_failures: 5 } });
    expect((await call('POST', '/sync', { tenant_id: 'acme', app_key: 'breaker' })).status).toBe(409);
    expect(await count('sync_jobs where connection_id = $1 and trigger in ($2, $3)', [conn.id, 'api', 'backfill'])).toBe(0);
    expect(await count('sync_jobs where connection_id = $1', [conn.id])).toBe(before);
    const detail = await call('GET', `/connections/${conn.id}`);
    expect(detail.body.breaker).toMatchObject({ open: true, consecutive_failures: 5 });
  });

  it('POST /jobs/:id/cancel stops a running job', async () => {
    await createConnection('slow', { config: { records_per_resource: 500, page_size: 5, latency_ms: 200 } });
    const res = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'slow', mode: 'full' });
    await eventually(async () => ((await call('GET', `/jobs/${res.body.job_id}`)).body.status === 'running' ? true : undefined));
    const cancel = await call('POST', `/jobs/${res.body.job_id}/cancel`);
    expect(cancel.status).toBe(202);
    const job = await jobDone(res.body.job_id);
    expect(job.status).toBe('cancelled');
    expect((await call('POST', `/jobs/${res.body.job_id}/cancel`)).status).toBe(409);
  });

  it('a GitHub sync with a token: the token is in no log line and no API answer', async () => {
    const res = await call('POST', '/connections', {
      tenant_id: 'acme', app_key: 'gh', provider: 'github',
      config: { base_url: github.baseUrl, repositories: ['acme/app'], per_page: 10 },
      credentials: { token: TOKEN }, schedule: { interval_seconds: 3600 },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body.has_credentials).toBe(true);
    const sync = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'gh', mode: 'full' });
    const job = await jobDone(sync.body.job_id);
    expect(job.status).toBe('completed');
    expect(job.processed_entities).toBeGreaterThan(0);
    await call('GET', `/connections/${res.body.id}`);
    await call('GET', `/jobs?connection_id=${res.body.id}`);
    const logs = [...apiLog.lines, ...stack.lines].map((l) => JSON.stringify(l)).join('\n');
    expect(logs.length).toBeGreaterThan(1000);
    expect(logs).not.toContain(TOKEN);
    expect(answers.join('\n')).not.toContain(TOKEN);
    // The requests were logged with their ids.
    expect(apiLog.lines.some((l) => l.request_id && l.path === '/sync' && l.status === 202)).toBe(true);
  });

  it('after a sync, /metrics shows every Synctide metric with its labels', async () => {
    const conn = await createConnection('metered', {
      config: { records_per_resource: 10, page_size: 10, seed: 'metered', fail: { resource: 'users', at_page: 1, kind: 'rate_limited', retry_after_seconds: 1, times: 1 } },
    });
    const res = await call('POST', '/sync', { tenant_id: 'acme', app_key: 'metered', mode: 'full' });
    expect((await jobDone(res.body.job_id)).status).toBe('completed');
    // The injected rate limit (once) hits whichever job reads `users` first; wait for all of them.
    await eventually(async () =>
      (await count(`sync_jobs where connection_id = $1 and status in ('queued', 'running', 'retrying') and trigger <> 'schedule'`, [conn.id])) === 0 &&
      (await count('sync_jobs where connection_id = $1 and rate_limit_retry_count > 0', [conn.id])) >= 1 ? true : undefined,
      { describe: async () => (await stack.db.pool.query('select trigger, status, job_type, rate_limit_retry_count, last_error from sync_jobs where connection_id = $1', [conn.id])).rows },
    );
    const text = (await call('GET', '/metrics')).text;
    const expectLine = (pattern: RegExp) => expect(text, String(pattern)).toMatch(pattern);
    expectLine(/^sync_scheduler_jobs_scheduled_total\{[^}]*provider="demo"[^}]*tenant_id="acme"[^}]*\} \d+/m);
    expectLine(/^sync_scheduler_jitter_seconds_bucket\{/m);
    expectLine(/^sync_scheduler_backlog(\{[^}]*\})? \d+/m);
    expectLine(/^sync_scheduler_tick_duration_seconds_bucket\{/m);
    expectLine(/^rate_limited_total\{[^}]*provider="demo"[^}]*\} \d+/m);
    expectLine(/^rate_limited_backoff_seconds_bucket\{[^}]*le="900"/m);
    expectLine(/^sync_jobs_total\{[^}]*status="completed"[^}]*provider="demo"|^sync_jobs_total\{[^}]*provider="demo"[^}]*status="completed"/m);
    expectLine(/^sync_jobs_queue_depth\{[^}]*status="queued"[^}]*\} \d+/m);
    expectLine(/^sync_job_duration_seconds_bucket\{[^}]*outcome="completed"/m);
    expectLine(/^sync_job_retries_total\{[^}]*provider="demo"[^}]*\} \d+/m);
  });

  it('/openapi.json is a valid OpenAPI 3 document listing every route, and /docs renders', async () => {
    const doc = (await call('GET', '/openapi.json', undefined, { auth: null })).body;
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toMatch(/^3\./);
    const routes = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(routes.sort()).toEqual(
      [
        'POST /connections', 'GET /connections', 'GET /connections/{id}', 'PATCH /connections/{id}',
        'POST /connections/{id}/pause', 'POST /connections/{id}/resume', 'POST /connections/{id}/disable',
        'POST /connections/{id}/sync', 'POST /sync', 'POST /jobs/schedule', 'GET /jobs/{id}', 'GET /jobs',
        'POST /jobs/{id}/cancel', 'GET /connections/{id}/records', 'POST /webhooks', 'GET /webhooks', 'GET /webhooks/{id}',
        'PATCH /webhooks/{id}', 'DELETE /webhooks/{id}', 'GET /webhooks/{id}/deliveries', 'POST /webhooks/{id}/deliveries/{delivery_id}/redeliver',
        'POST /webhooks/{id}/rotate-secret', 'DELETE /connections/{id}', 'GET /purges/{id}', 'POST /tenants/{tenant_id}/api-keys', 'GET /tenants/{tenant_id}/api-keys',
        'DELETE /tenants/{tenant_id}/api-keys/{key_id}', 'GET /audit', 'GET /tenants/{tenant_id}/limits', 'PATCH /tenants/{tenant_id}/limits', 'GET /healthz', 'GET /readyz', 'GET /metrics',
        'POST /oauth-apps', 'GET /oauth-apps', 'GET /oauth-apps/{id}', 'PATCH /oauth-apps/{id}', 'DELETE /oauth-apps/{id}',
        'POST /connections/{id}/oauth/authorize', 'GET /oauth/callback',
      ].sort(),
    );
    // Each route documents every status it answers with, 500 among the common ones.
    const common = ['400', '401', '403', '404', '413', '415', '429', '500', '503'];
    // 415 (a body not declared JSON) on exactly the routes that take a body.
    const operation = (route: string) => {
      const [method, path] = route.split(' ') as [string, string];
      return doc.paths[path][method.toLowerCase()];
    };
    expect(routes.filter((route) => '415' in operation(route).responses)).toEqual(routes.filter((route) => operation(route).requestBody !== undefined));
    expect(routes.filter((route) => operation(route).requestBody !== undefined).length).toBeGreaterThan(5);
    const documented = Object.fromEntries(routes.map((route) => {
      const [method, path] = route.split(' ') as [string, string];
      return [route, Object.keys(doc.paths[path][method.toLowerCase()].responses).filter((s) => !common.includes(s)).sort()];
    }));
    expect(documented).toEqual({
      'POST /connections': ['201', '409'],
      'GET /connections': ['200'],
      'GET /connections/{id}': ['200'],
      'PATCH /connections/{id}': ['200', '409'],
      'POST /connections/{id}/pause': ['200', '409'],
      'POST /connections/{id}/resume': ['200', '409'],
      'POST /connections/{id}/disable': ['200'],
      'POST /connections/{id}/sync': ['202', '409'],
      'POST /sync': ['200', '202', '409', '502', '504'],
      'POST /jobs/schedule': ['202', '409'],
      'GET /jobs/{id}': ['200'],
      'GET /jobs': ['200'],
      'POST /jobs/{id}/cancel': ['202', '409'],
      'GET /connections/{id}/records': ['200', '409', '410'],
      'POST /webhooks': ['201', '409'],
      'GET /webhooks': ['200'],
      'GET /webhooks/{id}': ['200'],
      'PATCH /webhooks/{id}': ['200'],
      'DELETE /webhooks/{id}': ['204'],
      'GET /webhooks/{id}/deliveries': ['200'],
      'POST /webhooks/{id}/deliveries/{delivery_id}/redeliver': ['202', '409'],
      'POST /webhooks/{id}/rotate-secret': ['200'],
      'DELETE /connections/{id}': ['202'],
      'GET /purges/{id}': ['200'],
      'POST /tenants/{tenant_id}/api-keys': ['201'],
      'GET /tenants/{tenant_id}/api-keys': ['200'],
      'DELETE /tenants/{tenant_id}/api-keys/{key_id}': ['200'],
      'GET /audit': ['200'],
      'GET /healthz': ['200'],
      'GET /readyz': ['200'],
      'GET /metrics': ['200'],
      'POST /oauth-apps': ['201', '409'],
      'GET /oauth-apps': ['200'],
      'GET /oauth-apps/{id}': ['200'],
      'PATCH /oauth-apps/{id}': ['200', '409'],
      'DELETE /oauth-apps/{id}': ['204', '409'],
      'POST /connections/{id}/oauth/authorize': ['200', '409'],
      'GET /oauth/callback': ['200', '409', '502'],
      'GET /tenants/{tenant_id}/limits': ['200'],
      'PATCH /tenants/{tenant_id}/limits': ['200'],
    });
    // The probes and metrics are not the resource routes: each answers only what it documents.
    expect(Object.keys(doc.paths['/readyz'].get.responses).sort()).toEqual(['200', '400', '503']);
    expect(Object.keys(doc.paths['/metrics'].get.responses).sort()).toEqual(['200', '401', '403', '429', '500']);
    for (const route of routes.filter((r) => !['GET /healthz', 'GET /readyz', 'GET /metrics'].includes(r))) {
      const [method, path] = route.split(' ') as [string, string];
      expect(Object.keys(doc.paths[path][method.toLowerCase()].responses), route).toEqual(expect.arrayContaining(common.filter((s) => s !== '415')));
    }
    const docs = await call('GET', '/docs', undefined, { auth: null });
    expect(docs.status).toBe(200);
    expect(docs.text).toMatch(/swagger-ui/i);
    expect(docs.text).toContain('/openapi.json');
  });

  it('answers 503 (not 500) when Postgres is unreachable', async () => {
    const deadPool = new Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', connectionTimeoutMillis: 500 });
    const app = appWith(deadPool as never);
    try {
      const res = await app.request('/jobs', { headers: { authorization: `Bearer ${KEY}` } });
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: unknown };
      expect(body.error).toEqual({ code: 'unavailable', message: expect.stringMatching(/Postgres is unreachable/) });
      const ready = await app.request('/readyz');
      expect(ready.status).toBe(503);
      // As the document says: when to look again.
      expect(ready.headers.get('retry-after')).toBe('5');
    } finally {
      await deadPool.end();
    }
  });
});
