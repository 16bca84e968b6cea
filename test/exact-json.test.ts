// JSON read and written with its numbers as written (policy/exact-json.ts): every number keeps its
// value through a read and a write, whatever its digits, and everything else reads and writes as
// JSON.parse and JSON.stringify do. Pure: property tests over generated JSON.
import fc from 'fast-check';
import { splitNumber } from 'lossless-json';
import { describe, expect, it } from 'vitest';
import { exactJson, firstNumberNotHeld, heldByDouble, JsonNumber, numberText, parseExactJson } from '../policy/exact-json';

/** A JSON number's value as sign, significant digits and exponent (trailing zeros dropped), to compare values written differently. */
function valueOf(text: string): string {
  const { sign, digits, exponent } = splitNumber(text);
  const significant = digits.replace(/0+$/, '');
  return significant === '' ? '0' : `${sign}${significant}e${exponent}`;
}

/** `value` with every JsonNumber as the double JSON.parse reads for it. */
function asDoubles(value: unknown): unknown {
  if (value instanceof JsonNumber) return Number(value.text);
  if (Array.isArray(value)) return value.map(asDoubles);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, asDoubles(inner)]));
  return value;
}

/** Number texts of every kind: short and long integers, fractions, exponents within and past a double's range. */
const numberTexts = fc.oneof(
  fc.integer().map(String),
  fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }).map(String),
  fc.tuple(fc.bigInt({ min: -(10n ** 25n), max: 10n ** 25n }), fc.stringMatching(/^\d{1,30}$/)).map(([whole, fraction]) => `${whole}.${fraction}`),
  fc.tuple(fc.integer({ min: 1, max: 9 }), fc.integer({ min: -999, max: 999 })).map(([digit, exponent]) => `${digit}e${exponent}`),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
);

describe('exact JSON', () => {
  it('keeps the value of every number through a read and a write', () => {
    fc.assert(
      fc.property(fc.array(numberTexts, { minLength: 1, maxLength: 8 }), (texts) => {
        const read = parseExactJson(`{"values": [${texts.join(', ')}]}`) as { values: (number | JsonNumber)[] };
        const written = JSON.parse(exactJson(read).replace(/-?\d[\d.eE+-]*/g, '"$&"')) as { values: string[] };
        expect(written.values.map(valueOf)).toEqual(texts.map(valueOf));
        expect(read.values.map(numberText).map(valueOf)).toEqual(texts.map(valueOf));
      }),
      { numRuns: 300 },
    );
  });

  it('writes every number back with the text it was read with, however JSON.parse would spell it', () => {
    // Spellings JSON.parse gives back otherwise: trailing zeros of a fraction, an exponent, a
    // negative zero, a fraction small enough for JavaScript to write with an exponent.
    const spelled = fc.oneof(
      numberTexts,
      fc.tuple(fc.integer({ min: -1000, max: 1000 }), fc.stringMatching(/^\d{0,6}0$/)).map(([whole, fraction]) => `${whole}.${fraction}`),
      fc.tuple(fc.stringMatching(/^-?\d(\.\d{1,3})?$/), fc.constantFrom('e', 'E', 'e+', 'E-', 'e-'), fc.integer({ min: 0, max: 30 })).map(([digits, e, exponent]) => `${digits}${e}${exponent}`),
      fc.constantFrom('-0', '-0.0', '0.0', '0.00', '1.0', '1.10', '2.50', '100.00', '1e2', '0.0000001', '-0.00000012', '1000000000000000000000'),
    );
    fc.assert(
      // In an object, an array or alone, with whitespace JSON allows before a number, or none.
      fc.property(fc.array(spelled, { minLength: 1, maxLength: 8 }), fc.constantFrom('object', 'array', 'alone'), fc.constantFrom('', ' ', '\n\t'), (texts, shape, space) => {
        const text =
          shape === 'object' ? `{${texts.map((t, i) => `"k${i}":${space}${t}`).join(',')}}` : shape === 'array' ? `[${space}${texts.join(`,${space}`)}]` : `${space}${texts[0]}${space}`;
        expect(exactJson(parseExactJson(text))).toBe(text.replace(/\s+/g, ''));
      }),
      { numRuns: 500 },
    );
    const read = parseExactJson('{"a": 1.10, "b": 1.0, "c": 1e2, "d": -0, "e": 0.0000001, "f": 1.5, "g": 1e-7, "h": -0.5, "i": 10, "j": "1.10"}');
    expect(read).toEqual({
      a: new JsonNumber('1.10'), b: new JsonNumber('1.0'), c: new JsonNumber('1e2'), d: new JsonNumber('-0'), e: new JsonNumber('0.0000001'),
      f: 1.5, g: 1e-7, h: -0.5, i: 10, j: '1.10',
    });
    expect(exactJson(read)).toBe('{"a":1.10,"b":1.0,"c":1e2,"d":-0,"e":0.0000001,"f":1.5,"g":1e-7,"h":-0.5,"i":10,"j":"1.10"}');
  });

  it('reads and writes any other JSON as JSON.parse and JSON.stringify do', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.boolean(), (value, withLongNumber) => {
        // A long number beside it takes the path that reads numbers itself.
        const text = JSON.stringify(withLongNumber ? [value, '12345678901234567890'] : value);
        // The same values: a JsonNumber only where a double may not hold the text (here, integers
        // from 2^53 on, which JSON.stringify writes in full).
        expect(asDoubles(parseExactJson(text))).toEqual(JSON.parse(text));
        expect(exactJson(parseExactJson(text))).toBe(text);
      }),
      { numRuns: 300 },
    );
  });

  it('keeps only numbers a double does not hold as JsonNumber, and of a key written twice the last value, as JSON.parse', () => {
    const read = parseExactJson('{"a": 9007199254740993, "b": 9007199254740991, "c": 0.5, "d": 0.12345678901234567890, "e": 1e400, "f": 1, "f": 2}');
    expect(read).toEqual({
      a: new JsonNumber('9007199254740993'), b: 9007199254740991, c: 0.5, d: new JsonNumber('0.12345678901234567890'), e: new JsonNumber('1e400'), f: 2,
    });
    // Elsewhere (a log line, say), a JsonNumber is written as its digits in a string.
    expect(JSON.stringify(read)).toBe('{"a":"9007199254740993","b":9007199254740991,"c":0.5,"d":"0.12345678901234567890","e":"1e400","f":2}');
    expect(exactJson(read)).toBe('{"a":9007199254740993,"b":9007199254740991,"c":0.5,"d":0.12345678901234567890,"e":1e400,"f":2}');
  });

  it('reads and writes JSON holding numbers a double does not hold as deep as JSON.stringify writes any (a record stored is one the feed serves)', () => {
    // About as deep as JSON.stringify goes (some 4,000 levels), less a margin for the caller's stack.
    const depth = 3900;
    for (const [open, close] of [['{"a":', '}'], ['[', ']']]) {
      const text = `${open!.repeat(depth)}[12345678901234567891,1e400,0.5]${close!.repeat(depth)}`;
      let value: unknown = [new JsonNumber('12345678901234567891'), new JsonNumber('1e400'), 0.5];
      for (let i = 0; i < depth; i++) value = open === '[' ? [value] : { a: value };
      expect(exactJson(value)).toBe(text);
      expect(exactJson(parseExactJson(text))).toBe(text);
    }
  });

  it('writes strings as JSON.stringify does beside JsonNumbers, whatever characters they begin with', () => {
    // Strings of the characters that mark JsonNumbers while they are written, quotes and digits.
    const strings = fc.string({ unit: fc.constantFrom('\uE000', '\uE001', '\uE002', '"', '\\', '1', 'x'), maxLength: 5 });
    const items = fc.array(fc.oneof(strings, numberTexts.map((text) => ({ text }))), { maxLength: 30 });
    fc.assert(
      fc.property(items, (list) => {
        const value = list.map((item) => (typeof item === 'string' ? item : new JsonNumber(item.text)));
        const expected = `[${list.map((item) => (typeof item === 'string' ? JSON.stringify(item) : item.text)).join(',')}]`;
        expect(exactJson(value)).toBe(expected);
        expect(exactJson({ [String(list[0] ?? '')]: value })).toBe(`{${JSON.stringify(String(list[0] ?? ''))}:${expected}}`);
      }),
      // Strings beginning as the first two markers tried do: the third is taken.
      { numRuns: 300, examples: [[['\uE000\uE000\uE0001', { text: '12345678901234567891' }, '\uE001\uE000\uE000"']]] },
    );
  });

  it('refuses text that is not JSON with a SyntaxError, on both paths', () => {
    expect(() => parseExactJson('{"a": 1,}')).toThrow(SyntaxError);
    expect(() => parseExactJson('{"a": 12345678901234567890,}')).toThrow(SyntaxError);
  });
});

