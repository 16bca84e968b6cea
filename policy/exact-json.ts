// JSON text read and written with its numbers as they were written. JSON.parse reads every number
// as a double, so an integer past 2^53 (an int64 amount or foreign key), a fraction with more
// digits than a double holds, or an exponent past a double's range comes back as another number:
// a provider's record would be stored with other digits than it sent, and a change in the lost
// digits alone would not be seen. Record data goes through here on its whole way: read from the
// provider, written to Postgres (jsonb keeps a number's digits), read back for the feed and
// answered. The common case costs what JSON.parse and JSON.stringify cost: text with no such
// number is read by JSON.parse, and a value holding none is written by JSON.stringify. Pure: no I/O.
import { isSafeNumber, parse, stringify, type NumberStringifier } from 'lossless-json';

/**
 * A number of JSON text that a double does not hold exactly, kept as its text. Elsewhere than
 * `exactJson` (a log line, say) it is written as that text in a JSON string.
 */
export class JsonNumber {
  constructor(readonly text: string) {}

  toJSON(): string {
    writtenAsText++;
    return this.text;
  }
}

/** How many times a JsonNumber was written by JSON.stringify: `exactJson` knows by it whether its value held one. */
let writtenAsText = 0;

/**
 * Whether `text` may hold a number a double does not keep: a run of 16 digits (with or without a
 * point among them) or a three-digit exponent. Numbers of 15 significant digits or fewer within a
 * double's range are read exactly by JSON.parse; anything more is read by `parse` below.
 */
const MAY_HOLD_INEXACT = /\d[\d.]{15}|[eE][+-]?\d{3}/;

/** A number JSON.parse reads exactly is the same number here; any other keeps its text. */
const readNumber = (text: string): number | JsonNumber => (isSafeNumber(text) ? Number(text) : new JsonNumber(text));

/** As JSON.parse: of a key written twice, the last value is kept. */
const lastValue = ({ newValue }: { newValue: unknown }): unknown => newValue;

/**
 * The value of JSON `text`, as JSON.parse reads it but for numbers a double does not hold exactly,
 * which are `JsonNumber`s. Throws a SyntaxError for text that is not JSON, and a RangeError for
 * JSON nested more deeply than the reader can go (thousands of levels).
 */
export function parseExactJson(text: string): unknown {
  if (!MAY_HOLD_INEXACT.test(text)) return JSON.parse(text) as unknown;
  return parse(text, null, { parseNumber: readNumber, onDuplicateKey: lastValue });
}

const AS_WRITTEN: NumberStringifier[] = [{ test: (value) => value instanceof JsonNumber, stringify: (value) => (value as JsonNumber).text }];

/**
 * `value` as JSON text, as JSON.stringify writes it but for `JsonNumber`s, written as the numbers
 * they hold. Throws a RangeError for a value nested more deeply than the writer can go.
 */
export function exactJson(value: unknown): string {
  const before = writtenAsText;
  const text = JSON.stringify(value);
  if (writtenAsText === before) return text;
  return stringify(value, null, undefined, AS_WRITTEN) as string;
}

/** The text of a number read by `parseExactJson` (a number or a `JsonNumber`), as its provider wrote it when JSON.parse would not keep it. */
export const numberText = (value: number | JsonNumber): string => (value instanceof JsonNumber ? value.text : String(value));

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
