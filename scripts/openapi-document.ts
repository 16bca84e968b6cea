// `npm run lint:openapi`: writes the API's OpenAPI document (what GET /openapi.json serves) to a
// file, default dist/openapi.json, for `redocly lint` to check against redocly.yaml.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createApp } from '../api/app';
import type { ApiDeps } from '../api/deps';
import { Registry } from 'prom-client';
import { createLogger } from '../lib/logger';

const out = path.resolve(process.argv[2] ?? 'dist/openapi.json');
// Only the document is asked for: no route handler runs, so no database or Temporal is needed.
const app = createApp({ adminApiKey: 'openapi-document-only-0123456789ab', logger: createLogger('silent'), registry: new Registry() } as ApiDeps);
const res = await app.request('/openapi.json');
if (res.status !== 200) throw new Error(`GET /openapi.json answered ${res.status}`);
mkdirSync(path.dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(await res.json(), null, 2)}\n`);
console.log(`${path.relative(process.cwd(), out)}: the OpenAPI document`);
