// The time of a keyset position as the database writes it. A timestamptz column keeps
// microseconds (`now()` fills them); node-pg reads it into a Date, which keeps milliseconds. A
// listing that pages by (created_at, id) reads the time of each row's position as this text, and
// compares a position's text with the column in SQL, so no row of the same millisecond is passed over.

/**
 * The SQL of `column` (a timestamptz) as exact UTC text, `2030-01-02T03:04:05.006007Z` (the form
 * policy/cursors.ts reads back, and the database parses as that very instant).
 */
export const exactTime = (column: string): string => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
