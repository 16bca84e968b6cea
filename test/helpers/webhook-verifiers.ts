// The verifiers of the older `Synctide-Signature` header that this repository gives receivers:
// the snippet docs/api.md documents, run exactly as written there.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The verification snippet exactly as docs/api.md documents it. */
export function documentedVerifier(): (secret: string, header: string, rawBody: string) => boolean {
  const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const block = /<!-- webhook-verify:start -->\s*```js\n([\s\S]*?)```\s*<!-- webhook-verify:end -->/.exec(doc);
  if (!block) throw new Error('docs/api.md: no webhook-verify snippet');
  return new Function('require', `${block[1]}\nreturn verifySynctideSignature;`)(createRequire(import.meta.url));
}

/**
 * The snippet docs/api.md documented before a rotation's overlap carried two `v1=`: it reads one
 * `v1`, the last (Object.fromEntries keeps the last of a repeated key). Receivers may still run it.
 */
export function lastV1Verifies(secret: string, header: string, rawBody: string, toleranceSeconds = 300): boolean {
  const parts = Object.fromEntries(header.split(',').map((pair) => pair.split('=', 2))) as Record<string, string | undefined>;
  const t = Number(parts.t);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceSeconds) return false;
  const expected = createHmac('sha256', secret).update(`${t}.${rawBody}`).digest();
  const given = Buffer.from(parts.v1 ?? '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
