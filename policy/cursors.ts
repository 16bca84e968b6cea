// Every cursor the API issues, encoded and decoded here only: the keyset positions of the list
// routes and the records feed's position (which a `sync.completed` event issues too). A cursor is
// base64url of a JSON object of strings; decoding answers null for any text this module did not
// make, and the API answers that 400. Pure: no I/O.

/** One kind of cursor: its position as opaque text, and back (null when the text is not one). */
export interface CursorCodec<Position> {
  encode(position: Position): string;
  decode(text: string): Position | null;
}

/** base64url of the JSON of `fields`, in their order. */
function encodeFields(fields: Record<string, string>): string {
  return Buffer.from(JSON.stringify(fields)).toString('base64url');
}

/** The JSON object `text` encodes, or null when it is not base64url of a JSON object. */
function decodeFields(text: string): Record<string, unknown> | null {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

/** A row id as uuid text. */
const UUID = /^[0-9a-f-]{36}$/i;
/** A bigint the database can take, as decimal digits. */
const BIGINT = /^\d{1,19}$/;

/** A string field matching `pattern`, or null. */
function field(fields: Record<string, unknown>, name: string, pattern: RegExp): string | null {
  const value = fields[name];
  return typeof value === 'string' && pattern.test(value) ? value : null;
}

/** A keyset position of rows ordered by id. */
export interface IdPosition {
  id: string;
}

/** Cursors of listings ordered by an id whose text matches `pattern`: `{"id":"<id>"}`. */
function idCursor(pattern: RegExp): CursorCodec<IdPosition> {
  return {
    encode: ({ id }) => encodeFields({ id }),
    decode(text) {
      const fields = decodeFields(text);
      const id = fields && field(fields, 'id', pattern);
      return id ? { id } : null;
    },
  };
}

/** Cursors of listings ordered by a uuid id (connections, webhooks): `{"id":"<uuid>"}`. */
export const uuidCursor = idCursor(UUID);

/** Cursors of listings ordered by a bigint id (the audit log): `{"id":"<digits>"}`. */
export const serialCursor = idCursor(BIGINT);

/** A keyset position of rows ordered by creation time, then id. */
export interface TimePosition {
  createdAt: Date;
  id: string;
}

/** Cursors of listings ordered by (creation time, uuid id): `{"<timeField>":"<ISO time>","id":"<uuid>"}`. */
function timeCursor(timeField: string): CursorCodec<TimePosition> {
  return {
    encode: ({ createdAt, id }) => encodeFields({ [timeField]: createdAt.toISOString(), id }),
    decode(text) {
      const fields = decodeFields(text);
      const time = fields?.[timeField];
      const createdAt = typeof time === 'string' ? new Date(time) : null;
      const id = fields && field(fields, 'id', UUID);
      return createdAt && !Number.isNaN(createdAt.getTime()) && id ? { createdAt, id } : null;
    },
  };
}

/** Cursors of the jobs listing: `{"created_at":…,"id":…}`. */
export const jobCursor = timeCursor('created_at');
/** Cursors of a webhook's deliveries: `{"at":…,"id":…}`. */
export const deliveryCursor = timeCursor('at');

/**
 * A position in a connection's change feed: the last change read (`seq`, '0' for the start) and
 * the purge epoch when the cursor was issued (`epoch`: the newest tombstone purge its issuer saw).
 * A purge after that epoch that removed a deletion past `seq` expires it; no earlier purge can.
 */
export interface FeedCursor {
  seq: string;
  epoch: string;
}

/**
 * Cursors of the records feed: `{"seq":"<n>","epoch":"<n>"}`. A cursor issued before cursors
 * carried an epoch (`{"seq":"<n>"}`) reads as epoch 0: every logged purge counts as after it, as
 * it did then.
 */
export const feedCursor: CursorCodec<FeedCursor> = {
  encode: ({ seq, epoch }) => encodeFields({ seq, epoch }),
  decode(text) {
    const fields = decodeFields(text);
    if (!fields) return null;
    const seq = field(fields, 'seq', BIGINT);
    const epoch = fields.epoch === undefined ? '0' : field(fields, 'epoch', BIGINT);
    return seq && epoch ? { seq, epoch } : null;
  },
};
