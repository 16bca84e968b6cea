// The list routes' cursors: one codec module (policy/cursors.ts) and one pagination helper
// (api/pagination.ts). Every list route pages to its end with `next_cursor`, and answers a cursor
// it did not make with the same 400; against the real API app and a real Postgres.
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { deliveryCursor, feedCursor, jobCursor, serialCursor, uuidCursor } from '../policy/cursors';
import { feedCursors } from '../lib/feed-cursors';
import { useApiWithoutTemporal } from './helpers/api';
import { TEST_KEYRING } from './helpers/deps';

const base64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const UUID_A = '0b5e2c7e-4a56-4f7e-9d0b-5d7c3c1f2a10';

describe('cursor codecs', () => {
  it('encode exactly the text the API has always issued, and read it back', () => {
    expect(uuidCursor.encode({ id: UUID_A })).toBe(base64({ id: UUID_A }));
    expect(serialCursor.encode({ id: '42' })).toBe(base64({ id: '42' }));
    // A time position is the row's time to the microsecond, as the database keeps it.
    const createdAt = '2030-01-02T03:04:05.006007Z';
    expect(jobCursor.encode({ createdAt, id: UUID_A })).toBe(base64({ created_at: createdAt, id: UUID_A }));
    expect(deliveryCursor.encode({ createdAt, id: UUID_A })).toBe(base64({ at: createdAt, id: UUID_A }));
    expect(feedCursor.encode({ seq: '7', epoch: '3' })).toBe(base64({ seq: '7', epoch: '3' }));
    for (const [codec, position] of [
      [uuidCursor, { id: UUID_A }],
      [serialCursor, { id: '42' }],
      [jobCursor, { createdAt, id: UUID_A }],
      [deliveryCursor, { createdAt, id: UUID_A }],
      [feedCursor, { seq: '7', epoch: '3' }],
    ] as const) {
      expect((codec.decode as (t: string) => unknown)((codec.encode as (p: unknown) => string)(position))).toEqual(position);
    }
    // A feed cursor issued before cursors carried an epoch reads as epoch 0.
    expect(feedCursor.decode(base64({ seq: '9' }))).toEqual({ seq: '9', epoch: '0' });
    // A time cursor issued to the millisecond (toISOString) still reads.
    expect(jobCursor.decode(base64({ created_at: '2030-01-02T03:04:05.006Z', id: UUID_A }))).toEqual({ createdAt: '2030-01-02T03:04:05.006Z', id: UUID_A });
    expect(deliveryCursor.decode(base64({ at: '2030-01-02T03:04:05.006Z', id: UUID_A }))).toEqual({ createdAt: '2030-01-02T03:04:05.006Z', id: UUID_A });
  });

  it('read nothing they did not make', () => {
    const foreign = ['', 'not-a-cursor', base64([UUID_A]), base64(null), base64({ id: 1 }), base64({ id: [UUID_A] }), base64({ id: 'x' })];
    for (const text of foreign) {
      expect(uuidCursor.decode(text), text).toBeNull();
      expect(serialCursor.decode(text), text).toBeNull();
      expect(jobCursor.decode(text), text).toBeNull();
      expect(deliveryCursor.decode(text), text).toBeNull();
      expect(feedCursor.decode(text), text).toBeNull();
    }
    expect(jobCursor.decode(base64({ created_at: 'yesterday', id: UUID_A }))).toBeNull();
    expect(jobCursor.decode(base64({ at: new Date().toISOString(), id: UUID_A }))).toBeNull();
    expect(serialCursor.decode(base64({ id: UUID_A }))).toBeNull();
    expect(feedCursor.decode(base64({ seq: '1', epoch: 'x' }))).toBeNull();
    expect(feedCursor.decode(base64({ seq: '1', epoch: '0', connection_id: 'x' }))).toBeNull();
    // A feed cursor names its connection, in lowercase whatever the spelling it was issued with.
    expect(feedCursor.decode(feedCursor.encode({ seq: '7', epoch: '3', connection: UUID_A.toUpperCase() }))).toEqual({ seq: '7', epoch: '3', connection: UUID_A });
    // …and the one resource type its reader followed, if one.
    expect(feedCursor.decode(feedCursor.encode({ seq: '7', epoch: '3', connection: UUID_A, resourceType: 'issues' }))).toEqual({ seq: '7', epoch: '3', connection: UUID_A, resourceType: 'issues' });
    expect(feedCursor.decode(base64({ seq: '1', epoch: '0', resource_type: '' }))).toBeNull();
    expect(feedCursor.decode(base64({ seq: '1', epoch: '0', resource_type: 7 }))).toBeNull();
    // …and the modified_after its reader filtered by, if one, in milliseconds since the epoch.
    const filtered = { seq: '7', epoch: '3', connection: UUID_A, modifiedAfter: Date.parse('2026-01-02T03:04:05.678Z') };
    expect(feedCursor.decode(feedCursor.encode(filtered))).toEqual(filtered);
    expect(feedCursor.decode(feedCursor.encode({ ...filtered, modifiedAfter: -62135596800000 }))).toEqual({ ...filtered, modifiedAfter: -62135596800000 });
    for (const modified_after of ['', 'x', '1.5', '2026-01-02T03:04:05.678Z', '99999999999999999', 1]) {
      expect(feedCursor.decode(base64({ seq: '1', epoch: '0', modified_after })), String(modified_after)).toBeNull();
    }
  });

  it('read no position the database cannot take: a uuid only in its 8-4-4-4-12 form, a bigint up to 2^63 - 1, a UTC time to the millisecond or microsecond in years 1 to 9999', () => {
    const dashes = '-'.repeat(36);
    expect(uuidCursor.decode(base64({ id: dashes }))).toBeNull();
    expect(uuidCursor.decode(base64({ id: 'abcdef01-2345-6789-abcd-ef0123456789' }))).toEqual({ id: 'abcdef01-2345-6789-abcd-ef0123456789' });
    expect(uuidCursor.decode(base64({ id: '0b5e2c7e4a564f7e9d0b5d7c3c1f2a10----' }))).toBeNull();
    expect(jobCursor.decode(base64({ created_at: new Date().toISOString(), id: dashes }))).toBeNull();
    expect(serialCursor.decode(base64({ id: '9223372036854775807' }))).toEqual({ id: '9223372036854775807' });
    expect(serialCursor.decode(base64({ id: '9223372036854775808' }))).toBeNull();
    expect(serialCursor.decode(base64({ id: '9999999999999999999' }))).toBeNull();
    expect(feedCursor.decode(base64({ seq: '9999999999999999999' }))).toBeNull();
    expect(feedCursor.decode(base64({ seq: '1', epoch: '9223372036854775808' }))).toBeNull();
    for (const time of [
      '-271821-04-20T00:00:00.000Z', '+275760-09-13T00:00:00.000Z', '0000-01-01T00:00:00.000Z', '2030-02-30T00:00:00.000Z', '2030-01-02', '2030-01-02T03:04:05Z',
      '2030-01-02T03:04:05.006+00:00', '2030-01-02T03:04:05.0060Z', '2030-01-02T03:04:05.00600Z', '2030-01-02T03:04:05.0060070Z', '2030-02-30T00:00:00.000001Z', '2030-01-02T24:00:00.000000Z',
    ]) {
      expect(jobCursor.decode(base64({ created_at: time, id: UUID_A })), time).toBeNull();
    }
    for (const time of ['0001-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z', '0001-01-01T00:00:00.000000Z', '9999-12-31T23:59:59.999999Z']) {
      expect(jobCursor.decode(base64({ created_at: time, id: UUID_A })), time).toEqual({ createdAt: time, id: UUID_A });
    }
  });
});

