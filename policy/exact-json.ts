// JSON text read and written with its numbers as they were written. JSON.parse reads every number
// as a double, and JSON.stringify writes a double in its own spelling: an integer past 2^53 (an
// int64 amount or foreign key), a fraction with more digits than a double holds, or an exponent
// past a double's range comes back as another number, and a fraction's trailing zeros (a price of
// 1.10), an exponent (1e2), a negative zero or a tiny fraction written out (0.0000001) come back
// spelled otherwise (1.1, 100, 0, 1e-7): a provider's record would be stored with other digits or
// another spelling than it sent, and a change in the lost digits alone would not be seen. Record
// data goes through here on its whole way: read from the provider, written to Postgres (jsonb keeps
// a number's digits and its scale, 1.10 as 1.10, but prints an exponent written out and a negative
// zero as 0), read back for the feed and answered. The common case costs what JSON.parse and
// JSON.stringify cost: text with no such number is read by JSON.parse, and a value holding none is
// written by JSON.stringify. Every path reads with JSON.parse and writes with JSON.stringify (twice
// at most), so what one writes the other reads and writes back at any depth: a record stored is
// one the feed can serve. Pure: no I/O.
import { isSafeNumber, splitNumber } from 'lossless-json';

/**
 * A number of JSON text that JSON.parse and JSON.stringify would not give back as written (a double
 * does not hold it, or writes it otherwise), kept as its text. Elsewhere than `exactJson` (a log
 * line, say) it is written as that text in a JSON string.
 */
export class JsonNumber {
  constructor(readonly text: string) {}

  toJSON(): string {
    writtenAsText++;
    return marking === null ? this.text : `${marking}${this.text}`;
  }

  /** Its text, as written (a template string or `String` of it, an id built from it, say). */
  toString(): string {
    return this.text;
  }
}

/** How many times a JsonNumber was written by JSON.stringify: `exactJson` knows by it whether its value held one. */
let writtenAsText = 0;

/** While `exactJson` writes a value holding JsonNumbers: what begins each one's string, which no other string of the value begins with. */
let marking: string | null = null;

/**
 * Whether JSON text may hold, below its top level, a number JSON.stringify would not write back as
 * it is written after JSON.parse read it: one (where JSON text begins an inner value: after `:`, `,`
 * or `[`) of 16 characters or more of digits and a point (more digits than a double holds, or an
 * integer of 1e21 or more, which JavaScript writes with an exponent), with an exponent, with a
 * fraction ending in 0 (up to where a number ends), with a point followed by six zeros (below 1e-6,
 * written with an exponent), or a negative zero. Any other number (15 significant digits or fewer,
 * written out, no trailing zero after its point) is the shortest text of its double, which
 * JSON.stringify writes. One pattern, tried where a value may begin: text inside strings (a time
 * `"10:00:00.120Z"`) is not taken for a number unless it also ends as one, and a match is looked at
 * number by number, so a string that does (`"x:1.10, y"`) only costs that look.
 */
const MAY_BE_SPELLED_OTHERWISE = /[:,[]\s*(?:-?(?:\d[\d.]{15}|\d+(?:\.\d*0(?=[\s,\]}]|$)|(?:\.\d+)?[eE][+-]?\d)|0\.0{6})|-0(?=[\s,\]}]|$))/;

/** Whether JSON number `token` is written back as it is by JSON.stringify after JSON.parse reads it. */
const writtenBackAlike = (token: string): boolean => String(Number(token)) === token;

/** A JSON string or number token, strings matched whole so no number is read inside one. */
const STRING_OR_NUMBER = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

/** Sets `holder[key]` as an own property (`__proto__` too, as JSON.parse makes it). */
export function setOwn(holder: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(holder, key, { value, writable: true, enumerable: true, configurable: true });
  else holder[key] = value;
}

/**
 * `quoted`, the value of JSON text (an array or object) with each number kept as written (see
 * `parseExactJson`) written as a string of its text, with those strings as JsonNumbers: where
 * `doubles` (the same text's value by JSON.parse) has a number and `quoted` a string. Walked with a
 * stack of its own, at any depth.
 */
