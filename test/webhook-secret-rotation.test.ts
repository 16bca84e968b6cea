// Rotating a webhook's signing secret (`POST /webhooks/{id}/rotate-secret`) through the real API
// on 127.0.0.1 and Postgres, and the delivery activity POSTing to a real receiver on 127.0.0.1
// that verifies with the `standardwebhooks` package: during the overlap every attempt carries the
// new secret's and the previous one's signatures, so a receiver holding either verifies it; after
// the overlap only the new one's.
import { createHmac } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteOldJobs } from '../activities/delete-old-jobs';
import { deliverWebhook } from '../activities/webhook-deliveries';
import { resealSecrets } from '../commands/credentials';
import { envelopeKeyId, open, parseKeyring } from '../lib/credentials';
import { listen, type HttpServer } from '../lib/http';
import { apiAppWithoutTemporal, callApi, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { TEST_KEYRING, testActivityDeps } from './helpers/deps';
import { receiver as fakeReceiver, type FakeReceiver } from './helpers/fake-server';
import { capturingLogger, type LogLines } from './helpers/logs';
import { documentedVerifier, lastV1Verifies } from './helpers/webhook-verifiers';

describe('webhook secret rotation', () => {
  const db = useTestDatabase();
  let api: HttpServer;
  let apiLines: LogLines;
  let hooks: FakeReceiver;

  beforeAll(async () => {
    // The API as deployed for tests: private addresses allowed, to reach the receiver.
    const { logger, lines } = capturingLogger();
    apiLines = lines;
    api = await listen(apiAppWithoutTemporal(db.pool, 'webhook-secret-rotation', { logger, webhookAllowPrivate: true }), '127.0.0.1', 0);
    hooks = await fakeReceiver(() => 204);
  });
  afterAll(async () => {
    await api?.close();
    await hooks?.close();
  });

  const call = (method: string, path: string, body?: unknown, key = TEST_API_KEY) => callApi(api.url, key, method, path, body);
  const q = <T = any>(sql: string, params: unknown[] = []) => db.pool.query(sql, params).then((r) => r.rows as T[]);

  async function createWebhook(tenant: string): Promise<{ id: string; secret: string }> {
    const created = await call('POST', '/webhooks', { tenant_id: tenant, url: hooks.url, event_types: ['connection.disabled'] });
    expect(created.status, created.text).toBe(201);
    return created.body;
  }

  /**
   * One delivery of a new `connection.disabled` event to webhook `id`, made by the delivery
   * activity, accepted by `to` (the receiver the webhook's URL names): the request it took.
   */
  async function deliverOnce(webhookId: string, tenant: string, to: FakeReceiver = hooks) {
    const [event] = await q<{ id: string }>(`insert into webhook_events (tenant_id, event_type, payload) values ($1, 'connection.disabled', '{"connection_id": "c"}') returning id`, [tenant]);
    const [delivery] = await q<{ id: string }>('insert into webhook_deliveries (webhook_id, event_id) values ($1, $2) returning id', [webhookId, event!.id]);
    const { deps, lines } = testActivityDeps({ pool: db.pool });
    const outcome = await new MockActivityEnvironment().run(deliverWebhook(deps), { deliveryId: delivery!.id }).catch((err: Error) => err.message);
    expect(outcome).toBe('delivered');
    const received = to.received.find((r) => r.headers['webhook-id'] === event!.id);
    expect(received).toBeDefined();
    return { eventId: event!.id, body: received!.body, headers: received!.headers as Record<string, string>, workerLines: lines };
  }

  /** Whether a receiver holding `secret` accepts `delivery` with the reference library. */
  function verifies(secret: string, delivery: { body: string; headers: Record<string, string> }): boolean {
    try {
      new Webhook(secret).verify(delivery.body, delivery.headers);
      return true;
    } catch (err) {
      if (err instanceof WebhookVerificationError) return false;
      throw err;
    }
  }

  it('answers a new whsec_ secret once; during the overlap a delivery verifies with either secret, after it only with the new one', async () => {
    const { id, secret: old } = await createWebhook('acme');
    const before = await deliverOnce(id, 'acme');
    expect([verifies(old, before), before.headers['webhook-signature']!.split(' ')]).toEqual([true, [expect.stringMatching(/^v1,/)]]);

    const dbNow = async () => (await q<{ now: Date }>('select now()'))[0]!.now.getTime();
    // The rotation happened between these two readings of the database's clock.
    const earliest = await dbNow();
    const rotated = await call('POST', `/webhooks/${id}/rotate-secret`, {});
    const latest = await dbNow();
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body).toEqual({
      id, tenant_id: 'acme', url: hooks.url, event_types: ['connection.disabled'], created_at: expect.any(String), disabled_at: null, disabled_reason: null,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      previous_secret_expires_at: expect.any(String),
    });
    const fresh: string = rotated.body.secret;
    expect(fresh).not.toBe(old);
    // The default overlap: 24 hours from the rotation (the database's clock).
    const [stored] = await q<{ secret: string; previous_secret: string; expires: Date }>(
      'select secret, previous_secret, previous_secret_expires_at as expires from webhooks where id = $1',
      [id],
    );
    expect(stored!.expires.getTime()).toBeGreaterThanOrEqual(earliest + 86_400_000);
    expect(stored!.expires.getTime()).toBeLessThanOrEqual(latest + 86_400_000);
    expect(new Date(rotated.body.previous_secret_expires_at).getTime()).toBe(stored!.expires.getTime());

    const during = await deliverOnce(id, 'acme');
    // Two signatures, the new secret's first: a receiver holding either secret accepts it...
    const signatures = during.headers['webhook-signature']!.split(' ');
    expect(signatures).toHaveLength(2);
    expect(verifies(fresh, during)).toBe(true);
    expect(verifies(old, during)).toBe(true);
    expect(verifies(fresh, { ...during, headers: { ...during.headers, 'webhook-signature': signatures[0]! } })).toBe(true);
    expect(verifies(old, { ...during, headers: { ...during.headers, 'webhook-signature': signatures[1]! } })).toBe(true);
    // ...and nobody else, nor a tampered body.
    expect(verifies(`whsec_${Buffer.alloc(32, 7).toString('base64')}`, during)).toBe(false);
    expect(verifies(old, { ...during, body: during.body.replace('"c"', '"d"') })).toBe(false);

    // The overlap over (its end moved to the past, as the clock would):
    await q(`update webhooks set previous_secret_expires_at = now() - interval '1 second' where id = $1`, [id]);
    const after = await deliverOnce(id, 'acme');
    expect(after.headers['webhook-signature']!.split(' ')).toHaveLength(1);
    expect(verifies(fresh, after)).toBe(true);
    expect(verifies(old, after)).toBe(false);
    // The daily retention clean-up then drops it from the row.
    const { deps: worker, lines: cleanupLines } = testActivityDeps({ pool: db.pool });
    await deleteOldJobs(worker)({ at: Date.now(), retentionDays: 7 });
    expect(await q('select previous_secret, previous_secret_expires_at from webhooks where id = $1', [id])).toEqual([{ previous_secret: null, previous_secret_expires_at: null }]);
    expect(cleanupLines.find((l) => l.msg === 'expired previous webhook secrets dropped')).toMatchObject({ webhooks: 1 });

    // Neither secret is ever shown again, logged, or stored in plaintext.
    const shown = [await call('GET', `/webhooks/${id}`), await call('GET', '/webhooks?tenant_id=acme'), await call('GET', `/webhooks/${id}/deliveries`)];
    const [row] = await q<{ secret: string; previous_secret: string }>('select secret, previous_secret from webhooks where id = $1', [id]);
    const audit = await q('select * from audit_log');
    for (const text of [...shown.map((s) => s.text), JSON.stringify(apiLines), JSON.stringify([before, during, after].map((d) => d.workerLines)), JSON.stringify(row), JSON.stringify(stored), JSON.stringify(audit)]) {
      expect(text).not.toContain(fresh);
      expect(text).not.toContain(old);
      expect(text).not.toContain(fresh.slice('whsec_'.length));
      expect(text).not.toContain(old.slice('whsec_'.length));
    }
    expect(audit.map((a) => [a.method, a.path, a.status])).toContainEqual(['POST', `/webhooks/${id}/rotate-secret`, 200]);
  });

  it('during the overlap the deprecated Synctide-Signature carries one v1= per secret, current last, and a receiver verifying it with either secret accepts the delivery', async () => {
    // A receiver still on the older header, verifying it with the documented snippet and the
    // secret it holds: 401 when that fails.
    let holding = '';
    const verify = documentedVerifier();
    const older = await fakeReceiver(({ headers, body }) => (verify(holding, String(headers['synctide-signature']), body) ? 204 : 401));
    try {
      const created = await call('POST', '/webhooks', { tenant_id: 'acme', url: older.url, event_types: ['connection.disabled'] });
      expect(created.status, created.text).toBe(201);
      const { id, secret: old } = created.body as { id: string; secret: string };
      holding = old;
      const before = await deliverOnce(id, 'acme', older);
      expect(before.headers['synctide-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);

      const rotated = await call('POST', `/webhooks/${id}/rotate-secret`, { expire_previous_after_seconds: 3600 });
      expect(rotated.status, rotated.text).toBe(200);
      const fresh: string = rotated.body.secret;
      // Still holding the previous secret (it has not switched yet): accepted.
      const during = await deliverOnce(id, 'acme', older);
      // Switched to the new one within the overlap: accepted.
      holding = fresh;
      const switched = await deliverOnce(id, 'acme', older);
      // Stripe's form: t, then one v1 per secret, the current secret's last.
      for (const delivery of [during, switched]) {
        const header = delivery.headers['synctide-signature']!;
        const t = delivery.headers['webhook-timestamp']!;
        const mac = (secret: string) => createHmac('sha256', secret).update(`${t}.${delivery.body}`).digest('hex');
        expect(header).toBe(`t=${t},v1=${mac(old)},v1=${mac(fresh)}`);
        // A receiver on the verifier documented before (one v1: the last) verifies with the
        // current secret, as it did before the overlap carried two.
        expect(lastV1Verifies(fresh, header, delivery.body)).toBe(true);
        expect([verify(fresh, header, delivery.body), verify(old, header, delivery.body), verify('whsec_other', header, delivery.body)]).toEqual([true, true, false]);
        expect(verify(old, header, delivery.body.replace('"c"', '"d"'))).toBe(false);
      }

      // The overlap over: the new secret's alone, and the previous one verifies no more.
      await q(`update webhooks set previous_secret_expires_at = now() - interval '1 second' where id = $1`, [id]);
      const after = await deliverOnce(id, 'acme', older);
      expect(after.headers['synctide-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(verify(old, after.headers['synctide-signature']!, after.body)).toBe(false);
    } finally {
      await older.close();
    }
  });

  it('keeps the previous secret sealed, bound to its row, and re-sealed by a key rotation', async () => {
    const { id, secret: old } = await createWebhook('acme');
    const { id: other } = await createWebhook('acme');
    expect((await call('POST', `/webhooks/${id}/rotate-secret`, { expire_previous_after_seconds: 3600 })).status).toBe(200);
    const [row] = await q<{ secret: string; previous_secret: string }>('select secret, previous_secret from webhooks where id = $1', [id]);
    expect(row!.previous_secret).toMatch(/^enc:v1:default:/);
    expect(open(TEST_KEYRING, { table: 'webhooks', id }, row!.previous_secret)).toBe(old);
    // Copied into another row, it does not open there: that row's deliveries fail on this side, unsigned and unsent.
    expect(() => open(TEST_KEYRING, { table: 'webhooks', id: other }, row!.previous_secret)).toThrow(/does not open/);

    // `npm run credentials:rotate` re-seals it under the new active key, still opening to the same secret.
    const bothKeys = (active: string) =>
      parseKeyring({ CREDENTIALS_KEYS: `default:${TEST_KEYRING.keys.get('default')!.toString('base64')},next:${Buffer.alloc(32, 9).toString('base64')}`, CREDENTIALS_ACTIVE_KEY_ID: active })!;
    const result = await resealSecrets({ pool: db.pool, credentials: bothKeys('next') }, 'all');
    expect(result.remaining).toBe(0);
    const [resealed] = await q<{ previous_secret: string }>('select previous_secret from webhooks where id = $1', [id]);
    expect(envelopeKeyId(resealed!.previous_secret)).toBe('next');
    expect(open(parseKeyring({ CREDENTIALS_KEYS: `next:${Buffer.alloc(32, 9).toString('base64')}` })!, { table: 'webhooks', id }, resealed!.previous_secret)).toBe(old);
    // (Back under the test key, for the tests after this one.)
    expect((await resealSecrets({ pool: db.pool, credentials: bothKeys('default') }, 'all')).remaining).toBe(0);
  });

  it('expire_previous_after_seconds 0 drops the previous secret at once; a second rotation during the overlap keeps only the secret it replaces', async () => {
    const { id, secret: first } = await createWebhook('acme');
    const now = await call('POST', `/webhooks/${id}/rotate-secret`, { expire_previous_after_seconds: 0 });
    expect([now.status, now.body.previous_secret_expires_at]).toEqual([200, null]);
    const second: string = now.body.secret;
    const alone = await deliverOnce(id, 'acme');
    expect([verifies(second, alone), verifies(first, alone)]).toEqual([true, false]);
    expect(await q('select previous_secret, previous_secret_expires_at from webhooks where id = $1', [id])).toEqual([{ previous_secret: null, previous_secret_expires_at: null }]);

    const third: string = (await call('POST', `/webhooks/${id}/rotate-secret`)).body.secret;
    const fourth = await call('POST', `/webhooks/${id}/rotate-secret`, { expire_previous_after_seconds: 600 });
    expect(fourth.status, fourth.text).toBe(200);
    const during = await deliverOnce(id, 'acme');
    expect([fourth.body.secret, third, second].map((s: string) => verifies(s, during))).toEqual([true, true, false]);
  });

  it("a tenant key rotates its own webhook's secret, and another tenant's answers 404 as a missing one does, changing nothing", async () => {
    const mine = await createWebhook('tenant-a');
    const theirs = await createWebhook('tenant-b');
    const key = (await call('POST', '/tenants/tenant-a/api-keys', {})).body.secret as string;
    const stored = async (id: string) => (await q<{ secret: string }>('select secret from webhooks where id = $1', [id]))[0]!.secret;
    const theirsBefore = await stored(theirs.id);

    const refused = await call('POST', `/webhooks/${theirs.id}/rotate-secret`, {}, key);
    expect([refused.status, refused.body]).toEqual([404, { error: { code: 'not_found', message: expect.any(String) } }]);
    expect(await stored(theirs.id)).toBe(theirsBefore);
    const missing = await call('POST', '/webhooks/00000000-0000-4000-8000-000000000000/rotate-secret', {});
    expect([missing.status, missing.body.error.code]).toEqual([404, 'not_found']);
    expect(refused.body.error.message).toBe((await call('POST', '/webhooks/00000000-0000-4000-8000-000000000000/rotate-secret', {}, key)).body.error.message);

    const own = await call('POST', `/webhooks/${mine.id}/rotate-secret`, {}, key);
    expect(own.status, own.text).toBe(200);
    expect(own.body.secret).not.toBe(mine.secret);
    // A read-only key may not rotate.
    const reader = (await call('POST', '/tenants/tenant-a/api-keys', { scopes: ['read'] })).body.secret as string;
    expect((await call('POST', `/webhooks/${mine.id}/rotate-secret`, {}, reader)).status).toBe(403);
  });

  it('refuses bad input with a 400 JSON error naming the field, rotating nothing', async () => {
    const { id } = await createWebhook('acme');
    const [before] = await q<{ secret: string }>('select secret from webhooks where id = $1', [id]);
    for (const body of [
      { expire_previous_after_seconds: -1 },
      { expire_previous_after_seconds: 1.5 },
      { expire_previous_after_seconds: '3600' },
      { expire_previous_after_seconds: 7 * 86_400 + 1 },
      { expire_previous_after_seconds: null },
      { expires_in: 3600 },
    ]) {
      const answer = await call('POST', `/webhooks/${id}/rotate-secret`, body);
      expect([answer.status, answer.body.error?.code], JSON.stringify(body)).toEqual([400, 'invalid_request']);
      expect(answer.body.error.message, JSON.stringify(body)).toMatch(/^(expire_previous_after_seconds|body): /);
    }
    // Not JSON, with the JSON content type.
    const malformed = await fetch(`${api.url}/webhooks/${id}/rotate-secret`, { method: 'POST', headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' }, body: '{"expire_previous' });
    expect([malformed.status, ((await malformed.json()) as any).error.code]).toEqual([400, 'invalid_request']);
    const badId = await call('POST', '/webhooks/not-a-uuid/rotate-secret', {});
    expect([badId.status, badId.body.error.code]).toEqual([400, 'invalid_request']);
    expect(await q('select secret from webhooks where id = $1', [id])).toEqual([before]);
    // The largest overlap is accepted.
    expect((await call('POST', `/webhooks/${id}/rotate-secret`, { expire_previous_after_seconds: 7 * 86_400 })).status).toBe(200);
  });
});
