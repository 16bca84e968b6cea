// Webhooks end to end on the time-skipping server (its clock skips the retry backoff) with a real
// API, worker, Postgres and an HTTP receiver on 127.0.0.1.
import { randomBytes } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookDeliveryWorkflowId } from '../temporal/ids';
import { recordAttemptFailure, recordAttemptSuccess } from '../activities/record-attempt';
import { cancelJob } from '../activities/cancel-job';
import { deliverWebhook } from '../activities/webhook-deliveries';
import { webhookEventSchema } from '../api/schemas/webhook-events';
import { feedCursor } from '../policy/cursors';
import type { WebhookEventType } from '../policy/vocabulary';
import { failAbandonedJobs } from '../activities/fail-abandoned-jobs';
import { reapStaleTasks } from '../activities/reap-stale-tasks';
import { reconcileConnections } from '../activities/reconcile-connections';
import { testActivityDeps } from './helpers/deps';
import { receiver as fakeReceiver, serve, serveRaw, serveTls, type FakeServer } from './helpers/fake-server';
import { recordHistory } from './helpers/histories';
import { startTestApi, type TestApi } from './helpers/api';
import { useWorkerStack } from './helpers/stack';
import { documentedVerifier } from './helpers/webhook-verifiers';

const TASK_QUEUE = 'webhooks';

/** A receiver on 127.0.0.1 that fails the first `failures` requests of each event with 500, then answers 200. */
function startReceiver(failures: number) {
  return fakeReceiver(({ headers }, before) => {
    const earlier = before.filter((r) => r.headers['synctide-event-id'] === headers['synctide-event-id']).length;
    return earlier < failures ? 500 : 200;
  });
}

/** A receiver on 127.0.0.1 that answers 500 until `open()` is called, then 200. */
async function startGatedReceiver() {
  let open = false;
  const gated = await fakeReceiver(() => (open ? 200 : 500));
  return { ...gated, open: () => void (open = true) };
}

