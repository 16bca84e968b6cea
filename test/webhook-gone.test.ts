// A receiver answering 410 Gone says it wants no more webhooks from this sender (Standard
// Webhooks): the attempt is recorded with its 410 and the delivery fails at once, never retried,
// and each other delivery to that endpoint makes its one attempt and fails the same way.
// Time-skipping server (TimeSkipping: in the timing-sensitive group), real worker, Postgres,
// receivers on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { listDeliveries } from '../db/models/webhooks';
import { startWebhookDeliveries } from '../temporal/client';
import { webhookDeliveryWorkflowId } from '../temporal/ids';
import { useDeliveryRounds } from './helpers/delivery-rounds';
import { receiver as fakeReceiver } from './helpers/fake-server';

const TASK_QUEUE = 'delivery-gone';

describe('a receiver answering 410 Gone, on the time-skipping server', () => {
  const { stack, pendingDelivery } = useDeliveryRounds(TASK_QUEUE);

  it("fails the delivery at its first 410, recorded with its status, and each other delivery of the endpoint at its own first attempt: none is retried (a retry would be answered 200)", async () => {
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
      expect(await startWebhookDeliveries(stack.env.client, TASK_QUEUE, [first, second])).toEqual([first, second]);
      const handles = [first, second].map((id) => stack.env.client.workflow.getHandle(webhookDeliveryWorkflowId(id)));
      expect(await Promise.all(handles.map((handle) => handle.result()))).toEqual(['failed', 'failed']);

      // One request per event, each answered 410: nothing was sent again.
      expect(rx.received.map((r) => r.answered)).toEqual([410, 410]);
      expect(new Set(rx.received.map((r) => r.headers['webhook-id'])).size).toBe(2);

      // As the API lists them: failed, finished, their one attempt's 410 kept.
      const listed = await listDeliveries(stack.db.pool, { webhookId, limit: 10 });
      expect(listed.rows).toHaveLength(2);
      for (const row of listed.rows) {
        expect({ status: row.status, attempts: row.attempts, last_status_code: row.last_status_code }, row.id).toEqual({ status: 'failed', attempts: 1, last_status_code: 410 });
        expect(row.finished_at, row.id).not.toBeNull();
        expect(row.attempt_log.map((a) => a.status_code), row.id).toEqual([410]);
      }

      // The activity ended its retries itself: one failure, not retryable, saying why.
      for (const handle of handles) {
        const history = await handle.fetchHistory();
        const failures = (history.events ?? []).flatMap((event) => (event.activityTaskFailedEventAttributes ? [event.activityTaskFailedEventAttributes.failure] : []));
        expect(failures.map((f) => [f?.applicationFailureInfo?.type, f?.applicationFailureInfo?.nonRetryable, f?.message])).toEqual([
          ['WebhookReceiverGone', true, expect.stringMatching(/410 Gone/)],
        ]);
      }
    } finally {
      await rx.close();
    }
  });
});
