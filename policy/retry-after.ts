// What a `Retry-After` header says (RFC 9110 §10.2.3): delay-seconds (1*DIGIT) or an HTTP-date
// (§5.6.7: an IMF-fixdate, or one of the obsolete RFC 850 and asctime forms a recipient must
// accept). Anything else says nothing: read leniently (Date.parse reads "x 2030" as 2030 and "0.5"
// as May 2000), it would be a wait of years, or none. Pure, so every reader of the header (the
// connectors, the GitHub App token request) reads it alike.

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
/** IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`. */
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
/** The obsolete RFC 850 form: `Sunday, 06-Nov-94 08:49:37 GMT`. */
const RFC850_DATE = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
/** The obsolete asctime form: `Sun Nov  6 08:49:37 1994` (the day padded with a space or a zero). */
const ASCTIME_DATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`);

/**
 * The time an HTTP-date names, in milliseconds since the epoch, or undefined for text of no
 * HTTP-date form or naming no real time (31 Jun, 24:00:00). An RFC 850 date's two-digit year
 * more than 50 years after `nowMs` is the most recent past year with those digits (RFC 9110).
 * The day name is not checked against the date.
 */
export function parseHttpDate(text: string, nowMs: number): number | undefined {
  let parts: { day: string; month: string; year: number; hour: string; minute: string; second: string };
  let m: RegExpExecArray | null;
  if ((m = IMF_FIXDATE.exec(text))) {
    parts = { day: m[1]!, month: m[2]!, year: Number(m[3]), hour: m[4]!, minute: m[5]!, second: m[6]! };
  } else if ((m = RFC850_DATE.exec(text))) {
    const thisYear = new Date(nowMs).getUTCFullYear();
    let year = thisYear - (thisYear % 100) + Number(m[3]);
    if (year > thisYear + 50) year -= 100;
    parts = { day: m[1]!, month: m[2]!, year, hour: m[4]!, minute: m[5]!, second: m[6]! };
  } else if ((m = ASCTIME_DATE.exec(text))) {
    parts = { day: m[2]!.trim(), month: m[1]!, year: Number(m[6]), hour: m[3]!, minute: m[4]!, second: m[5]! };
  } else {
    return undefined;
  }
  const [day, month, hour, minute, second] = [Number(parts.day), MONTHS.indexOf(parts.month), Number(parts.hour), Number(parts.minute), Number(parts.second)];
  // A leap second (60) is allowed and counts as the next minute's first.
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  const date = new Date(0);
  date.setUTCFullYear(parts.year, month, day);
  if (date.getUTCMonth() !== month || date.getUTCDate() !== day) return undefined;
  return date.getTime() + ((hour * 60 + minute) * 60 + second) * 1000;
}

/**
 * Now by the clock of the server that answered, in milliseconds since the epoch: its answer's
 * `Date` header (an HTTP-date), else `localMs` (this process's now). A time the server states (a
 * `Retry-After` date, a rate limit's reset in epoch seconds) is one of its own clock, so the wait
 * until it is counted from its answer's Date: a worker whose clock is off waits no more and no
 * less than the server asked.
 */
export function answeredAtMs(dateHeader: string | null | undefined, localMs: number): number {
  return (dateHeader ? parseHttpDate(dateHeader.trim(), localMs) : undefined) ?? localMs;
}

/**
 * Seconds to wait per a `Retry-After` value at `nowMs` (0 for an HTTP-date already passed), or
 * undefined when there is none or it is neither delay-seconds nor an HTTP-date.
 */
export function retryAfterSeconds(value: string | null | undefined, nowMs: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = parseHttpDate(text, nowMs);
  return at === undefined ? undefined : Math.max(0, Math.ceil((at - nowMs) / 1000));
}