describe('webhooks', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  // The API as deployed for tests (private addresses allowed, to reach the receiver) and as in
  // production (not allowed).
  let server: TestApi;
  let strict: TestApi;
  const call = (target: TestApi, method: string, path: string, body?: unknown) => target.call(method, path, body);

  beforeAll(async () => {
    server = await startTestApi(stack, TASK_QUEUE, { webhookAllowPrivate: true });
    strict = await startTestApi(stack, TASK_QUEUE, { webhookAllowPrivate: false });
  });
  afterAll(async () => {
    await server?.server.close();
    await strict?.server.close();
  });

  async function waitFor<T>(what: () => Promise<T | undefined>): Promise<T> {
    for (let i = 0; i < 1000; i++) {
      const value = await what();
      if (value !== undefined) return value;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error('timed out waiting');
  }

  it('delivers sync.completed exactly once as 2xx to a receiver that fails 3 times, records every attempt, and signs it verifiably', async () => {
    const receiver = await startReceiver(3);
    try {
      const created = await call(server, 'POST', '/webhooks', { tenant_id: 'acme', url: receiver.url, event_types: ['sync.completed', 'sync.failed'] });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const { id: webhookId, secret } = created.body;
      expect(secret).toMatch(/^whsec_/);
      // The secret is shown once: never listed again.
      const listed = await call(server, 'GET', '/webhooks?tenant_id=acme');
      expect(listed.body.items.map((w: any) => w.id)).toContain(webhookId);
      expect(JSON.stringify(listed.body)).not.toContain(secret);

      const connection = await call(server, 'POST', '/connections', {
        tenant_id: 'acme', app_key: 'hooked', provider: 'demo', config: { resource_types: ['items'], records_per_resource: 30, page_size: 10 }, schedule: { interval_seconds: 86_400 },
      });
      expect(connection.status).toBe(201);
      const sync = await call(server, 'POST', `/connections/${connection.body.id}/sync`, { mode: 'full' });
      expect(sync.status).toBe(202);
      const jobId: string = sync.body.job_id;
      // The sync finishes whatever the receiver answers.
      await waitFor(async () => ((await call(server, 'GET', `/jobs/${jobId}`)).body.status === 'completed' ? true : undefined));

      // The delivery of this job's event (the scheduler's first job sends a sync.completed too).
      const deliveryId: string = await waitFor(async () => {
        const { rows } = await stack.db.pool.query<{ id: string }>(
          `select d.id from webhook_deliveries d join webhook_events e on e.id = d.event_id where d.webhook_id = $1 and e.payload->'job'->>'id' = $2`,
          [webhookId, jobId],
        );
        return rows[0]?.id;
      });
      expect(await stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId)).result()).toBe('delivered');
      await recordHistory(stack.env.client, 'webhook-delivery-retried', webhookDeliveryWorkflowId(deliveryId));

      const forJob = receiver.received.filter((r) => JSON.parse(r.body).data.job.id === jobId);
      expect(forJob.map((r) => r.answered)).toEqual([500, 500, 500, 200]);
      // Each event of the run (the scheduler's own first job sends one too) reached 2xx exactly once.
      const accepted = receiver.received.filter((r) => r.answered === 200).map((r) => r.headers['synctide-event-id']);
      expect(new Set(accepted).size).toBe(accepted.length);
      // Every attempt carries the same event id and the same body.
      expect(new Set(forJob.map((r) => r.headers['synctide-event-id'])).size).toBe(1);
      expect(new Set(forJob.map((r) => r.body)).size).toBe(1);
      const event = JSON.parse(forJob[3]!.body);
      expect(event.type).toBe('sync.completed');
      // The body is what the OpenAPI document's `webhooks` says: no field missing, none more.
      expect(webhookEventSchema('sync.completed').parse(event)).toEqual(event);
      expect(event.id).toBe(forJob[3]!.headers['synctide-event-id']);
      // The full pass saw each of the 30 records once (the scheduler's first job may have stored them already).
      const { added, updated, unchanged, deleted } = event.data.counts;
      expect([added + updated + unchanged, deleted]).toEqual([30, 0]);
      // The event's cursor reads the feed after the job's changes: nothing more.
      const feed = await call(server, 'GET', `/connections/${connection.body.id}/records?cursor=${event.data.cursor}`);
      expect(feed.status).toBe(200);
      expect(feed.body.items).toEqual([]);
      // Sealed as the feed's own cursors are: the position does not show (a plain cursor would read).
      expect(feedCursor.decode(event.data.cursor)).toBeNull();
      expect(event.data.cursor).toMatch(/^fc1\./);

      const verify = documentedVerifier();
      const delivered = forJob[3]!;
      expect(verify(secret, String(delivered.headers['synctide-signature']), delivered.body)).toBe(true);
      // One count changed (whatever it was: the scheduler's first job may have added the records already).
      const tampered = delivered.body.replace(/"added":(\d+)/, (_, n: string) => `"added":${Number(n) + 1}`);
      expect(tampered).not.toBe(delivered.body);
      expect(verify(secret, String(delivered.headers['synctide-signature']), tampered)).toBe(false);
      expect(verify('whsec_wrong', String(delivered.headers['synctide-signature']), delivered.body)).toBe(false);

      // Standard Webhooks: the reference library verifies the delivery with the secret as given,
      // webhook-id being the event id and both signatures made at one timestamp...
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      const standard = new Webhook(secret);
      const headers = delivered.headers as Record<string, string>;
      expect(standard.verify(delivered.body, headers)).toEqual(event);
      expect(headers['webhook-id']).toBe(event.id);
      expect(headers['synctide-signature']).toMatch(new RegExp(`^t=${headers['webhook-timestamp']},v1=`));
      // ...and refuses it tampered: another body, timestamp or id, or another secret.
      const refused = (body: string, changed: Record<string, string>, key = secret) => () => new Webhook(key).verify(body, { ...headers, ...changed });
      expect(refused(delivered.body.replace('"type":"sync.completed"', '"type":"sync.failed"'), {})).toThrow(WebhookVerificationError);
      expect(refused(delivered.body, { 'webhook-timestamp': String(Number(headers['webhook-timestamp']) - 1) })).toThrow(WebhookVerificationError);
      expect(refused(delivered.body, { 'webhook-id': 'another-id' })).toThrow(WebhookVerificationError);
      expect(refused(delivered.body, {}, `whsec_${randomBytes(32).toString('base64')}`)).toThrow(WebhookVerificationError);

      const deliveries = await call(server, 'GET', `/webhooks/${webhookId}/deliveries`);
      const delivery = deliveries.body.items.find((d: any) => d.id === deliveryId);
      expect(delivery.status).toBe('delivered');
      expect(delivery.attempts).toBe(4);
      expect(delivery.attempt_log.map((a: any) => a.status_code)).toEqual([500, 500, 500, 200]);

      // Redelivery sends the same event again (the receiver now answers 200 at once).
      const again = await call(server, 'POST', `/webhooks/${webhookId}/deliveries/${deliveryId}/redeliver`);
      expect(again.status).toBe(202);
      await waitFor(async () => (receiver.received.filter((r) => r.headers['synctide-delivery-id'] === deliveryId).length === 5 ? true : undefined));
      // (Other events' retries may arrive in between: look at this delivery's requests only.)
      const redelivered = receiver.received.filter((r) => r.headers['synctide-delivery-id'] === deliveryId).at(-1)!;
      expect(redelivered.headers['synctide-event-id']).toBe(event.id);

      expect((await call(server, 'DELETE', `/webhooks/${webhookId}`)).status).toBe(204);
      expect((await call(server, 'GET', `/webhooks/${webhookId}`)).status).toBe(404);
    } finally {
      await receiver.close();
    }
  });

  it('a secret made before Standard Webhooks (whsec_ and base64url) signs with its 32 bytes: it verifies in its standard base64 form, and the old header still with the secret as it is', async () => {
    const receiver = await startReceiver(0);
    try {
      // The old form, with a URL-safe character the standard alphabet lacks.
      let bytes = randomBytes(32);
      while (!/[-_]/.test(bytes.toString('base64url'))) bytes = randomBytes(32);
      const oldSecret = `whsec_${bytes.toString('base64url')}`;
      // Stored as before sealing existed (legacy plaintext opens as it is).
      const { rows: hook } = await stack.db.pool.query<{ id: string }>(
        `insert into webhooks (tenant_id, url, event_types, secret) values ('old-secrets', $1, '{connection.disabled}', $2) returning id`,
        [receiver.url, oldSecret],
      );
      const { rows: event } = await stack.db.pool.query<{ id: string }>(
        `insert into webhook_events (tenant_id, event_type, payload) values ('old-secrets', 'connection.disabled', '{"connection_id": "c"}') returning id`,
      );
      const { rows: delivery } = await stack.db.pool.query<{ id: string }>(
        `insert into webhook_deliveries (webhook_id, event_id) values ($1, $2) returning id`,
        [hook[0]!.id, event[0]!.id],
      );
      const { deps } = testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue: 'webhooks-nobody' });
      expect(await new MockActivityEnvironment().run(deliverWebhook(deps), { deliveryId: delivery[0]!.id })).toBe('delivered');
      const [received] = receiver.received;
      const headers = received!.headers as Record<string, string>;
      // As docs/api.md tells a receiver: the same secret in standard base64.
      const converted = `whsec_${bytes.toString('base64')}`;
      expect(new Webhook(converted).verify(received!.body, headers)).toMatchObject({ id: event[0]!.id, type: 'connection.disabled' });
      expect(() => new Webhook(converted).verify(received!.body.replace('"c"', '"d"'), headers)).toThrow(WebhookVerificationError);
      expect(documentedVerifier()(oldSecret, headers['synctide-signature']!, received!.body)).toBe(true);
    } finally {
      await receiver.close();
    }
  });

  /**
   * One attempt of a new delivery of a `connection.disabled` event of `tenant` to `receiver`'s
   * /hook (a secret in its query), run by the delivery activity: what the activity threw, the
   * attempts it recorded and the delivery's status after it.
   */
  async function deliverOnce(receiver: FakeServer, tenant: string) {
    const { rows: hook } = await stack.db.pool.query<{ id: string }>(
      `insert into webhooks (tenant_id, url, event_types, secret) values ($1, $2, '{connection.disabled}', $3) returning id`,
      [tenant, `${receiver.url}/hook?key=url-secret-0123456789`, `whsec_${randomBytes(32).toString('base64')}`],
    );
    const { rows: event } = await stack.db.pool.query<{ id: string }>(
      `insert into webhook_events (tenant_id, event_type, payload) values ($1, 'connection.disabled', '{"connection_id": "c"}') returning id`,
      [tenant],
    );
    const { rows: delivery } = await stack.db.pool.query<{ id: string }>('insert into webhook_deliveries (webhook_id, event_id) values ($1, $2) returning id', [
      hook[0]!.id,
      event[0]!.id,
    ]);
    const { deps } = testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue: 'webhooks-nobody' });
    const failure = await new MockActivityEnvironment().run(deliverWebhook(deps), { deliveryId: delivery[0]!.id }).then(
      () => null,
      (err: unknown) => err,
    );
    const { rows: attempts } = await stack.db.pool.query('select status_code, error from webhook_delivery_attempts where delivery_id = $1', [delivery[0]!.id]);
    const { rows: status } = await stack.db.pool.query<{ status: string }>('select status from webhook_deliveries where id = $1', [delivery[0]!.id]);
    return { failure, attempts, status: status[0]!.status };
  }

  it('a receiver whose TLS certificate is refused (expired, self-signed): the attempt records the host and why, with Node\'s code, and the delivery is retried on its schedule', async () => {
    const expired = await serveTls('expired', (_req, res) => res.end());
    const selfSigned = await serveTls('self-signed', (_req, res) => res.end());
    try {
      const cases: [FakeServer, string][] = [
        [expired, 'the certificate of 127.0.0.1 has expired (CERT_HAS_EXPIRED)'],
        [selfSigned, 'the certificate of 127.0.0.1 is self-signed, not trusted (DEPTH_ZERO_SELF_SIGNED_CERT)'],
      ];
      for (const [receiver, expected] of cases) {
        const { failure, attempts, status } = await deliverOnce(receiver, 'bad-certificates');
        // Retried on the delivery's schedule (10 s after a round's first attempt): the receiver's owner may renew it.
        expect(failure).toBeInstanceOf(ApplicationFailure);
        expect(failure).toMatchObject({ message: expected, type: 'WebhookNotDelivered', nonRetryable: false, nextRetryDelay: '10 seconds' });
        expect(attempts).toEqual([{ status_code: null, error: expected }]);
        expect(status).toBe('pending');
        // Refused in the handshake: no request reached it.
        expect(receiver.requests).toHaveLength(0);
      }
    } finally {
      await expired.close();
      await selfSigned.close();
    }
  });

  it('a receiver answering oversized or malformed headers: the attempt records what was wrong and the host, and the delivery is retried on its schedule', async () => {
    const huge = await serve((_req, res) => res.writeHead(200, { 'x-padding': 'p'.repeat(20 * 1024) }).end());
    const malformed = await serveRaw('HTTP/1.1 200 OK\r\nBad Header: x\r\ncontent-length: 0\r\n\r\n');
    try {
      const cases: [FakeServer, string][] = [
        [huge, "its response headers exceed 16384 bytes (16 KiB), Node's limit on a response's header section (--max-http-header-size)"],
        [malformed, 'its response is not valid HTTP: a header name or value holds a character HTTP does not allow (HPE_INVALID_HEADER_TOKEN)'],
      ];
      for (const [receiver, words] of cases) {
        const { failure, attempts } = await deliverOnce(receiver, 'bad-answers');
        const expected = `the receiver at '127.0.0.1' answered, but ${words}`;
        // Retried on the delivery's schedule (10 s after a round's first attempt), as any attempt not accepted.
        expect(failure).toBeInstanceOf(ApplicationFailure);
        expect(failure).toMatchObject({ message: expected, type: 'WebhookNotDelivered', nonRetryable: false, nextRetryDelay: '10 seconds' });
        expect(attempts).toEqual([{ status_code: null, error: expected }]);
        expect(receiver.requests).toHaveLength(1);
      }
    } finally {
      await huge.close();
      await malformed.close();
    }
  });

  it('emits breaker_opened, breaker_closed and connection.disabled events to subscribed webhooks', async () => {
    const receiver = await startReceiver(0);
    try {
      const created = await call(server, 'POST', '/webhooks', {
        tenant_id: 'breakers', url: receiver.url, event_types: ['connection.breaker_opened', 'connection.breaker_closed', 'connection.disabled'],
      });
      expect(created.status).toBe(201);
      const connection = await call(server, 'POST', '/connections', {
        tenant_id: 'breakers', app_key: 'fragile', provider: 'demo', config: { records_per_resource: 1 }, schedule: { interval_seconds: 86_400 },
      });
      const connectionId: string = connection.body.id;
      const { deps } = testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue: TASK_QUEUE });
      for (let i = 0; i < 5; i++) await recordAttemptFailure(deps)({ connectionId, at: Date.now(), error: 'boom', attemptKey: `a${i}` });
      await recordAttemptSuccess(deps)({ connectionId, at: Date.now() });
      expect((await call(server, 'POST', `/connections/${connectionId}/disable`)).status).toBe(200);
      const types = await waitFor(async () => {
        const page = await call(server, 'GET', `/webhooks/${created.body.id}/deliveries`);
        return page.body.items.length === 3 ? page.body.items.map((d: any) => d.event_type).sort() : undefined;
      });
      expect(types).toEqual(['connection.breaker_closed', 'connection.breaker_opened', 'connection.disabled']);
      await waitFor(async () => (receiver.received.length === 3 ? true : undefined));
      expect(receiver.received.map((r) => JSON.parse(r.body).data.connection_id)).toEqual([connectionId, connectionId, connectionId]);
      for (const { body } of receiver.received) {
        const event = JSON.parse(body) as { type: WebhookEventType };
        expect(webhookEventSchema(event.type).parse(event), event.type).toEqual(event);
      }
    } finally {
      await receiver.close();
    }
  });

  it('the reconcile tick starts a pending delivery whose workflow was never started (its writer died first)', async () => {
    const receiver = await startReceiver(0);
    try {
      const created = await call(server, 'POST', '/webhooks', { tenant_id: 'orphans', url: receiver.url, event_types: ['connection.disabled'] });
      const { rows: event } = await stack.db.pool.query<{ id: string }>(
        `insert into webhook_events (tenant_id, event_type, payload, created_at) values ('orphans', 'connection.disabled', '{"connection_id": "gone"}', now() - interval '1 minute') returning id`,
      );
      const { rows: delivery } = await stack.db.pool.query<{ id: string }>(
        `insert into webhook_deliveries (webhook_id, event_id, created_at) values ($1, $2, now() - interval '1 minute') returning id`,
        [created.body.id, event[0]!.id],
      );
      const { deps } = testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue: TASK_QUEUE });
      const tick = await reconcileConnections(deps)({ at: Date.now() });
      expect(tick.deliveriesStarted).toBe(1);
      expect(await stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(delivery[0]!.id)).result()).toBe('delivered');
      expect(receiver.received.map((r) => r.headers['synctide-event-id'])).toEqual([event[0]!.id]);
      // Started once: the next tick finds nothing to start.
      expect((await reconcileConnections(deps)({ at: Date.now() })).deliveriesStarted).toBeUndefined();
    } finally {
      await receiver.close();
    }
  });

  it('every end of a job sends its event: sync.failed when the reaper, a start-up clean-up or the reconcile tick fails it, sync.cancelled when it is cancelled', async () => {
    // A webhook of its own tenant; no worker polls the task queue the activities start deliveries on.
    const tenant = 'job-ends';
    const { rows: hook } = await stack.db.pool.query<{ id: string }>(
      `insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'http://127.0.0.1:9/', '{sync.failed,sync.cancelled}', 'whsec_x') returning id`,
      [tenant],
    );
    // Each job on a connection of its own (disabled: the tick starts no workflow for it).
    const job = async (trigger: string, status: string) => {
      const { rows: conn } = await stack.db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'ends-' || gen_random_uuid(), 'disabled') returning id`,
        [tenant],
      );
      const { rows } = await stack.db.pool.query<{ id: string }>(
        `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at, created_at)
         values ($1, $2, 'incremental', $3, $4, now() - interval '20 minutes', now() - interval '20 minutes') returning id`,
        [conn[0]!.id, tenant, trigger, status],
      );
      return { id: rows[0]!.id, connectionId: conn[0]!.id };
    };
    const reaped = await job('api', 'running');
    await stack.db.pool.query(
      `insert into sync_tasks (job_id, resource_type, status, started_at, heartbeat_at) values ($1, 'items', 'processing', now() - interval '20 minutes', now() - interval '20 minutes')`,
      [reaped.id],
    );
    const abandonedAtStart = await job('schedule', 'running');
    const cancelled = await job('api', 'queued');
    const { deps } = testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue: 'webhooks-nobody' });
    expect((await reapStaleTasks(deps)({ at: Date.now() })).jobs).toBeGreaterThanOrEqual(1);
    expect(await failAbandonedJobs(deps)({ connectionId: abandonedAtStart.connectionId, at: Date.now(), runId: 'a-new-run' })).toEqual([abandonedAtStart.id]);
    expect(await cancelJob(deps)({ jobId: cancelled.id, at: Date.now(), reason: 'cancelled over the API' })).toBe(true);
    // Left running with no workflow: the tick fails it as abandoned.
    const abandonedByTick = await job('api', 'running');
    await reconcileConnections(deps)({ at: Date.now() });
    const { rows: events } = await stack.db.pool.query<{ event_type: string; job_id: string; status: string; cursor: string }>(
      `select e.event_type, e.payload->'job'->>'id' as job_id, e.payload->'job'->>'status' as status, e.payload->>'cursor' as cursor
         from webhook_events e join webhook_deliveries d on d.event_id = e.id where d.webhook_id = $1`,
      [hook[0]!.id],
    );
    const byJob = Object.fromEntries(events.map((e) => [e.job_id, [e.event_type, e.status]]));
    expect(byJob).toEqual({
      [reaped.id]: ['sync.failed', 'failed'],
      [abandonedAtStart.id]: ['sync.failed', 'failed'],
      [abandonedByTick.id]: ['sync.failed', 'failed'],
      [cancelled.id]: ['sync.cancelled', 'cancelled'],
    });
    expect(events.every((e) => typeof e.cursor === 'string')).toBe(true);
    // sync.cancelled is an event type a webhook can subscribe to.
    const subscribed = await call(server, 'POST', '/webhooks', { tenant_id: tenant, url: 'http://127.0.0.1:9/', event_types: ['sync.cancelled'] });
    expect(subscribed.status, JSON.stringify(subscribed.body)).toBe(201);
  });

  /** A pending delivery of a new event to a new webhook of `tenant` at `url`, written a minute ago (past the tick's grace time). */
  async function oldPendingDelivery(tenant: string, url: string): Promise<{ webhookId: string; eventId: string; deliveryId: string }> {
    const created = await call(server, 'POST', '/webhooks', { tenant_id: tenant, url, event_types: ['connection.disabled'] });
    expect(created.status).toBe(201);
    const { rows: event } = await stack.db.pool.query<{ id: string }>(
      `insert into webhook_events (tenant_id, event_type, payload, created_at) values ($1, 'connection.disabled', '{"connection_id": "gone"}', now() - interval '1 minute') returning id`,
      [tenant],
    );
    const { rows: delivery } = await stack.db.pool.query<{ id: string }>(
      `insert into webhook_deliveries (webhook_id, event_id, created_at) values ($1, $2, now() - interval '1 minute') returning id`,
      [created.body.id, event[0]!.id],
    );
    return { webhookId: created.body.id, eventId: event[0]!.id, deliveryId: delivery[0]!.id };
  }

  it('the reconcile tick restarts a pending delivery whose workflow died', async () => {
    const receiver = await startGatedReceiver();
    try {
      const { eventId, deliveryId } = await oldPendingDelivery('dead-deliveries', receiver.url);
      const { deps } = testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue: TASK_QUEUE });
      await reconcileConnections(deps)({ at: Date.now() });
      // Its workflow runs and is retrying (the receiver answers 500), then dies.
      await waitFor(async () => (receiver.received.length > 0 ? true : undefined));
      const handle = stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId));
      await handle.terminate('the worker host was lost');
      receiver.open();
      const tick = await reconcileConnections(deps)({ at: Date.now() });
      expect(tick.deliveriesStarted ?? 0).toBeGreaterThanOrEqual(1);
      expect(await stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId)).result()).toBe('delivered');
      expect(receiver.received.at(-1)).toMatchObject({ answered: 200, headers: { 'synctide-event-id': eventId } });
    } finally {
      await receiver.close();
    }
  });

  it('a redelivery that found the previous run still closing is delivered: the tick restarts it once that run has ended', async () => {
    const receiver = await startGatedReceiver();
    try {
      const { webhookId, deliveryId } = await oldPendingDelivery('closing-redeliveries', receiver.url);
      const { deps } = testActivityDeps({ pool: stack.db.pool, temporal: stack.env.client, taskQueue: TASK_QUEUE });
      await reconcileConnections(deps)({ at: Date.now() });
      await waitFor(async () => (receiver.received.length > 0 ? true : undefined));
      // Its retries ran out: the delivery is marked failed and its run is about to close.
      await stack.db.pool.query(`update webhook_deliveries set status = 'failed', finished_at = now() where id = $1`, [deliveryId]);
      // Redelivered in that moment: the start finds the closing run and starts none.
      expect((await call(server, 'POST', `/webhooks/${webhookId}/deliveries/${deliveryId}/redeliver`)).status).toBe(202);
      await stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId)).terminate('closed');
      receiver.open();
      const tick = await reconcileConnections(deps)({ at: Date.now() });
      expect(tick.deliveriesStarted ?? 0).toBeGreaterThanOrEqual(1);
      expect(await stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(deliveryId)).result()).toBe('delivered');
      const deliveries = await call(server, 'GET', `/webhooks/${webhookId}/deliveries`);
      expect(deliveries.body.items.map((d: any) => [d.id, d.status])).toEqual([[deliveryId, 'delivered']]);
    } finally {
      await receiver.close();
    }
  });

  it('refuses webhook URLs at loopback, private-range and link-local addresses with 400, by validation alone', async () => {
    for (const url of [
      'http://169.254.169.254/latest/meta-data',
      'http://10.0.0.1/hook',
      'http://127.0.0.1:9/hook',
      'http://[::1]/hook',
      'http://[::ffff:10.0.0.1]/hook',
      'http://[fd00::1]/hook',
      // In ::/8, reserved: no public address lies there (::1:7f00:1 may reach 127.0.0.1 on some stacks).
      'http://[::1:7f00:1]/hook',
      'http://localhost/hook',
      // The absolute form of the name (its trailing dot) names the same host.
      'http://localhost./hook',
      'http://192.168.1.1/hook',
      'http://100.64.0.1/hook',
      'ftp://example.com/hook',
      'https://user:pass@example.com/hook',
    ]) {
      const answer = await call(strict, 'POST', '/webhooks', { tenant_id: 'strict', url, event_types: ['sync.failed'] });
      expect(answer.status, url).toBe(400);
      expect(answer.body.error.code, url).toBe('invalid_request');
    }
    const { rows } = await stack.db.pool.query(`select url from webhooks where tenant_id = 'strict'`);
    expect(rows).toEqual([]);
  });
});
