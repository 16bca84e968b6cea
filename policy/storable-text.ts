// What text Postgres can store: no NUL character (text and jsonb refuse it), and no UTF-16
// surrogate without its pair (jsonb refuses it; text would get U+FFFD in its place). The one rule
// the API refuses requests by and the paging loop cleans provider data by. Pure: no I/O.

/** A UTF-16 surrogate without its pair. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** What in `text` Postgres cannot store, or null. */
export function unstorableIn(text: string): 'nul' | 'surrogate' | null {
  if (text.includes('\u0000')) return 'nul';
  return LONE_SURROGATE.test(text) ? 'surrogate' : null;
}

/** `text` as Postgres can store it: NUL characters removed, a lone surrogate replaced by U+FFFD (as a UTF-8 decoder would). */
export function storableText(text: string): string {
  const withoutNul = text.includes('\u0000') ? text.replaceAll('\u0000', '') : text;
  return withoutNul.replace(LONE_SURROGATES, '\uFFFD');
}
