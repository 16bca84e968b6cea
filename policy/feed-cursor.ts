// The records feed's cursor, encoded and decoded here only: the records API issues it, and so
// does a `sync.completed` event. Pure: no I/O.

/**
 * A position in a connection's change feed: the last change read (`seq`, '0' for the start) and
 * the purge epoch when the cursor was issued (`epoch`: the newest tombstone purge its issuer saw).
 * A purge after that epoch that removed a deletion past `seq` expires it; no earlier purge can.
 */
export interface FeedCursor {
  seq: string;
  epoch: string;
}

/** A bigint the database can take, as decimal digits. */
const POSITION = /^\d{1,19}$/;

/** The opaque text of a feed cursor: base64url of `{"seq":"<n>","epoch":"<n>"}`. */
export function encodeFeedCursor(cursor: FeedCursor): string {
  return Buffer.from(JSON.stringify({ seq: cursor.seq, epoch: cursor.epoch })).toString('base64url');
}

/**
 * The feed cursor `text` encodes, or null when it is not one this API issued. A cursor issued
 * before cursors carried an epoch (`{"seq":"<n>"}`) reads as epoch 0: every logged purge counts
 * as after it, as it did then.
 */
export function decodeFeedCursor(text: string): FeedCursor | null {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (!value || typeof value !== 'object') return null;
  const { seq, epoch = '0' } = value as { seq?: unknown; epoch?: unknown };
  if (typeof seq !== 'string' || !POSITION.test(seq) || typeof epoch !== 'string' || !POSITION.test(epoch)) return null;
  return { seq, epoch };
}
