// The verifiers of the older `Synctide-Signature` header that this repository gives receivers:
// the snippet docs/api.md documents, run exactly as written there.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The verification snippet exactly as docs/api.md documents it. */
export function documentedVerifier(): (secret: string, header: string, rawBody: string) => boolean {
  const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const block = /<!-- webhook-verify:start -->\s*```js\n([\s\S]*?)```\s*<!-- webhook-verify:end -->/.exec(doc);
  if (!block) throw new Error('docs/api.md: no webhook-verify snippet');
  return new Function('require', `${block[1]}\nreturn verifySynctideSignature;`)(createRequire(import.meta.url));
}
