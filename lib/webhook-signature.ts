// Webhook signatures. Every delivery carries two kinds of signature of the same body:
// - Standard Webhooks 1.0: `webhook-id` (the event id), `webhook-timestamp` (unix seconds) and
//   `webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, keyed by the bytes
//   the `whsec_` secret's base64 encodes (webhookSigningKey), so the reference libraries verify it;
//   while a rotated secret's overlap lasts, one such entry per secret, space-separated, the current
//   secret's first (a receiver holding either verifies);
// - the older `Synctide-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, keyed by
//   the secret string itself, sent beside it for a deprecation period so existing receivers keep
//   working; while a rotated secret's overlap lasts, one `v1=` per secret, the current secret's
//   last (`t=<t>,v1=<previous>,v1=<current>`, Stripe's form: a receiver accepts any that verifies;
//   one that reads a single `v1` keeping the last, as the verifier documented before did, still
//   gets the current secret's).
import { createHmac, randomBytes } from 'node:crypto';

/** The header carrying the older Synctide signature (deprecated; sent beside the standard ones). */
export const SIGNATURE_HEADER = 'synctide-signature';

/** Standard Webhooks' secret prefix. */
const SECRET_PREFIX = 'whsec_';
/** A key length Standard Webhooks allows: 24 to 64 bytes. */
const MIN_KEY_BYTES = 24;
const MAX_KEY_BYTES = 64;
/** Base64, standard or URL-safe alphabet, padding optional. */
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** A new webhook secret: `whsec_` and the standard base64 of 32 random bytes (Standard Webhooks' form). */
export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/**
 * The HMAC key of the Standard Webhooks signature of `secret`: the bytes its base64 after `whsec_`
 * encodes, when it is `whsec_` and 24–64 bytes of base64. The URL-safe alphabet is accepted too,
 * which secrets made before Standard Webhooks use (`whsec_` + unpadded base64url of 32 bytes): the
 * same 32 bytes, so a receiver that converts such a secret to standard base64 (`-` → `+`, `_` → `/`,
 * `=` padding) verifies with any Standard Webhooks library. Any other secret (one not made by
 * Synctide) signs with its UTF-8 bytes as the key.
 */
export function webhookSigningKey(secret: string): Buffer {
  if (secret.startsWith(SECRET_PREFIX)) {
    const encoded = secret.slice(SECRET_PREFIX.length);
    // (A length of 4n + 1 characters encodes no whole bytes: not base64.)
    if (BASE64.test(encoded) && encoded.replace(/=+$/, '').length % 4 !== 1) {
      const key = Buffer.from(encoded, 'base64');
      if (key.length >= MIN_KEY_BYTES && key.length <= MAX_KEY_BYTES) return key;
    }
  }
  return Buffer.from(secret, 'utf8');
}

/**
 * The Standard Webhooks headers of `body`, sent as message `id` at `timestampSeconds`: one `v1,`
 * signature per secret of `secrets` (the current one, then a rotated one still in its overlap),
 * space-separated in that order.
 */
export function standardWebhookHeaders(
  secrets: readonly [string, ...string[]],
  id: string,
  timestampSeconds: number,
  body: string,
): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  const signed = `${id}.${timestampSeconds}.${body}`;
  const signatures = secrets.map((secret) => `v1,${createHmac('sha256', webhookSigningKey(secret)).update(signed).digest('base64')}`);
  return { 'webhook-id': id, 'webhook-timestamp': String(timestampSeconds), 'webhook-signature': signatures.join(' ') };
}

/**
 * The older `Synctide-Signature` header value for `body` sent at `timestampSeconds` (deprecated):
 * after the one `t=`, one `v1=` signature per secret of `secrets` (the current one, then a rotated
 * one still in its overlap) in the reverse order, the current secret's last: a receiver reading a
 * single `v1` kept the last one (the verifier documented before did), and verifies as it did.
 */
export function signWebhook(secrets: readonly [string, ...string[]], timestampSeconds: number, body: string): string {
  const signatures = secrets.map((secret) => `v1=${createHmac('sha256', secret).update(`${timestampSeconds}.${body}`).digest('hex')}`);
  return [`t=${timestampSeconds}`, ...signatures.reverse()].join(',');
}
