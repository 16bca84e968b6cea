// Webhook signatures: `Synctide-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`,
// keyed by the webhook's secret. Receivers verify it as the README shows and reject old timestamps.
import { createHmac, randomBytes } from 'node:crypto';

/** The header carrying the signature. */
export const SIGNATURE_HEADER = 'synctide-signature';

/** A new webhook secret: 32 random bytes, prefixed so it is recognisable in a receiver's config. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/** The signature header value for `body` sent at `timestampSeconds`. */
export function signWebhook(secret: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${timestampSeconds}.${body}`).digest('hex');
  return `t=${timestampSeconds},v1=${mac}`;
}
