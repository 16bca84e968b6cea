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

// What a decoded field must be for the database to take it: a cursor it cannot take is one this
// module did not make (400), never a failed statement (500).

/** A row id as uuid text, in the 8-4-4-4-12 form the database prints. */
const isUuid = (text: string): boolean => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(text);

/** The largest value of a Postgres bigint. */
const MAX_BIGINT = 9223372036854775807n;
/** A bigint the database can take, as decimal digits: 0 to 2^63 - 1. */
const isBigint = (text: string): boolean => /^\d{1,19}$/.test(text) && BigInt(text) <= MAX_BIGINT;

/**
 * A keyset time as the API issues it: UTC text to the microsecond, as the database keeps it
 * (`2030-01-02T03:04:05.006007Z`), or to the millisecond (`….006Z`, `Date.prototype.toISOString`),
 * as cursors issued before carried it; years 0001 to 9999. A real date in that very form, so the
 * database can take it (it has no year 0, and no years past the ISO form).
 */
function keysetTime(text: string): boolean {
  if (!/^(?!0000)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(\d{3})?Z$/.test(text)) return false;
  const millis = `${text.slice(0, 23)}Z`;
  const time = new Date(millis);
  return !Number.isNaN(time.getTime()) && time.toISOString() === millis;
}

/** A string field that `accepts` takes, or null. */
function field(fields: Record<string, unknown>, name: string, accepts: (text: string) => boolean): string | null {
  const value = fields[name];
  return typeof value === 'string' && accepts(value) ? value : null;
}

/** A keyset position of rows ordered by id. */
export interface IdPosition {
  id: string;
}

/** Cursors of listings ordered by an id whose text `accepts` takes: `{"id":"<id>"}`. */
function idCursor(accepts: (text: string) => boolean): CursorCodec<IdPosition> {
  return {
    encode: ({ id }) => encodeFields({ id }),
    decode(text) {
      const fields = decodeFields(text);
      const id = fields && field(fields, 'id', accepts);
      return id ? { id } : null;
    },
  };
}

/** Cursors of listings ordered by a uuid id (connections, webhooks): `{"id":"<uuid>"}`. */
export const uuidCursor = idCursor(isUuid);

/** Cursors of listings ordered by a bigint id (the audit log): `{"id":"<digits>"}`. */
export const serialCursor = idCursor(isBigint);

/**
 * A keyset position of rows ordered by creation time, then id. The time is the row's exact time
 * as text (`keysetTime`), never a Date: a Date keeps milliseconds, and a position cut to the
 * millisecond passes over the rows that follow it within that millisecond.
 */
export interface TimePosition {
  createdAt: string;
  id: string;
}

/** Cursors of listings ordered by (creation time, uuid id): `{"<timeField>":"<time>","id":"<uuid>"}`. */
function timeCursor(timeField: string): CursorCodec<TimePosition> {
  return {
    encode: ({ createdAt, id }) => encodeFields({ [timeField]: createdAt, id }),
    decode(text) {
      const fields = decodeFields(text);
      const createdAt = fields && field(fields, timeField, keysetTime);
      const id = fields && field(fields, 'id', isUuid);
      return createdAt && id ? { createdAt, id } : null;
    },
  };
}

/** Cursors of the jobs listing: `{"created_at":…,"id":…}`. */
export const jobCursor = timeCursor('created_at');
/** Cursors of a webhook's deliveries: `{"at":…,"id":…}`. */
export const deliveryCursor = timeCursor('at');

/** A resource type as the records feed's filter takes it: 1 to 200 characters. */
const isResourceType = (text: string): boolean => text.length >= 1 && text.length <= 200;

/**
 * A position in a connection's change feed: the last change read (`seq`, '0' for the start), the
 * purge epoch when the cursor was issued (`epoch`: the newest tombstone purge its issuer saw), the
 * connection whose feed it is a position in (`connection`), the one resource type its reader
 * followed (`resourceType`; absent: every type), and the `modified_after` its reader filtered by
 * (`modifiedAfter`; absent: none). A purge after that epoch that removed a deletion
 * past `seq` expires it; no earlier purge can. Positions come from one sequence shared by every
 * connection and type, so a position read on a feed it was not issued for would pass over that
 * feed's earlier changes: a cursor is read only on its own connection's feed, and one issued to a
 * reader of one type only by a reader of that type (a cursor of every type serves any reader).
 * Likewise a filtered reader's cursor may have passed changes its filter left out (written at or
 * before `modifiedAfter`): it is read only by a reader filtering by that time or a later one (a
 * cursor issued without the filter serves any reader).
 */
export interface FeedCursor {
  seq: string;
  epoch: string;
  /**
   * The connection's id (lowercase); absent from cursors issued before cursors named it (a stored
   * event's: sealed naming the event's connection when delivered; the feed reads none without it).
   */
  connection?: string;
  /** The resource type its reader followed; absent when it followed every type. */
  resourceType?: string;
  /**
   * The `modified_after` its reader filtered by, in milliseconds since the epoch; absent when it
   * read every change, and from cursors issued before cursors carried it (they are read as then).
   */
  modifiedAfter?: number;
}

/** Milliseconds since the epoch as decimal digits, within a Date's range (±8.64e15). */
const isEpochMillis = (text: string): boolean => /^-?\d{1,16}$/.test(text) && Math.abs(Number(text)) <= 8.64e15;

/**
 * Cursors of the records feed: `{"seq":"<n>","epoch":"<n>","connection_id":"<uuid>"}`,
 * `"resource_type":"<type>"` when issued to a reader of one type, and `"modified_after":"<ms>"`
 * (milliseconds since the epoch) when issued to a reader filtering by that time. A cursor issued before cursors
 * carried an epoch (`{"seq":"<n>"}`) reads as epoch 0: every logged purge counts as after it, as
 * it did then; one issued before they named their connection decodes without one (the records
 * feed refuses it, and a stored event's is scoped to the event's connection when delivered).
 */
export const feedCursor: CursorCodec<FeedCursor> = {
  encode: ({ seq, epoch, connection, resourceType, modifiedAfter }) =>
    encodeFields({
      seq,
      epoch,
      ...(connection !== undefined && { connection_id: connection.toLowerCase() }),
      ...(resourceType !== undefined && { resource_type: resourceType }),
      ...(modifiedAfter !== undefined && { modified_after: String(modifiedAfter) }),
    }),
  decode(text) {
    const fields = decodeFields(text);
    if (!fields) return null;
    const seq = field(fields, 'seq', isBigint);
    const epoch = fields.epoch === undefined ? '0' : field(fields, 'epoch', isBigint);
    if (!seq || !epoch) return null;
    const cursor: FeedCursor = { seq, epoch };
    if (fields.connection_id !== undefined) {
      const connection = field(fields, 'connection_id', isUuid);
      if (!connection) return null;
      cursor.connection = connection.toLowerCase();
    }
    if (fields.resource_type !== undefined) {
      const resourceType = field(fields, 'resource_type', isResourceType);
      if (!resourceType) return null;
      cursor.resourceType = resourceType;
    }
    if (fields.modified_after !== undefined) {
      const modifiedAfter = field(fields, 'modified_after', isEpochMillis);
      if (!modifiedAfter) return null;
      cursor.modifiedAfter = Number(modifiedAfter);
    }
    return cursor;
  },
};
