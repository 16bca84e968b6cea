// Per-tenant limits through the real API, worker, Postgres and the Temporal dev server: each limit
// (connections, webhooks, immediate syncs, running jobs, redeliveries per hour) refuses or holds
// back one tenant's excess without touching another tenant; checks are race-free; and a tenant
// that floods immediate syncs and due jobs on a saturated worker leaves another tenant's immediate
// sync and scheduled job running first.
import { temporal } from '@temporalio/proto';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { lockTenant } from '../db/models/tenant-limits';
import { DEFAULT_TENANT_LIMITS, jobFitsUnder } from '../policy/tenant-limits';
import { createImmediateWorker } from '../workers/create-worker';
import { startTestApi, type TestApi } from './helpers/api';
import type { TestDatabase } from './helpers/database';
import { useServers } from './helpers/stack';
import { testActivityDeps } from './helpers/deps';
import { createTestWorker, eventually, synctideBundle } from './helpers/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';

const TASK_QUEUE = 'tenant-limits';
const IMMEDIATE_QUEUE = 'tenant-limits-immediate';
/** The worker's activity slots and the immediate worker's: small, so a flood saturates them. */
const ACTIVITY_SLOTS = 3;
const IMMEDIATE_SLOTS = 3;

const SLOW = { resource_types: ['items'], records_per_resource: 40, page_size: 1, latency_ms: 400 };
const FAST = { resource_types: ['items'], records_per_resource: 2, page_size: 2 };
const DAY = { interval_seconds: 86_400 };

