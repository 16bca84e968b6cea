// Redacting secrets from text that leaves the process (errors, logs, answers), in every form a
// request may have carried them: the one rule of which texts of a secret are the secret.

/** A hex digit in either case, as a regular expression: percent-encodings are written in both. */
const hexDigit = (digit: string) => (/[a-f]/i.test(digit) ? `[${digit.toLowerCase()}${digit.toUpperCase()}]` : digit);

/**
 * A regular expression matching `secret` in any URL encoding of it: each character as it is or
 * percent-encoded (its UTF-8 bytes, hex in either case), a space also as `+`. Every encoder (a
 * browser, a provider's, `encodeURIComponent`, a form, OAuth's client authentication) leaves a
 * different set of characters as they are, so a server echoing a credential into a URL or a form
 * writes one of many forms; all of them are the credential.
 */
export function anyUrlEncoding(secret: string): RegExp {
  let pattern = '';
  for (const char of secret) {
    const bytes = [...Buffer.from(char, 'utf8')].map((byte) => `%${[...byte.toString(16).padStart(2, '0')].map(hexDigit).join('')}`).join('');
    const forms = [char.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&'), bytes, ...(char === ' ' ? ['\\+'] : [])];
    pattern += `(?:${forms.join('|')})`;
  }
  return new RegExp(pattern, 'g');
}

/** `text` with each of `secrets` (empty ones skipped), as it is or in any URL encoding, replaced by `[redacted]`. */
export function redactValues(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (secret) out = out.split(secret).join('[redacted]').replace(anyUrlEncoding(secret), '[redacted]');
  return out;
}
