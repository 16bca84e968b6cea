// A provider's change time as the platform stores it: the instant the connector read (with
// `Date.parse`, as its `since` filters, keyset steps and the cursor do), in a form Postgres reads as
// that same instant. Text JavaScript reads is not always text Postgres reads alike: an impossible day
// ('2023-02-29', which JavaScript reads as 1 March), an offset past ±15:59, a year past 9999 or
// before 1 are refused by Postgres, and one such record would fail its task on every retry.
// Pure: no I/O.

/**
 * RFC 3339 with seconds, at most microseconds (Postgres's resolution) and an explicit zone (also
 * with a space for the T, or an offset without its colon, which both read alike).
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,6})?(?:[Zz]|([+-])(\d{2}):?(\d{2}))$/;

/**
 * An ISO 8601 date and time without a zone (also with a space for the T). JavaScript reads it in
 * the process's own zone; a provider's time is no time of the worker's zone, so it is read as UTC,
 * as `since` values are sent.
 */
const ZONELESS = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?$/;

/** Whether `match` of RFC3339 names a real day and time, with an offset Postgres takes. */
function realFields(match: RegExpExecArray): boolean {
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const offsetOk = match[7] === undefined || (Number(match[8]) <= 15 && Number(match[9]) <= 59);
  return year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && minute <= 59 && second <= 59 && offsetOk;
}

/**
 * `text` as a change time to store, or null when it is none: RFC 3339 text naming a real day and
 * time (to the microsecond, with its zone) is kept as given; any other text JavaScript reads is
 * given as that instant (ISO 8601 UTC, to the millisecond; a date and time without a zone is UTC,
 * whatever the worker's zone); an instant outside years 1-9999, or text
 * JavaScript does not read, is no change time.
 */
export function storableChangeTime(text: string): string | null {
  const ms = Date.parse(ZONELESS.test(text) ? `${text.replace(' ', 'T')}Z` : text);
  if (Number.isNaN(ms)) return null;
  const instant = new Date(ms);
  const year = instant.getUTCFullYear();
  if (year < 1 || year > 9999) return null;
  const match = RFC3339.exec(text);
  return match && realFields(match) ? text : instant.toISOString();
}