describe('per-tenant limits', () => {
  const servers = useServers();
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  let api: TestApi;
  let stack: Parameters<typeof startTestApi>[0];
  const workers: { worker: Worker; running: Promise<void> }[] = [];

  beforeAll(async () => {
    ({ env, db } = servers);
    const connection: NativeConnection = env.nativeConnection;
    const { worker, registry, metrics } = await createTestWorker({ connection, client: env.client, pool: db.pool, taskQueue: TASK_QUEUE, activitySlots: ACTIVITY_SLOTS });
    const { deps } = testActivityDeps({ pool: db.pool, temporal: env.client, taskQueue: TASK_QUEUE });
    const immediate = await createImmediateWorker({ connection, namespace: 'default', shutdownGraceSeconds: 5, taskQueue: IMMEDIATE_QUEUE, slots: IMMEDIATE_SLOTS, activities: deps, pool: db.pool, workflowBundle: await synctideBundle() });
    for (const w of [worker, immediate]) workers.push({ worker: w, running: w.run() });
    stack = { env, db, worker, registry, metrics, lines: [] };
    api = await startTestApi(stack, TASK_QUEUE, { immediateTaskQueue: IMMEDIATE_QUEUE, webhookAllowPrivate: true });
  });
  afterAll(async () => {
    await api?.server.close();
    for (const { worker } of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await Promise.all(workers.map((w) => w.running));
  });

  const q = <T = any>(sql: string, params: unknown[] = []) => db.pool.query(sql, params).then((r) => r.rows as T[]);
  const setLimits = async (tenant: string, body: Record<string, number | null>) => {
    const res = await api.call('PATCH', `/tenants/${tenant}/limits`, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };
  let seq = 0;
  /** Creates a connection of `tenant`; answers as the API did. */
  const connect = (tenant: string, config: Record<string, unknown>, status: 'active' | 'paused' = 'paused') =>
    api.call('POST', '/connections', { tenant_id: tenant, app_key: `k${++seq}`, provider: 'demo', config, schedule: DAY, status });
  /**
   * A connection that may sync but runs no scheduled job soon: created paused, its schedule's last
   * run set to now (its next run is a day away), then marked active in its row.
   */
  async function syncable(tenant: string, config: Record<string, unknown>) {
    const res = await connect(tenant, config);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    await q(
      `insert into connection_schedule_runs (connection_id, last_run_at) values ($1, now())
       on conflict (connection_id) do update set last_run_at = now()`,
      [res.body.id],
    );
    await q(`update connections set status = 'active' where id = $1`, [res.body.id]);
    return { id: res.body.id as string, appKey: res.body.app_key as string };
  }
  const expectRefusal = (res: { status: number; body: any }, status: number, limit: string, value: number) => {
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    expect(res.body.error).toMatchObject({ code: 'tenant_limit', limit, value });
  };
  const jobStatus = async (id: string) => (await q<{ status: string }>('select status from sync_jobs where id = $1', [id]))[0]?.status;

  it('the admin reads and overrides a tenant limit; null goes back to the default; bad values answer 400', async () => {
    const fresh = await api.call('GET', '/tenants/nobody/limits');
    expect(fresh.status).toBe(200);
    expect(fresh.body.limits).toEqual({
      max_connections: DEFAULT_TENANT_LIMITS.connections, max_webhooks: DEFAULT_TENANT_LIMITS.webhooks,
      max_immediate_syncs: DEFAULT_TENANT_LIMITS.immediateSyncs, max_running_jobs: DEFAULT_TENANT_LIMITS.runningJobs,
      max_redeliveries_per_hour: DEFAULT_TENANT_LIMITS.redeliveriesPerHour, max_oauth_apps: DEFAULT_TENANT_LIMITS.oauthApps,
    });
    expect(Object.values(fresh.body.overrides).every((v) => v === null)).toBe(true);
    const set = await setLimits('lim-admin', { max_webhooks: 7, max_running_jobs: 0 });
    expect(set.limits).toMatchObject({ max_webhooks: 7, max_running_jobs: 0, max_connections: DEFAULT_TENANT_LIMITS.connections });
    // Fields not named are kept; null returns one to the default.
    const next = await setLimits('lim-admin', { max_webhooks: null });
    expect(next.overrides).toMatchObject({ max_webhooks: null, max_running_jobs: 0 });
    expect(next.limits.max_webhooks).toBe(DEFAULT_TENANT_LIMITS.webhooks);
    for (const bad of [{ max_webhooks: -1 }, { max_webhooks: 1.5 }, { max_webhooks: '3' }, { max_things: 1 }]) {
      const res = await api.call('PATCH', '/tenants/lim-admin/limits', bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
    }
  });

  it('connections: over the limit 409 naming it; concurrent creates take exactly the places left; other tenants go on', async () => {
    await setLimits('lim-c', { max_connections: 3 });
    expect((await connect('lim-c', FAST)).status).toBe(201);
    const burst = await Promise.all(Array.from({ length: 6 }, () => connect('lim-c', FAST)));
    expect(burst.filter((r) => r.status === 201)).toHaveLength(2);
    for (const refused of burst.filter((r) => r.status !== 201)) expectRefusal(refused, 409, 'max_connections', 3);
    expect((await q(`select 1 from connections where tenant_id = 'lim-c'`)).length).toBe(3);
    expect((await api.call('GET', '/tenants/lim-c/limits')).body.usage.connections).toBe(3);
    // Another tenant is not held back.
    expect((await connect('lim-c-other', FAST)).status).toBe(201);
    // Back to the default: it goes on.
    await setLimits('lim-c', { max_connections: null });
    expect((await connect('lim-c', FAST)).status).toBe(201);
  });

  it('webhooks: over the limit 409 naming it; concurrent creates take exactly the places left', async () => {
    await setLimits('lim-w', { max_webhooks: 2 });
    const hook = () => api.call('POST', '/webhooks', { tenant_id: 'lim-w', url: 'http://127.0.0.1:9/hook', event_types: ['sync.failed'] });
    const burst = await Promise.all(Array.from({ length: 5 }, hook));
    expect(burst.filter((r) => r.status === 201)).toHaveLength(2);
    for (const refused of burst.filter((r) => r.status !== 201)) expectRefusal(refused, 409, 'max_webhooks', 2);
    expect((await q(`select 1 from webhooks where tenant_id = 'lim-w'`)).length).toBe(2);
    // Deleting one frees its place.
    expect((await api.call('DELETE', `/webhooks/${burst.find((r) => r.status === 201)!.body.id}`)).status).toBe(204);
    expect((await hook()).status).toBe(201);
  });

  it('oauth apps: over the limit 409 naming it; concurrent creates take exactly the places left; other tenants go on', async () => {
    await setLimits('lim-a', { max_oauth_apps: 2 });
    let n = 0;
    const app = (tenant: string) => api.call('POST', '/oauth-apps', {
      tenant_id: tenant, name: `app-${++n}`, client_id: 'cid', client_secret: 'limit-client-secret', authorize_url: 'https://example.com/authorize',
      token_url: 'https://api.github.com/token', /* a PROVIDER_HOSTS host of the tests' policy */ redirect_uri: 'https://example.com/oauth/callback',
    });
    const burst = await Promise.all(Array.from({ length: 5 }, () => app('lim-a')));
    expect(burst.filter((r) => r.status === 201)).toHaveLength(2);
    for (const refused of burst.filter((r) => r.status !== 201)) expectRefusal(refused, 409, 'max_oauth_apps', 2);
    expect((await q(`select 1 from oauth_apps where tenant_id = 'lim-a'`)).length).toBe(2);
    expect((await api.call('GET', '/tenants/lim-a/limits')).body.usage.oauth_apps).toBe(2);
    // Another tenant is not held back; deleting one frees its place.
    expect((await app('lim-a-other')).status).toBe(201);
    expect((await api.call('DELETE', `/oauth-apps/${burst.find((r) => r.status === 201)!.body.id}`)).status).toBe(204);
    expect((await app('lim-a')).status).toBe(201);
  });

  /** A webhook of `tenant` with `n` failed deliveries. */
  async function failedDeliveries(tenant: string, n: number) {
    const hook = await api.call('POST', '/webhooks', { tenant_id: tenant, url: 'http://127.0.0.1:9/hook', event_types: ['sync.failed'] });
    expect(hook.status).toBe(201);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const [event] = await q<{ id: string }>(`insert into webhook_events (tenant_id, event_type, payload) values ($1, 'sync.failed', '{}') returning id`, [tenant]);
      const [delivery] = await q<{ id: string }>(
        `insert into webhook_deliveries (webhook_id, event_id, status, finished_at, workflow_started_at) values ($1, $2, 'failed', now(), now()) returning id`,
        [hook.body.id, event!.id],
      );
      ids.push(delivery!.id);
    }
    return { hook: hook.body.id as string, ids };
  }
  const redeliver = (hook: string, id: string) => api.call('POST', `/webhooks/${hook}/deliveries/${id}/redeliver`);

  it('redeliveries: over the limit an hour 429 with Retry-After naming it; another tenant goes on', async () => {
    await setLimits('lim-r', { max_redeliveries_per_hour: 2 });
    const mine = await failedDeliveries('lim-r', 3);
    expect((await redeliver(mine.hook, mine.ids[0]!)).status).toBe(202);
    expect((await redeliver(mine.hook, mine.ids[1]!)).status).toBe(202);
    const res = await fetch(`${api.server.url}/webhooks/${mine.hook}/deliveries/${mine.ids[2]}/redeliver`, {
      method: 'POST', headers: { authorization: 'Bearer test-admin-key-0123456789abcdef' },
    });
    const body = (await res.json()) as any;
    expectRefusal({ status: res.status, body }, 429, 'max_redeliveries_per_hour', 2);
    // The oldest of the hour leaves it in at most an hour: that is when to retry.
    const retryAfter = Number(res.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    expect(body.error.retry_after_seconds).toBe(retryAfter);
    expect((await q(`select status from webhook_deliveries where id = $1`, [mine.ids[2]]))[0].status).toBe('failed');
    const other = await failedDeliveries('lim-r-other', 1);
    expect((await redeliver(other.hook, other.ids[0]!)).status).toBe(202);
    // Once the hour has passed for the oldest, the tenant may again.
    await q(`update webhook_redeliveries set at = at - interval '61 minutes' where tenant_id = 'lim-r'`);
    expect((await redeliver(mine.hook, mine.ids[2]!)).status).toBe(202);
  });

  it("redeliveries: the hour is the database's, so an API process whose clock is hours ahead still counts the redeliveries another made", async () => {
    await setLimits('lim-rs', { max_redeliveries_per_hour: 1 });
    const mine = await failedDeliveries('lim-rs', 2);
    expect((await redeliver(mine.hook, mine.ids[0]!)).status).toBe(202);
    // This process's clock is two hours ahead of the database's (and of the process that redelivered).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 2 * 3_600_000, shouldAdvanceTime: true });
    let answer: Awaited<ReturnType<TestApi['call']>>;
    try {
      answer = await redeliver(mine.hook, mine.ids[1]!);
    } finally {
      vi.useRealTimers();
    }
    expect({ status: answer.status, counted: (await q(`select delivery_id from webhook_redeliveries where tenant_id = 'lim-rs'`)).map((r) => r.delivery_id) })
      .toEqual({ status: 429, counted: [mine.ids[0]] });
    expectRefusal(answer, 429, 'max_redeliveries_per_hour', 1);
    expect(answer.body.error.retry_after_seconds).toBeLessThanOrEqual(3600);
  });

  it('immediate syncs: one over the limit answers 429 with Retry-After naming it; a finished one frees its place', async () => {
    await setLimits('lim-i', { max_immediate_syncs: 1 });
    const slow = await syncable('lim-i', { ...SLOW, records_per_resource: 6 });
    const fast = await syncable('lim-i', FAST);
    const first = api.call('POST', '/sync', { app_key: slow.appKey, tenant_id: 'lim-i', immediate: true });
    await eventually(async () => ((await env.client.workflow.getHandle(`immediate-sync:${slow.id}`).describe().catch(() => null))?.status.name === 'RUNNING' ? true : undefined));
    const res = await fetch(`${api.server.url}/sync`, {
      method: 'POST', headers: { authorization: 'Bearer test-admin-key-0123456789abcdef', 'content-type': 'application/json' },
      body: JSON.stringify({ app_key: fast.appKey, tenant_id: 'lim-i', immediate: true }),
    });
    const body = (await res.json()) as any;
    expectRefusal({ status: res.status, body }, 429, 'max_immediate_syncs', 1);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Refused before it started: no workflow of the fast connection.
    expect(await env.client.workflow.getHandle(`immediate-sync:${fast.id}`).describe().catch(() => null)).toBeNull();
    const answered = await first;
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    expect((await q(`select 1 from immediate_sync_leases where tenant_id = 'lim-i'`)).length).toBe(0);
    expect((await api.call('POST', '/sync', { app_key: fast.appKey, tenant_id: 'lim-i', immediate: true })).status).toBe(200);
  });

  it('immediate syncs: one cancelled at its deadline keeps its place until its workflow has closed (its activity still runs meanwhile)', async () => {
    await setLimits('lim-id', { max_immediate_syncs: 1 });
    const slow = await syncable('lim-id', SLOW);
    const next = await syncable('lim-id', SLOW);
    const hasty = await startTestApi(stack, TASK_QUEUE, {
      immediateTaskQueue: IMMEDIATE_QUEUE, immediateSyncTimeoutMs: 1000,
    });
    try {
      const sync = (appKey: string) => hasty.call('POST', '/sync', { app_key: appKey, tenant_id: 'lim-id', immediate: true });
      const first = await sync(slow.appKey);
      expect(first.status, JSON.stringify(first.body)).toBe(504);
      // Asked right after the first's answer, while its activity may still run until it sees the
      // cancellation: the tenant never runs two at once (the second is refused, or starts only
      // once the first has closed).
      const second = await sync(next.appKey);
      const describe = (id: string) => env.client.workflow.getHandle(`immediate-sync:${id}`).describe();
      const firstRun = await eventually(async () => {
        const d = await describe(slow.id);
        return d.status.name !== 'RUNNING' ? d : undefined;
      });
      const secondStart = second.status === 429 ? null : (await describe(next.id)).startTime;
      expect({ second: second.status, overlapped: secondStart !== null && secondStart < firstRun.closeTime! }).toEqual({ second: second.status, overlapped: false });
      // Once it has closed, its place is free again.
      await eventually(async () => ((await q(`select 1 from immediate_sync_leases where tenant_id = 'lim-id'`)).length === 0 ? true : undefined));
      await eventually(async () => ((await describe(next.id).catch(() => null))?.status.name === 'RUNNING' ? undefined : true));
      expect((await sync(next.appKey)).status).toBe(504);
    } finally {
      await hasty.server.close();
    }
  });

  it("immediate syncs: a lease is timed by the database's clock, so an API process whose clock is hours ahead still counts another process's running sync", async () => {
    await setLimits('lim-is', { max_immediate_syncs: 1 });
    const held = await syncable('lim-is', FAST);
    const asked = await syncable('lim-is', FAST);
    // The lease of a sync another API process runs, for ten more minutes by the database's clock.
    await q(`insert into immediate_sync_leases (id, tenant_id, connection_id, expires_at) values (gen_random_uuid(), 'lim-is', $1, now() + interval '10 minutes')`, [held.id]);
    // This process's clock is two hours ahead of the database's (and the other process's).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 2 * 3_600_000, shouldAdvanceTime: true });
    let answer: Awaited<ReturnType<TestApi['call']>>;
    try {
      answer = await api.call('POST', '/sync', { app_key: asked.appKey, tenant_id: 'lim-is', immediate: true });
    } finally {
      vi.useRealTimers();
    }
    expect({ status: answer.status, leases: (await q(`select connection_id from immediate_sync_leases where tenant_id = 'lim-is'`)).map((r) => r.connection_id) })
      .toEqual({ status: 429, leases: [held.id] });
    expectRefusal(answer, 429, 'max_immediate_syncs', 1);
    await q(`delete from immediate_sync_leases where tenant_id = 'lim-is'`);
  });

  it("immediate syncs: a tenant at its limit is refused without waiting for its lock (a client that keeps asking costs no locked transaction)", async () => {
    await setLimits('lim-il', { max_immediate_syncs: 1 });
    const held = await syncable('lim-il', FAST);
    const asked = await syncable('lim-il', FAST);
    await q(`insert into immediate_sync_leases (id, tenant_id, connection_id, expires_at) values (gen_random_uuid(), 'lim-il', $1, now() + interval '1 hour')`, [held.id]);
    // Another session holds the tenant's limit lock for as long as the request takes.
    const locker = await db.pool.connect();
    try {
      await locker.query('begin');
      await lockTenant(locker, 'lim-il');
      const answer = api.call('POST', '/sync', { app_key: asked.appKey, tenant_id: 'lim-il', immediate: true });
      const outcome = await Promise.race([answer, new Promise<'waited for the lock'>((r) => setTimeout(() => r('waited for the lock'), 10_000))]);
      expect(outcome).not.toBe('waited for the lock');
      expectRefusal(outcome as { status: number; body: any }, 429, 'max_immediate_syncs', 1);
    } finally {
      await locker.query('rollback');
      locker.release();
    }
    await q(`delete from immediate_sync_leases where tenant_id = 'lim-il'`);
  });

  it('running jobs: a job over the limit stays queued on a durable timer, holding no slot, while other tenants run', async () => {
    await setLimits('lim-j', { max_running_jobs: 1 });
    const slow = await syncable('lim-j', { ...SLOW, records_per_resource: 1000 });
    const second = await syncable('lim-j', FAST);
    const other = await syncable('lim-j-other', FAST);
    const first = await api.call('POST', `/connections/${slow.id}/sync`, { mode: 'full' });
    expect(first.status).toBe(202);
    await eventually(async () => ((await jobStatus(first.body.job_id)) === 'running' ? true : undefined));
    const waiting = await api.call('POST', `/connections/${second.id}/sync`, { mode: 'full' });
    expect(waiting.status).toBe(202);
    const handle = env.client.workflow.getHandle(`sync-job:${waiting.body.job_id}`);
    // Its claim was refused and waits on a timer: the job stays queued with no activity pending.
    await eventually(async () => {
      const history = await handle.fetchHistory();
      return history.events?.some((e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_TIMER_STARTED) ? true : undefined;
    }, { describe: async () => (await handle.fetchHistory()).events?.map((e) => temporal.api.enums.v1.EventType[e.eventType!]) });
    expect(await jobStatus(waiting.body.job_id)).toBe('queued');
    expect((await handle.describe()).raw.pendingActivities ?? []).toHaveLength(0);
    // The claim's limit check is its transaction's last step: refused, it rolls back the prepare too.
    expect((await q(`select count(*)::int as n from sync_tasks where job_id = $1`, [waiting.body.job_id]))[0].n).toBe(0);
    // Another tenant's job runs to the end meanwhile.
    const theirs = await api.call('POST', `/connections/${other.id}/sync`, { mode: 'full' });
    expect(theirs.status).toBe(202);
    await eventually(async () => ((await jobStatus(theirs.body.job_id)) === 'completed' ? true : undefined));
    expect(await jobStatus(waiting.body.job_id)).toBe('queued');
    expect(await jobStatus(first.body.job_id)).toBe('running');
    // Cancelled while waiting: it ends cancelled, never having run.
    expect((await api.call('POST', `/jobs/${waiting.body.job_id}/cancel`)).status).toBe(202);
    await eventually(async () => ((await jobStatus(waiting.body.job_id)) === 'cancelled' ? true : undefined));
    expect((await q(`select started_at from sync_jobs where id = $1`, [waiting.body.job_id]))[0].started_at).toBeNull();
    expect((await api.call('POST', `/jobs/${first.body.job_id}/cancel`)).status).toBe(202);
    await eventually(async () => ((await jobStatus(first.body.job_id)) === 'cancelled' ? true : undefined));
  });

  it('jobFitsUnder: a job fits when all its places do beside the running ones; one wider than the limit only alone; a limit of 0 none', () => {
    expect([jobFitsUnder(3, 2, 1), jobFitsUnder(3, 3, 1), jobFitsUnder(2, 0, 2), jobFitsUnder(2, 1, 2)]).toEqual([true, false, true, false]);
    expect([jobFitsUnder(2, 0, 8), jobFitsUnder(2, 1, 8), jobFitsUnder(0, 0, 1)]).toEqual([true, false, false]);
  });

  it("running jobs: a job running tasks in parallel (max_parallel_tasks) takes a place per task, so a tenant holds no more activity slots than its limit", async () => {
    // Two places of three slots: jobs of two tasks each, run two at a time.
    await setLimits('lim-par', { max_running_jobs: 2 });
    const WIDE = { ...SLOW, resource_types: ['a', 'b'], max_parallel_tasks: 2 };
    const wide = [await syncable('lim-par', WIDE), await syncable('lim-par', WIDE)];
    const quiet = await syncable('lim-par-other', FAST);
    const first = await api.call('POST', `/connections/${wide[0]!.id}/sync`, { mode: 'full' });
    expect(first.status).toBe(202);
    await eventually(async () => ((await jobStatus(first.body.job_id)) === 'running' ? true : undefined));
    // The limits' usage counts the places the job takes.
    expect((await api.call('GET', '/tenants/lim-par/limits')).body.usage.running_jobs).toBe(2);
    const second = await api.call('POST', `/connections/${wide[1]!.id}/sync`, { mode: 'full' });
    expect(second.status).toBe(202);
    // The first job holds both places (two tasks at once): the second waits on its claim's timer.
    const handle = env.client.workflow.getHandle(`sync-job:${second.body.job_id}`);
    await eventually(async () => {
      const history = await handle.fetchHistory();
      const events = history.events ?? [];
      const waited = events.some((e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_TIMER_STARTED);
      return waited || (await jobStatus(second.body.job_id)) !== 'queued' ? true : undefined;
    });
    // The other tenant's job finds a free slot and completes while the first job still runs: the
    // tenant holds two of the three slots, as its limit says, and its second job waits queued.
    const theirs = await api.call('POST', `/connections/${quiet.id}/sync`, { mode: 'full' });
    expect(theirs.status).toBe(202);
    await eventually(async () => ((await jobStatus(theirs.body.job_id)) === 'completed' ? true : undefined));
    expect([await jobStatus(first.body.job_id), await jobStatus(second.body.job_id)]).toEqual(['running', 'queued']);
    for (const job of [first.body.job_id, second.body.job_id]) expect((await api.call('POST', `/jobs/${job}/cancel`)).status).toBe(202);
    await eventually(async () => ((await jobStatus(first.body.job_id)) === 'cancelled' && (await jobStatus(second.body.job_id)) === 'cancelled' ? true : undefined));
  });

  it("purges: a connection's purge takes a place of its tenant's running jobs, so a tenant deleting connections holds no more activity slots than its limit", async () => {
    await setLimits('lim-purge', { max_running_jobs: 2 });
    const doomed: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await connect('lim-purge', FAST);
      expect(res.status).toBe(201);
      doomed.push(res.body.id);
      await q(`insert into records (connection_id, resource_type, external_id, data) values ($1, 'items', 'x', '{}')`, [res.body.id]);
    }
    const quiet = await syncable('lim-purge-other', FAST);
    // The records are held locked, as a large table's deletes would take long: each purge's batch
    // holds its activity slot meanwhile.
    const holder = await db.pool.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from records where connection_id = any($1) for update', [doomed]);
      const purges: string[] = [];
      for (const id of doomed) {
        const res = await api.call('DELETE', `/connections/${id}`);
        expect(res.status, JSON.stringify(res.body)).toBe(202);
        purges.push(res.body.id);
      }
      const batchesStarted = async () => {
        let started = 0;
        for (const id of purges) {
          const described = await env.client.workflow.getHandle(`connection-purge:${id}`).describe().catch(() => null);
          const pending = described?.raw.pendingActivities ?? [];
          if (pending.some((a) => a.activityType?.name === 'purgeConnectionBatch' && (String(a.state) === 'PENDING_ACTIVITY_STATE_STARTED' || String(a.state) === '2'))) started += 1;
        }
        return started;
      };
      // Two purges (its two places) reach their deletes; the third waits for a place.
      await eventually(async () => ((await batchesStarted()) >= 2 ? true : undefined), { describe: async () => ({ started: await batchesStarted() }) });
      // The other tenant's job finds the third slot and completes while the purges still wait on the locked rows.
      const theirs = await api.call('POST', `/connections/${quiet.id}/sync`, { mode: 'full' });
      expect(theirs.status).toBe(202);
      await eventually(async () => ((await jobStatus(theirs.body.job_id)) === 'completed' ? true : undefined), {
        describe: async () => ({ theirs: await jobStatus(theirs.body.job_id), purgeBatchesStarted: await batchesStarted() }),
      });
      expect(await batchesStarted()).toBe(2);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
    }
  });

  it('purges: one purge of a tenant runs whatever its limit, 0 included (a deletion is never held back for good)', async () => {
    await setLimits('lim-purge-zero', { max_running_jobs: 0 });
    const res = await connect('lim-purge-zero', FAST);
    expect(res.status).toBe(201);
    const purge = await api.call('DELETE', `/connections/${res.body.id}`);
    expect(purge.status).toBe(202);
    await eventually(async () => ((await api.call('GET', `/purges/${purge.body.id}`)).body.status === 'completed' ? true : undefined));
    expect(await q('select 1 from connections where id = $1', [res.body.id])).toEqual([]);
  });

  it("fairness: a tenant flooding immediate syncs and due jobs on a saturated worker leaves another tenant's immediate sync and scheduled job running first", async () => {
    // The flooding tenant may hold fewer slots than there are: two of three, of each kind.
    await setLimits('flood', { max_running_jobs: 2, max_immediate_syncs: 2 });
    const immediate: { id: string; appKey: string }[] = [];
    // Each runs about 8 s (20 pages 400 ms apart), far longer than the other tenant's one-page sync
    // asked for once two of them run: long enough to finish last, and no longer (the test awaits them).
    for (let i = 0; i < 5; i++) immediate.push(await syncable('flood', { ...SLOW, records_per_resource: 20 }));
    const quiet = await syncable('quiet', FAST);

    // Immediate syncs: five slow ones of the flooding tenant, then one fast one of the other.
    const finished: string[] = [];
    let refused = 0;
    const flood = immediate.map((c, i) =>
      api.call('POST', '/sync', { app_key: c.appKey, tenant_id: 'flood', mode: 'full', immediate: true }).then((res) => {
        if (res.status === 200) finished.push(`flood-${i}`);
        if (res.status === 429) refused += 1;
        return res;
      }),
    );
    // Every flood request was admitted or refused, and the admitted ones hold every slot they can.
    await eventually(async () => {
      const admitted = (await q(`select 1 from immediate_sync_leases where tenant_id = 'flood'`)).length;
      if (admitted + refused < immediate.length) return undefined;
      const described = await Promise.all(immediate.map((c) => env.client.workflow.getHandle(`immediate-sync:${c.id}`).describe().catch(() => null)));
      const started = described.filter((d) => (d?.raw.pendingActivities ?? []).some((a) => String(a.state) === 'PENDING_ACTIVITY_STATE_STARTED' || String(a.state) === '2')).length;
      return started >= Math.min(admitted, IMMEDIATE_SLOTS) ? true : undefined;
    });
    const mine = await api.call('POST', '/sync', { app_key: quiet.appKey, tenant_id: 'quiet', mode: 'full', immediate: true });
    finished.push('quiet');
    expect(mine.status, JSON.stringify(mine.body)).toBe(200);
    const answers = await Promise.all(flood);
    // The other tenant's finished before any of the flood's; two of the flood ran, the rest were
    // refused at once.
    expect(finished[0]).toBe('quiet');
    expect(answers.filter((r) => r.status === 200)).toHaveLength(2);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(3);

    // Scheduled jobs: six active connections of the flooding tenant are due at once (their first
    // run), then one of the other tenant's.
    const floodJobs = [];
    for (let i = 0; i < 6; i++) floodJobs.push(await connect('flood', SLOW, 'active'));
    let peakRunning = 0;
    const runningOfFlood = async () => (await q<{ n: number }>(`select count(*)::int as n from sync_jobs where tenant_id = 'flood' and status = 'running'`))[0]!.n;
    await eventually(async () => {
      peakRunning = Math.max(peakRunning, await runningOfFlood());
      return (await q(`select 1 from sync_jobs where tenant_id = 'flood'`)).length >= 6 && peakRunning >= 2 ? true : undefined;
    });
    const theirs = await connect('quiet', FAST, 'active');
    expect(theirs.status).toBe(201);
    const quietJob = await eventually(async () => {
      peakRunning = Math.max(peakRunning, await runningOfFlood());
      const [row] = await q<{ status: string }>(`select status from sync_jobs where connection_id = $1 and status = 'completed'`, [theirs.body.id]);
      return row;
    });
    expect(quietJob.status).toBe('completed');
    // The other tenant's scheduled job completed before any of the flood's; the flood never held
    // more than its two slots, and the rest of its due jobs wait queued.
    const flooded = await q<{ status: string }>(`select status from sync_jobs where tenant_id = 'flood'`);
    expect(flooded.filter((j) => j.status === 'completed')).toHaveLength(0);
    expect(peakRunning).toBe(2);
    expect(flooded.filter((j) => j.status === 'queued').length).toBeGreaterThanOrEqual(4);
    // Stop the flood's connections (their jobs are cancelled).
    for (const c of floodJobs) await api.call('POST', `/connections/${c.body.id}/disable`);
  });
});
