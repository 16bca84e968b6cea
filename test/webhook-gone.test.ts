// A receiver answering 410 Gone says it wants no more webhooks from this sender (Standard
// Webhooks): the attempt is recorded with its 410, the delivery fails at once, never retried, and
// the webhook is disabled: its other pending deliveries end failed without a request, and no new
// event is delivered to it.
// Time-skipping server (TimeSkipping: in the timing-sensitive group), real worker, Postgres,
// receivers on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { findJobEventFacts, findPendingDeliveries, findWebhook, insertConnectionEvent, listDeliveries } from '../db/models/webhooks';
import { withTransaction } from '../db/transaction';
import { startWebhookDeliveries } from '../temporal/client';
import { webhookDeliveryWorkflowId } from '../temporal/ids';
import { useDeliveryRounds } from './helpers/delivery-rounds';
import { receiver as fakeReceiver } from './helpers/fake-server';

const TASK_QUEUE = 'delivery-gone';

describe('a receiver answering 410 Gone, on the time-skipping server', () => {
  const { stack, pendingDelivery } = useDeliveryRounds(TASK_QUEUE);

  it('fails the delivery at its first 410 and disables the webhook: its other pending delivery ends failed at its next attempt without a request, a later event makes no delivery to it, and the reconcile tick has nothing of it left to restart', async () => {
    // 410 to each event's first request, 200 to any later one: a delivery retried after its 410 ends delivered.
    const rx = await fakeReceiver(({ headers }, before) => (before.some((r) => r.headers['webhook-id'] === headers['webhook-id']) ? 200 : 410));
    try {
      const first = await pendingDelivery('gone', rx.url);
      // A second event for the same endpoint, pending beside the first.
      const { rows } = await stack.db.pool.query<{ id: string; webhook_id: string }>(
        `with event as (insert into webhook_events (tenant_id, event_type, payload) values ('gone', 'connection.disabled', '{"connection_id": "c2"}') returning id)
         insert into webhook_deliveries (webhook_id, event_id)
         select d.webhook_id, event.id from webhook_deliveries d, event where d.id = $1
         returning id, webhook_id`,
        [first],
      );
      const [{ id: second, webhook_id: webhookId }] = rows as [{ id: string; webhook_id: string }];
      // Another webhook of the tenant, enabled throughout: events still fan out to it.
      const { rows: other } = await stack.db.pool.query<{ id: string }>(
        `insert into webhooks (tenant_id, url, event_types, secret) values ('gone', $1, '{connection.disabled}', 'whsec_AAAA') returning id`,
        ['https://example.com/other'],
      );

      expect(await findWebhook(stack.db.pool, webhookId)).toMatchObject({ disabled_at: null, disabled_reason: null });
      expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [first])).toEqual([first]);
      const firstHandle = stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(first));
      expect(await firstHandle.result()).toBe('failed');

      // The 410 disabled the webhook, saying why and when.
      const hook = (await findWebhook(stack.db.pool, webhookId))!;
      expect(hook.disabled_at).toBeInstanceOf(Date);
      expect(hook.disabled_reason).toMatch(/410 Gone/);
      expect(hook.disabled_reason).toContain(hook.disabled_at!.toISOString());

      // The other pending delivery, started now (as the reconcile tick would start it), ends
      // failed at its next attempt without a request.
      expect(await findPendingDeliveries(stack.db.pool, new Date(Date.now() + 60_000), [], 100)).toContain(second);
      expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [second])).toEqual([second]);
      expect(await stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(second)).result()).toBe('failed');
      expect(rx.received.map((r) => r.answered)).toEqual([410]);
      // Nothing of the disabled webhook is left pending for the reconcile tick to restart.
      expect(await findPendingDeliveries(stack.db.pool, new Date(Date.now() + 60_000), [], 100)).not.toContain(second);

      // As the API lists them: both failed and finished; the first with its one attempt's 410, the
      // second with no attempt and an error naming the webhook's disabling.
      const listed = new Map((await listDeliveries(stack.db.pool, { webhookId, limit: 10 })).rows.map((row) => [row.id, row]));
      expect(listed.get(first)).toMatchObject({ status: 'failed', attempts: 1, last_status_code: 410 });
      expect(listed.get(first)!.attempt_log.map((a) => a.status_code)).toEqual([410]);
      expect(listed.get(second)).toMatchObject({ status: 'failed', attempts: 0, last_status_code: null, attempt_log: [] });
      expect(listed.get(second)!.last_error).toMatch(/not sent: the webhook is disabled/);
      expect(listed.get(second)!.last_error).toContain(hook.disabled_reason!);
      for (const id of [first, second]) expect(listed.get(id)!.finished_at, id).not.toBeNull();

      // The activity ended the first delivery's retries itself: one failure, not retryable, saying why.
      const history = await firstHandle.fetchHistory();
      const failures = (history.events ?? []).flatMap((event) => (event.activityTaskFailedEventAttributes ? [event.activityTaskFailedEventAttributes.failure] : []));
      expect(failures.map((f) => [f?.applicationFailureInfo?.type, f?.applicationFailureInfo?.nonRetryable, f?.message])).toEqual([
        ['WebhookReceiverGone', true, expect.stringMatching(/410 Gone/)],
      ]);

      // A later event of the tenant's connection fans out to the enabled webhook only.
      const { rows: conn } = await stack.db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key) values ('gone', 'demo', 'gone-app') returning id`,
      );
      const connectionId = conn[0]!.id;
      const created = await withTransaction(stack.db.pool, (tx) =>
        insertConnectionEvent(tx, { type: 'connection.disabled', connectionId, data: { connection_id: connectionId, disabled_at: new Date().toISOString() } }, new Date()),
      );
      expect(created).toHaveLength(1);
      const { rows: to } = await stack.db.pool.query<{ webhook_id: string }>('select webhook_id from webhook_deliveries where id = any ($1::uuid[])', [created]);
      expect(to.map((r) => r.webhook_id)).toEqual([other[0]!.id]);
      // With the enabled one gone, nobody listens: no event, and a job's end reads no facts for one.
      await stack.db.pool.query('delete from webhooks where id = $1', [other[0]!.id]);
      expect(await withTransaction(stack.db.pool, (tx) =>
        insertConnectionEvent(tx, { type: 'connection.disabled', connectionId, data: { connection_id: connectionId, disabled_at: new Date().toISOString() } }, new Date()),
      )).toEqual([]);
      const { rows: job } = await stack.db.pool.query<{ id: string }>(
        `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status) values ($1, 'gone', 'incremental', 'api', 'running') returning id`,
        [connectionId],
      );
      expect(await findJobEventFacts(stack.db.pool, job[0]!.id, 'connection.disabled')).toBeNull();
      expect(rx.received).toHaveLength(1);
    } finally {
      await rx.close();
    }
  });
});