describe('list routes (real API app, real Postgres)', () => {
  const api = useApiWithoutTemporal('list-pagination');
  const tenant = `pages-${randomUUID().slice(0, 8)}`;
  let connectionId: string;
  let webhookId: string;

  beforeAll(async () => {
    const { rows: connections } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status)
       select $1, 'demo', 'app-' || n, 'paused' from generate_series(1, 5) n returning id`,
      [tenant],
    );
    connectionId = connections[0]!.id;
    for (const [i, c] of connections.entries()) {
      await api.db.pool.query(
        `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, created_at, finished_at)
         values (gen_random_uuid(), $1, $2, 'incremental', 'api', 'completed', $3, $3)`,
        [c.id, tenant, new Date(Date.UTC(2030, 0, 1, 0, 0, i % 2))],
      );
    }
    const { rows: hooks } = await api.db.pool.query<{ id: string }>(
      `insert into webhooks (tenant_id, url, event_types, secret)
       select $1, 'https://example.com/' || n, '{sync.completed}', 's' from generate_series(1, 5) n returning id`,
      [tenant],
    );
    webhookId = hooks[0]!.id;
    await api.db.pool.query(
      `with events as (insert into webhook_events (tenant_id, event_type, payload, created_at)
                       select $1, 'sync.completed', '{}', '2030-01-01'::timestamptz + (n % 2) * interval '1 second' from generate_series(1, 5) n returning id, created_at)
       insert into webhook_deliveries (webhook_id, event_id, created_at) select $2, id, created_at from events`,
      [tenant, webhookId],
    );
    await api.db.pool.query(
      `insert into audit_log (actor, tenant_id, method, path, status) select 'admin', $1, 'POST', '/x/' || n, 200 from generate_series(1, 5) n`,
      [tenant],
    );
  });

  const get = (path: string) => api.call('GET', path);

  /** Every list route, with a query naming this test's rows. */
  const routes = () => [
    `/connections?tenant_id=${tenant}`,
    `/jobs?tenant_id=${tenant}`,
    `/webhooks?tenant_id=${tenant}`,
    `/webhooks/${webhookId}/deliveries?`,
    `/audit?tenant_id=${tenant}`,
  ];

  it('each pages to its end: every row once, next_cursor null on the last page', async () => {
    for (const route of routes()) {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const answer = await get(`${route}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        expect(answer.status, `${route}: ${JSON.stringify(answer.body)}`).toBe(200);
        seen.push(...answer.body.items.map((item: { id: unknown }) => String(item.id)));
        cursor = answer.body.next_cursor;
        pages++;
      } while (cursor && pages < 10);
      expect(seen, route).toHaveLength(5);
      expect(new Set(seen).size, route).toBe(5);
      expect(pages, route).toBe(3);
    }
  });

  it('the time-ordered ones (/jobs, deliveries) list every row once when rows share a millisecond: created_at keeps microseconds, and so does the cursor', async () => {
    // Rows of one statement share now() (to the microsecond); rows of one millisecond differ in
    // their microseconds. Both, paged one row a page.
    const sameMs = ['2030-06-01T00:00:00.000100Z', '2030-06-01T00:00:00.000200Z', '2030-06-01T00:00:00.000300Z'];
    const ownTenant = `same-ms-${randomUUID().slice(0, 8)}`;
    const { rows: [connection] } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'app', 'paused') returning id`,
      [ownTenant],
    );
    await api.db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status)
       select gen_random_uuid(), $1, $2, 'incremental', 'api', 'completed' from generate_series(1, 3)`,
      [connection!.id, ownTenant],
    );
    await api.db.pool.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, created_at)
       select gen_random_uuid(), $1, $2, 'incremental', 'api', 'completed', t from unnest($3::timestamptz[]) t`,
      [connection!.id, ownTenant, sameMs],
    );
    const { rows: [hook] } = await api.db.pool.query<{ id: string }>(
      `insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'https://example.com/same-ms', '{sync.completed}', 's') returning id`,
      [ownTenant],
    );
    await api.db.pool.query(
      `with events as (insert into webhook_events (tenant_id, event_type, payload) select $1, 'sync.completed', '{}' from generate_series(1, 3) returning id)
       insert into webhook_deliveries (webhook_id, event_id) select $2, id from events`,
      [ownTenant, hook!.id],
    );
    await api.db.pool.query(
      `with events as (insert into webhook_events (tenant_id, event_type, payload, created_at)
                       select $1, 'sync.completed', '{}', t from unnest($3::timestamptz[]) t returning id, created_at)
       insert into webhook_deliveries (webhook_id, event_id, created_at) select $2, id, created_at from events`,
      [ownTenant, hook!.id, sameMs],
    );
    const { rows: jobIds } = await api.db.pool.query<{ id: string }>('select id from sync_jobs where tenant_id = $1', [ownTenant]);
    const { rows: deliveryIds } = await api.db.pool.query<{ id: string }>('select id from webhook_deliveries where webhook_id = $1', [hook!.id]);
    for (const [route, ids] of [[`/jobs?tenant_id=${ownTenant}`, jobIds], [`/webhooks/${hook!.id}/deliveries?`, deliveryIds]] as const) {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const answer = await get(`${route}&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
        expect(answer.status, `${route}: ${JSON.stringify(answer.body)}`).toBe(200);
        seen.push(...answer.body.items.map((item: { id: string }) => item.id));
        cursor = answer.body.next_cursor;
        pages++;
      } while (cursor && pages < 20);
      expect([...seen].sort(), route).toEqual(ids.map((r) => r.id).sort());
    }
    // A cursor issued to the millisecond still reads, as that instant: after the millisecond of
    // `sameMs` come its rows and the three of now(); after its start, only those of now().
    const afterMs = await get(`/jobs?tenant_id=${ownTenant}&cursor=${base64({ created_at: '2030-06-01T00:00:00.001Z', id: UUID_A })}`);
    const afterStart = await get(`/jobs?tenant_id=${ownTenant}&cursor=${base64({ created_at: '2030-06-01T00:00:00.000Z', id: UUID_A })}`);
    expect([afterMs.status, afterMs.body.items.length, afterStart.status, afterStart.body.items.length]).toEqual([200, 6, 200, 3]);
  });

  it('each answers a cursor it did not make with one 400', async () => {
    const feed = `/connections/${connectionId}/records?`;
    for (const route of [...routes(), feed]) {
      for (const cursor of ['not-a-cursor', base64({ id: 1 }), base64({ seq: 'x' })]) {
        const answer = await get(`${route}&cursor=${cursor}`);
        expect(answer.status, `${route} ${cursor}`).toBe(400);
        expect(answer.body, `${route} ${cursor}`).toEqual({ error: { code: 'invalid_request', message: 'cursor: not a cursor this API made' } });
      }
    }
    // Positions the database could not take are cursors this API did not make either: 400, not 500.
    const dashes = '-'.repeat(36);
    const unstorable: [string, string][] = [
      [`/connections?tenant_id=${tenant}`, base64({ id: dashes })],
      [`/webhooks?tenant_id=${tenant}`, base64({ id: dashes })],
      [`/jobs?tenant_id=${tenant}`, base64({ created_at: new Date().toISOString(), id: dashes })],
      [`/jobs?tenant_id=${tenant}`, base64({ created_at: '-271821-04-20T00:00:00.000Z', id: UUID_A })],
      [`/webhooks/${webhookId}/deliveries?`, base64({ at: new Date().toISOString(), id: dashes })],
      [`/audit?tenant_id=${tenant}`, base64({ id: '9999999999999999999' })],
      [feed, base64({ seq: '9999999999999999999' })],
    ];
    for (const [route, cursor] of unstorable) {
      const answer = await get(`${route}&cursor=${cursor}`);
      expect(answer.status, `${route} ${cursor}`).toBe(400);
      expect(answer.body, `${route} ${cursor}`).toEqual({ error: { code: 'invalid_request', message: 'cursor: not a cursor this API made' } });
    }
    // The feed still takes its own cursors.
    expect((await get(`${feed}cursor=${feedCursors(TEST_KEYRING).encode({ seq: '0', epoch: '0', connection: connectionId })}`)).status).toBe(200);
  });
});
