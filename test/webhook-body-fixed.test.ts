// One webhook-id carries one body: Standard Webhooks receivers deduplicate by `webhook-id`, so every
// attempt and redelivery of an event sends the bytes its first attempt sent, whatever happened to
// the credentials keyring (which seals the feed cursor of a `sync.*` event) in between. Against a
// real Postgres; the attempts are the delivery activity's own (no Temporal needed to call it).
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { finishJob } from '../activities/finish-job';
import { deliverWebhook } from '../activities/webhook-deliveries';
import { parseKeyring } from '../lib/credentials';
import { feedCursors } from '../lib/feed-cursors';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { receiver } from './helpers/fake-server';

const KEY_A = Buffer.alloc(32, 1).toString('base64');
const KEY_B = Buffer.alloc(32, 2).toString('base64');
/** The keyring before `credentials:rotate`: key `a` alone. */
const BEFORE = parseKeyring({ CREDENTIALS_KEYS: `a:${KEY_A}` })!;
/** The keyring during the rotation: `b` active, `a` still read. */
const ROTATED = parseKeyring({ CREDENTIALS_KEYS: `a:${KEY_A},b:${KEY_B}`, CREDENTIALS_ACTIVE_KEY_ID: 'b' })!;

describe('the body of a webhook event', () => {
  const db = useTestDatabase();
  const q = <T = any>(sql: string, params: unknown[] = []) => db.pool.query(sql, params).then((r) => r.rows as T[]);

  it('is the same bytes under the same webhook-id on a retry after a credentials key rotation (sync.completed and its sealed cursor)', async () => {
    const tenant = `t-${Math.random().toString(36).slice(2)}`;
    const [connection] = await q<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'x', 'active') returning id`, [tenant]);
    await q(`insert into records (connection_id, resource_type, external_id, data, synced_at, change) values ($1, 'items', 'a', '{}', now(), 'insert')`, [connection!.id]);
    // The first attempt is refused (500); the retry, made after the rotation, is accepted.
    const hook = await receiver((_, before) => (before.length === 0 ? 500 : 200));
    try {
      await q(`insert into webhooks (tenant_id, url, event_types, secret) values ($1, $2, '{sync.completed}', 'whsec_MDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDA')`, [tenant, hook.url]);
      const [job] = await q<{ id: string }>(
        `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at) values ($1, $2, 'full', 'api', 'running', now()) returning id`,
        [connection!.id, tenant],
      );
      const at = Date.now();
      // The job ends on a worker holding key `a` only: its sync.completed event is written then.
      expect(await finishJob(testActivityDeps({ pool: db.pool, credentials: BEFORE }).deps)({ jobId: job!.id, outcome: 'completed', at, startedAt: at - 1000 })).toBe('completed');
      const [delivery] = await q<{ id: string }>(`select d.id from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.connection_id = $1`, [connection!.id]);
      const attempt = (credentials: typeof BEFORE) =>
        new MockActivityEnvironment().run(deliverWebhook(testActivityDeps({ pool: db.pool, credentials }).deps), { deliveryId: delivery!.id }).then(
          (outcome) => outcome,
          (err: Error) => err.message,
        );
      expect(await attempt(BEFORE)).toBe('the receiver answered 500');
      // `credentials:rotate` began: every process now seals under `b`. The retry goes out.
      expect(await attempt(ROTATED)).toBe('delivered');
    } finally {
      await hook.close();
    }
    const [first, retry] = hook.received;
    expect(retry!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(retry!.body, 'the retry of the same webhook-id').toBe(first!.body);
    // The cursor it carries still reads on the connection's feed during the rotation.
    const cursor: string = JSON.parse(retry!.body).data.cursor;
    expect(feedCursors(ROTATED).decode(cursor)).toMatchObject({ connection: connection!.id });
  });
});
