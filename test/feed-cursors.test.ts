// The records feed's cursors are sealed: positions come from one sequence every tenant's changes
// share, and a readable position would tell a tenant, from the gaps between its cursors, how much
// the rest of the platform writes. Against the real API app (no Temporal behind it) and Postgres.
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { deliverWebhook } from '../activities/webhook-deliveries';
import { parseKeyring } from '../lib/credentials';
import { feedCursors, withSealedCursor } from '../lib/feed-cursors';
import { feedCursor as plainFeedCursor } from '../policy/cursors';
import { apiAppWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { TEST_KEYRING, testActivityDeps } from './helpers/deps';
import { receiver } from './helpers/fake-server';

const KEY_A = Buffer.alloc(32, 1).toString('base64');
const KEY_B = Buffer.alloc(32, 2).toString('base64');
const UUID = '0b5e2c7e-4a56-4f7e-9d0b-5d7c3c1f2a10';

/** Whatever base64url-decoding `text` yields, as text: what a reader can make of a cursor without a key. */
const readable = (text: string) => Buffer.from(text, 'base64url').toString('latin1') + Buffer.from(text.split('.').at(-1)!, 'base64url').toString('latin1');

describe('feed cursors (lib/feed-cursors.ts)', () => {
  const position = { seq: '987654', epoch: '3', connection: UUID, resourceType: 'issues' };

  it('seal a position so that it reads back whole, one text per position, and nothing of it shows', () => {
    const cursors = feedCursors(TEST_KEYRING);
    const text = cursors.encode(position);
    expect(cursors.decode(text)).toEqual(position);
    expect(cursors.encode(position)).toBe(text);
    expect(cursors.encode({ ...position, seq: '987655' })).not.toBe(text);
    expect(readable(text)).not.toMatch(/987654|seq|epoch|issues/);
    expect(text).toMatch(/^[A-Za-z0-9_.-]+$/);
  });

  it('read under any key the keyring still holds; refuse an altered cursor and one of another keyring; tell a cursor whose key was removed', () => {
    const old = parseKeyring({ CREDENTIALS_KEYS: `a:${KEY_A}` })!;
    const rotated = parseKeyring({ CREDENTIALS_KEYS: `a:${KEY_A},b:${KEY_B}`, CREDENTIALS_ACTIVE_KEY_ID: 'b' })!;
    const onlyNew = parseKeyring({ CREDENTIALS_KEYS: `b:${KEY_B}` })!;
    const underA = feedCursors(old).encode(position);
    expect(feedCursors(rotated).decode(underA)).toEqual(position);
    expect(feedCursors(rotated).encode(position)).toMatch(/^fc1\.b\./);
    expect(feedCursors(onlyNew).decode(underA)).toBeNull();
    expect(feedCursors(onlyNew).open(underA)).toBe('key_gone');
    expect(feedCursors(rotated).open(underA)).toEqual(position);
    // Another deployment's key under the same id.
    expect(feedCursors(parseKeyring({ CREDENTIALS_KEYS: `a:${KEY_B}` })!).decode(underA)).toBeNull();
    const sealed = underA.slice(underA.lastIndexOf('.') + 1);
    const bytes = Buffer.from(sealed, 'base64url');
    bytes[20] = bytes[20]! ^ 1;
    expect(feedCursors(old).decode(underA.replace(sealed, bytes.toString('base64url')))).toBeNull();
    for (const text of ['fc1.', 'fc1.a', 'fc1.a.', 'fc1.a.AAAA', 'fc1.a.b.c', 'fc1.a b.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']) {
      expect(feedCursors(old).decode(text), text).toBeNull();
      expect(feedCursors(onlyNew).open(text), text).toBeNull();
    }
  });

  it('never read a plain cursor (as handed out before cursors were sealed), but tell it apart', () => {
    const cursors = feedCursors(TEST_KEYRING);
    expect(cursors.decode(plainFeedCursor.encode(position))).toBeNull();
    expect(cursors.open(plainFeedCursor.encode(position))).toBe('unsealed');
    expect(cursors.open(cursors.encode(position))).toEqual(position);
    expect(cursors.open('not-a-cursor')).toBeNull();
  });

  it('seal the cursor of an event\'s data as it is delivered, and leave data without one as it is', () => {
    const cursors = feedCursors(TEST_KEYRING);
    const data = { job: { id: 'j' }, counts: { added: 1 }, cursor: plainFeedCursor.encode(position) };
    const delivered = withSealedCursor(data, cursors, UUID);
    expect(Object.keys(delivered)).toEqual(['job', 'counts', 'cursor']);
    expect(delivered.cursor).toBe(cursors.encode(position));
    expect(withSealedCursor({ connection_id: UUID }, cursors, UUID)).toEqual({ connection_id: UUID });
    // A position stored before cursors named their connection is sealed naming the event's.
    const { connection: _, ...unscoped } = position;
    expect(cursors.decode(withSealedCursor({ cursor: plainFeedCursor.encode(unscoped) }, cursors, UUID.toUpperCase()).cursor as string)).toEqual(position);
  });
});

describe('the records feed hands out sealed cursors', () => {
  const db = useTestDatabase();

  async function get(path: string, credentials = TEST_KEYRING): Promise<{ status: number; body: any }> {
    const app = apiAppWithoutTemporal(db.pool, 'feed-cursors', { credentials });
    const res = await app.request(path, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    return { status: res.status, body: await res.json() };
  }

  it('whose position a reader cannot read; it reads on under a rotated keyring; under a keyring without its key it has expired (410), not turned invalid', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('sealed-cursors', 'demo', 'feed', 'paused') returning id`,
    );
    const id = rows[0]!.id;
    const write = (externalId: string) =>
      db.pool.query(`insert into records (connection_id, resource_type, external_id, data, synced_at, change) values ($1, 'items', $2, '{}', now(), 'insert')`, [id, externalId]);
    await write('a');
    const old = parseKeyring({ CREDENTIALS_KEYS: `a:${KEY_A}` })!;
    const first = await get(`/connections/${id}/records?limit=10`, old);
    expect(first.status).toBe(200);
    const cursor: string = first.body.next_cursor;
    // Nothing of the position shows: no JSON of it, in whatever part of the cursor.
    expect(plainFeedCursor.decode(cursor)).toBeNull();
    expect(readable(cursor)).not.toMatch(/seq|epoch|connection_id/);
    await write('b');
    const rotated = parseKeyring({ CREDENTIALS_KEYS: `a:${KEY_A},b:${KEY_B}`, CREDENTIALS_ACTIVE_KEY_ID: 'b' })!;
    const next = await get(`/connections/${id}/records?limit=10&cursor=${cursor}`, rotated);
    expect(next.status).toBe(200);
    expect(next.body.items.map((i: { external_id: string }) => i.external_id)).toEqual(['b']);
    expect(next.body.next_cursor).toMatch(/^fc1\.b\./);
    const gone = await get(`/connections/${id}/records?limit=10&cursor=${cursor}`, parseKeyring({ CREDENTIALS_KEYS: `b:${KEY_B}` })!);
    expect(gone.status).toBe(410);
    expect(gone.body.error).toMatchObject({ code: 'cursor_expired', message: expect.stringMatching(/key/) });
    // Another deployment's cursor, or one altered: invalid (400).
    const foreign = await get(`/connections/${id}/records?limit=10&cursor=${cursor}`, parseKeyring({ CREDENTIALS_KEYS: `a:${KEY_B}` })!);
    expect(foreign.status).toBe(400);
  });
});

describe('a cursor made by hand (plain, unsealed) tells nothing of the positions', () => {
  const db = useTestDatabase();

  async function get(path: string): Promise<{ status: number; body: any }> {
    const app = apiAppWithoutTemporal(db.pool, 'feed-cursors-plain');
    const res = await app.request(path, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    return { status: res.status, body: await res.json() };
  }

  it('one answer (410: read from the start) at every position, so neither the shared sequence nor its own changes\' positions can be found by probing', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('plain-cursors', 'demo', 'feed', 'paused') returning id`,
    );
    const id = rows[0]!.id;
    const write = async (externalId: string) =>
      (
        await db.pool.query<{ seq: string }>(
          `insert into records (connection_id, resource_type, external_id, data, synced_at, change) values ($1, 'items', $2, '{}', now(), 'insert') returning change_seq::text as seq`,
          [id, externalId],
        )
      ).rows[0]!.seq;
    const first = await write('a');
    await write('b');
    const last = (await db.pool.query<{ last: string }>('select last_value::text as last from records_change_seq')).rows[0]!.last;
    const plain = (seq: string) => plainFeedCursor.encode({ seq, epoch: '0', connection: id });
    // The last position taken, the one after it (not yet taken), and one of the feed's own changes.
    const answers = [];
    for (const seq of [last, (BigInt(last) + 1n).toString(), first, '0']) answers.push(await get(`/connections/${id}/records?limit=10&cursor=${plain(seq)}`));
    expect(answers.map((a) => a.status)).toEqual([410, 410, 410, 410]);
    for (const answer of answers) expect(answer.body).toEqual(answers[0]!.body);
    expect(answers[0]!.body.error).toMatchObject({ code: 'cursor_expired', message: expect.stringMatching(/from the start/) });
    // Its own sealed cursors read on.
    const read = await get(`/connections/${id}/records?limit=1`);
    const next = await get(`/connections/${id}/records?limit=10&cursor=${read.body.next_cursor}`);
    expect(next.body.items.map((i: { external_id: string }) => i.external_id)).toEqual(['b']);
  });
});

