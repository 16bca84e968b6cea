// Feed cursors as the API and webhook events hand them out: the feed position (policy/cursors.ts)
// sealed, so a reader cannot read it. Positions come from one sequence shared by every tenant, and
// a readable position would tell a tenant, from the gaps between its cursors, how much the rest of
// the platform writes. Sealing is deterministic (AES-256-GCM under a nonce derived from the
// position with HMAC-SHA256, with keys of their own derived from the credentials keyring): one
// position is one cursor text under one key. An event's cursor is sealed when the event is written
// (jobEventData, with the writer's keyring) and stored sealed, so the event's body is the same
// bytes on every delivery attempt, whatever key is active when an attempt is made.
// A plain cursor (base64url JSON, as handed out before cursors were sealed) is never read: anyone
// can make one at any position, and what the feed answers it (a page from there, or a refusal past
// the sequence's last value) would tell the positions sealing hides. It is told apart (`open`
// answers 'unsealed') so its reader is sent back to the start, as for a cursor whose key was
// removed ('key_gone').
import { createCipheriv, createDecipheriv, createHmac } from 'node:crypto';
import { feedCursor, type CursorCodec, type FeedCursor } from '../policy/cursors';
import type { JobEventData } from '../policy/webhook-events';
import { derivedKeyring, type Keyring } from './credentials';

/** What every sealed cursor starts with: the format's version. */
const PREFIX = 'fc1.';
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * What a text given as a feed cursor is: the position it seals; 'key_gone', a sealed cursor whose
 * key is no longer configured (it cannot be read); 'unsealed', a plain cursor (a position anyone
 * can read and make: never read); null, none of these (not a cursor this API made).
 */
export type OpenedFeedCursor = FeedCursor | 'key_gone' | 'unsealed' | null;

/** The records feed's cursors under one keyring: `decode` is `open` answering only a position. */
export interface FeedCursors extends CursorCodec<FeedCursor> {
  open(text: string): OpenedFeedCursor;
}

const aad = (keyId: string) => Buffer.from(`synctide:feed-cursor:${keyId}`, 'utf8');

/** The parts of a sealed cursor: its key id and its sealed bytes; null for any other text. */
function parts(text: string): { keyId: string; sealed: Buffer } | null {
  if (!text.startsWith(PREFIX)) return null;
  const [keyId, blob, ...rest] = text.slice(PREFIX.length).split('.');
  if (rest.length > 0 || !keyId || !KEY_ID.test(keyId) || !blob || !/^[A-Za-z0-9_-]+$/.test(blob)) return null;
  const sealed = Buffer.from(blob, 'base64url');
  return sealed.length > IV_BYTES + TAG_BYTES ? { keyId, sealed } : null;
}

const made = new WeakMap<Keyring, FeedCursors>();

/** The feed cursors sealed under `keyring` (its active key seals; any key it holds opens). */
export function feedCursors(keyring: Keyring): FeedCursors {
  const known = made.get(keyring);
  if (known) return known;
  const encryption = derivedKeyring(keyring, 'feed-cursor-encryption');
  const nonces = derivedKeyring(keyring, 'feed-cursor-nonce');
  const codec: FeedCursors = {
    encode(position) {
      // The position's JSON (the plain cursor's bytes), sealed.
      const plain = Buffer.from(feedCursor.encode(position), 'base64url');
      const keyId = keyring.activeId;
      const iv = createHmac('sha256', nonces.keys.get(keyId)!).update(plain).digest().subarray(0, IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', encryption.keys.get(keyId)!, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(aad(keyId));
      const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
      return `${PREFIX}${keyId}.${sealed.toString('base64url')}`;
    },
    open(text) {
      const sealedParts = parts(text);
      if (!sealedParts) return !text.startsWith(PREFIX) && feedCursor.decode(text) !== null ? 'unsealed' : null;
      const key = encryption.keys.get(sealedParts.keyId);
      if (!key) return 'key_gone';
      const { sealed } = sealedParts;
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
        decipher.setAAD(aad(sealedParts.keyId));
        decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
        const plain = Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
        return feedCursor.decode(plain.toString('base64url'));
      } catch {
        return null;
      }
    },
    decode(text) {
      const opened = codec.open(text);
      return typeof opened === 'object' ? opened : null;
    },
  };
  made.set(keyring, codec);
  return codec;
}

/** The field of an event's `data` that holds a records-feed cursor (the `sync.*` events'). */
const EVENT_CURSOR_FIELD = 'cursor' satisfies keyof JobEventData;

/**
 * An event's `data` as it is delivered. A cursor stored sealed (every event written since events
 * seal theirs when written) is sent as stored. A plain position (EVENT_CURSOR_FIELD of an event
 * stored before that) is sealed under `cursors`, the key active at the attempt: such an event keeps
 * one body only while that key stays active. A position stored before cursors named their
 * connection is a position in the feed of the event's connection (`connectionId`), and is sealed
 * naming it: the feed reads a cursor on its own connection's feed only, and refuses one naming none.
 */
export function withSealedCursor(data: Record<string, unknown>, cursors: FeedCursors, connectionId: string | null): Record<string, unknown> {
  const text = data[EVENT_CURSOR_FIELD];
  if (typeof text !== 'string' || text.startsWith(PREFIX)) return data;
  const position = feedCursor.decode(text);
  if (!position) return data;
  const connection = position.connection ?? connectionId?.toLowerCase();
  return { ...data, [EVENT_CURSOR_FIELD]: cursors.encode({ ...position, ...(connection !== undefined && { connection }) }) };
}

/** A keyring for documentation examples only (a fixed key no deployment holds). */
const EXAMPLE_KEYRING: Keyring = { activeId: 'default', keys: new Map([['default', Buffer.alloc(32, 7)]]) };

/** A sealed feed cursor for documentation examples: position 1234 of `connectionId`'s feed. */
export function exampleFeedCursor(connectionId: string): string {
  return feedCursors(EXAMPLE_KEYRING).encode({ seq: '1234', epoch: '0', connection: connectionId });
}