function withJsonNumbers(doubles: unknown, quoted: unknown): unknown {
  const pending: [unknown, unknown][] = [[doubles, quoted]];
  while (pending.length > 0) {
    const [d, q] = pending.pop()!;
    if (!d || typeof d !== 'object') continue;
    const from = d as Record<string, unknown>;
    const to = q as Record<string, unknown>;
    for (const key of Object.keys(from)) {
      const inner = from[key];
      if (typeof inner === 'number' && typeof to[key] === 'string') setOwn(to, key, new JsonNumber(to[key]));
      else if (inner && typeof inner === 'object') pending.push([inner, to[key]]);
    }
  }
  return quoted;
}

/**
 * The value of JSON `text`, as JSON.parse reads it (a key written twice keeps its last value) but
 * for numbers JSON.stringify would not write back as they are written (a double does not hold
 * them, or writes them otherwise: 1.10, 1e2, -0), which are `JsonNumber`s. Throws a SyntaxError
 * for text that is not JSON; reads JSON nested at any depth, as JSON.parse does.
 */
export function parseExactJson(text: string): unknown {
  const doubles = JSON.parse(text) as unknown;
  // A number alone (the pattern looks below the top level): its text is the whole text.
  if (typeof doubles === 'number') return writtenBackAlike(text.trim()) ? doubles : new JsonNumber(text.trim());
  if (!MAY_BE_SPELLED_OTHERWISE.test(text)) return doubles;
  let kept = false;
  const quoted = text.replace(STRING_OR_NUMBER, (token) => {
    if (token.startsWith('"') || writtenBackAlike(token)) return token;
    kept = true;
    return `"${token}"`;
  });
  return kept ? withJsonNumbers(doubles, JSON.parse(quoted)) : doubles;
}

/** How many characters Unicode's private use area (U+E000 to U+F8FF) has: JSON.stringify writes them as they are. */
const PRIVATE_USE = 0x1900;

/**
 * Three characters of the private use area that no string of JSON `text` begins with: three that
 * follow no quote in it (one pass, noting only what begins with such a character, and at most as
 * many tries as the text has quotes, far fewer than the 6400^3 such markers).
 */
function freshMarker(text: string): string {
  const taken = new Set<string>();
  for (let at = text.indexOf('"'); at !== -1; at = text.indexOf('"', at + 1)) {
    const first = text.charCodeAt(at + 1);
    if (first >= 0xe000 && first < 0xe000 + PRIVATE_USE) taken.add(text.slice(at + 1, at + 4));
  }
  for (let n = 0; ; n++) {
    const digit = (place: number) => 0xe000 + (Math.floor(n / PRIVATE_USE ** place) % PRIVATE_USE);
    const marker = String.fromCharCode(digit(0), digit(1), digit(2));
    if (!taken.has(marker)) return marker;
  }
}

/**
 * `value` as JSON text, as JSON.stringify writes it but for `JsonNumber`s, written as the numbers
 * they hold: by JSON.stringify once more, each JsonNumber a string beginning with a marker no other
 * string begins with, whose quotes and marker are then dropped. Throws a RangeError for a value
 * nested more deeply than JSON.stringify can go, and nothing it can write.
 */
export function exactJson(value: unknown): string {
  const before = writtenAsText;
  const text = JSON.stringify(value);
  if (writtenAsText === before) return text;
  const marker = freshMarker(text);
  let marked: string;
  marking = marker;
  try {
    marked = JSON.stringify(value);
  } finally {
    marking = null;
  }
  return marked.replace(new RegExp(`"${marker}([^"]*)"`, 'g'), '$1');
}

/** The text of a number read by `parseExactJson` (a number or a `JsonNumber`), as its provider wrote it when JSON.parse would not keep it. */
export const numberText = (value: number | JsonNumber): string => (value instanceof JsonNumber ? value.text : String(value));

/**
 * The text of a number read by `parseExactJson` by its value: JavaScript's text of the double when
 * a double holds the value (`10.0` and `1e1` are `10`), else its text as written (an integer past
 * 2^53 keeps its digits). One value, one text, however the provider spells it: what a record's id
 * is made of, so a provider writing an id otherwise (or a platform that reads spellings it read
 * otherwise before) never makes the same record another one.
 */
export const numberValueText = (value: number | JsonNumber): string =>
  value instanceof JsonNumber && !isSafeNumber(value.text) ? value.text : String(Number(numberText(value)));

/** Most digits Postgres's numeric, which jsonb's numbers are, holds before the decimal point. */
export const STORED_MAX_WHOLE_DIGITS = 131072;
/** Most digits Postgres's numeric holds after the decimal point. */
export const STORED_MAX_FRACTION_DIGITS = 16383;