describe("a stored event's cursor from before cursors named their connection", () => {
  const db = useTestDatabase();

  async function get(path: string): Promise<{ status: number; body: any }> {
    const app = apiAppWithoutTemporal(db.pool, 'feed-cursors-legacy');
    const res = await app.request(path, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    return { status: res.status, body: await res.json() };
  }

  it("is delivered scoped to the event's connection: read on that feed only, refused (400) on another connection's of the tenant", async () => {
    const tenant = 'legacy-event-cursor';
    const connection = async (appKey: string) =>
      (await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', $2, 'paused') returning id`, [tenant, appKey])).rows[0]!.id;
    const a = await connection('a');
    const b = await connection('b');
    const write = async (id: string, externalId: string) =>
      (
        await db.pool.query<{ seq: string }>(
          `insert into records (connection_id, resource_type, external_id, data, synced_at, change) values ($1, 'items', $2, '{}', now(), 'insert') returning change_seq::text as seq`,
          [id, externalId],
        )
      ).rows[0]!.seq;
    await write(b, 'b-1');
    const seqA = await write(a, 'a-1');
    await write(b, 'b-2');
    await write(a, 'a-2');
    // A sync.completed event of connection a stored before cursors named their connection, delivered now.
    const hook = await receiver(() => 200);
    try {
      const { rows: webhook } = await db.pool.query<{ id: string }>(
        `insert into webhooks (tenant_id, url, event_types, secret) values ($1, $2, '{sync.completed}', 'whsec_MDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDA') returning id`,
        [tenant, hook.url],
      );
      const { rows: event } = await db.pool.query<{ id: string }>(
        `insert into webhook_events (tenant_id, connection_id, event_type, payload) values ($1, $2, 'sync.completed', $3) returning id`,
        [tenant, a, { connection_id: a, cursor: plainFeedCursor.encode({ seq: seqA, epoch: '0' }) }],
      );
      const { rows: delivery } = await db.pool.query<{ id: string }>(
        `insert into webhook_deliveries (webhook_id, event_id) values ($1, $2) returning id`,
        [webhook[0]!.id, event[0]!.id],
      );
      const { deps } = testActivityDeps({ pool: db.pool });
      expect(await new MockActivityEnvironment().run(deliverWebhook(deps), { deliveryId: delivery[0]!.id })).toBe('delivered');
    } finally {
      await hook.close();
    }
    const cursor: string = JSON.parse(hook.received[0]!.body).data.cursor;
    const own = await get(`/connections/${a}/records?limit=10&cursor=${cursor}`);
    expect(own.status).toBe(200);
    expect(own.body.items.map((i: { external_id: string }) => i.external_id)).toEqual(['a-2']);
    const other = await get(`/connections/${b}/records?limit=10&cursor=${cursor}`);
    expect({ status: other.status, code: other.body.error?.code }).toEqual({ status: 400, code: 'invalid_request' });
  });

  it('a sealed cursor naming no connection (delivered before that) is refused on every feed: 410, read from the start', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('legacy-sealed', 'demo', 'feed', 'paused') returning id`,
    );
    const id = rows[0]!.id;
    await db.pool.query(`insert into records (connection_id, resource_type, external_id, data, synced_at, change) values ($1, 'items', 'x', '{}', now(), 'insert')`, [id]);
    const unscoped = feedCursors(TEST_KEYRING).encode({ seq: '0', epoch: '0' });
    const answer = await get(`/connections/${id}/records?limit=10&cursor=${unscoped}`);
    expect(answer.status).toBe(410);
    expect(answer.body.error).toMatchObject({ code: 'cursor_expired', message: expect.stringMatching(/from the start/) });
  });
});