describe('numbers a double holds (heldByDouble, firstNumberNotHeld: what a JSON body the API takes may hold)', () => {
  it("holds every number JSON.stringify writes, and every decimal of 15 significant digits or fewer in a normal double's range, however it is spelled", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (d) => {
        expect(heldByDouble(String(d)), String(d)).toBe(true);
        expect(heldByDouble(d.toExponential()), d.toExponential()).toBe(true);
        // A subnormal double holds fewer digits (4.94065645841247e-324 is read as 5e-324).
        if (d !== 0 && Math.abs(d) < 2.2250738585072014e-308) return;
        // Rounded to 15 digits, the largest doubles pass the range (1.79769313486232e+308).
        if (Math.abs(d) > 1e308) return;
        const fifteen = d.toPrecision(15);
        expect(heldByDouble(fifteen.replace('e+', 'E')), fifteen).toBe(true);
      }),
    );
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(firstNumberNotHeld(JSON.stringify(value))).toBeNull();
      }),
    );
  });

  it('holds an integer only when JSON.stringify writes back its digits after JSON.parse', () => {
    // Below 1e21 JavaScript writes an integer's digits out (an integer near it may be read as 1e21), so its text is one BigInt reads.
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }), (n) => {
        expect(heldByDouble(String(n)), String(n)).toBe(BigInt(JSON.stringify(JSON.parse(String(n)))) === n);
      }),
    );
  });

  it('holds no number past a double\'s range, no non-zero number below it, and no fraction with digits a double drops; names the first such number in document order, none inside a string', () => {
    for (const text of ['1e400', '-1E+309', '1e-400', '2e-324', '4.9e-324', '9007199254740993', '3.14159265358979323846', '1.0000000000000000001']) {
      expect(heldByDouble(text), text).toBe(false);
    }
    for (const text of ['0', '-0', '0.0', '1.10', '1e2', '1E21', '5e-324', '1.7976931348623157e308', '9007199254740992', '0.30000000000000004', '0.0000001']) {
      expect(heldByDouble(text), text).toBe(true);
    }
    expect(firstNumberNotHeld('{"a":"1e400","b":[1,2.5,1e-400],"c":1e400}')).toBe('1e-400');
    expect(firstNumberNotHeld('{"a":"12345678901234567891","b":"\\"1e999"}')).toBeNull();
  });
});