const NUMBER_PARTS = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * How many characters JSON number `text` is as Postgres stores and prints it in jsonb (numeric:
 * every digit written out, no exponent, as many digits after the point as written less the
 * exponent: `1e400` is 401 characters, `1.50e1` is `15.0`), or null for a number numeric does not
 * hold (more than STORED_MAX_WHOLE_DIGITS before the point, or STORED_MAX_FRACTION_DIGITS after it).
 */
export function storedNumberLength(text: string): number | null {
  const parts = NUMBER_PARTS.exec(text);
  if (!parts) throw new SyntaxError(`not a JSON number: ${text.slice(0, 40)}`);
  const [, sign = '', whole = '', fraction = '', written = '0'] = parts;
  const exponent = Number(written);
  if (!Number.isSafeInteger(exponent)) return null;
  const digits = whole + fraction;
  const leadingZeros = /^0*/.exec(digits)![0].length;
  const zero = leadingZeros === digits.length;
  const wholeDigits = zero ? 0 : Math.max(0, whole.length + exponent - leadingZeros);
  const fractionDigits = Math.max(0, fraction.length - exponent);
  if (wholeDigits > STORED_MAX_WHOLE_DIGITS || fractionDigits > STORED_MAX_FRACTION_DIGITS) return null;
  return (zero ? 0 : sign.length) + Math.max(1, wholeDigits) + (fractionDigits > 0 ? 1 + fractionDigits : 0);
}

/**
 * Whether JSON text may hold a number the database writes out longer than it is written: one with
 * an exponent, or one of more digits than the database holds (positional numbers are stored as
 * written, or shorter). A run of digits is tried from its first digit only: tried at every digit,
 * each shorter run would be scanned again from each of its digits, work in the square of its length.
 */
const MAY_BE_STORED_LONGER = new RegExp(`\\d[eE][+-]?\\d|(?<!\\d)\\d{${STORED_MAX_FRACTION_DIGITS + 1}}`);

/**
 * The bytes of JSON text `json` (a record's) with every number as the database stores and prints
 * it, written out in full (`storedNumberLength`: `1e100000` is 100,001 bytes, which the feed serves
 * and sizes its pages by), or the first number the database cannot store at all.
 */
export function storedSize(json: string): { bytes: number } | { unstorable: string } {
  let bytes = Buffer.byteLength(json);
  if (!MAY_BE_STORED_LONGER.test(json)) return { bytes };
  for (const [token] of json.matchAll(STRING_OR_NUMBER)) {
    if (token.startsWith('"')) continue;
    const length = storedNumberLength(token);
    if (length === null) return { unstorable: token };
    bytes += length - token.length;
  }
  return { bytes };
}

/** A JSON number's decimal value, however it is written: sign, significant digits and exponent (`1.10` and `11e-1` alike). */
function decimalValue(text: string): string {
  const { sign, digits, exponent } = splitNumber(text);
  const significant = digits.replace(/0+$/, '');
  return significant === '' ? '0' : `${sign}${significant}e${exponent}`;
}

/**
 * Whether JSON number `text` keeps its value through JSON.parse and JSON.stringify, as every JSON
 * body the API takes is read and stored: the double it is read as writes back as the same decimal
 * value, however either is spelled (`1.10` as 1.1, `1E21` as 1e+21, `-0` as 0). Not so a number
 * past a double's range (read as Infinity, written as null), a non-zero number below it (read as
 * 0), an integer past 2^53 that a double does not hold (9007199254740993 read as
 * 9007199254740992), or a fraction with more digits than a double holds.
 */
export function heldByDouble(text: string): boolean {
  const read = Number(text);
  if (!Number.isFinite(read)) return false;
  return decimalValue(String(read)) === decimalValue(text);
}

/**
 * Whether JSON text may hold a number a double does not hold: one with an exponent, or a run of
 * 16 or more digits and points (a double holds every decimal of 15 significant digits or fewer).
 */
const MAY_NOT_BE_HELD = /\d[eE]|\d[\d.]{15}/;

/**
 * The first number of JSON `text`, in document order, that a double does not hold (`heldByDouble`),
 * as written, or null when it holds every one (the common case: one test of a pattern). For text
 * JSON.parse reads.
 */
export function firstNumberNotHeld(text: string): string | null {
  if (!MAY_NOT_BE_HELD.test(text)) return null;
  for (const [token] of text.matchAll(STRING_OR_NUMBER)) {
    if (!token.startsWith('"') && !heldByDouble(token)) return token;
  }
  return null;
}
