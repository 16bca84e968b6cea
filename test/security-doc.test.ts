// docs/security.md against the API as deployed (METRICS_PUBLIC at its default): each route the
// page says needs no key answers without one, and the metrics route does not. Real API app and
// Postgres; no request here reaches Temporal.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { useApiWithoutTemporal } from './helpers/api';

const page = readFileSync(new URL('../docs/security.md', import.meta.url), 'utf8');

/** The routes (backticked `/…` paths) a piece of text names. */
const routesIn = (text: string) => [...new Set([...text.matchAll(/`(\/[a-z]+)`/g)].map((m) => m[1]!))];

describe('docs/security.md: the routes it says need no key', () => {
  const api = useApiWithoutTemporal('security-doc');

  const refusedWithoutKey = async (paths: string[]) => {
    const refused: string[] = [];
    for (const path of paths) if ((await api.app.request(path)).status === 401) refused.push(path);
    return refused;
  };

  it('names in "What is trusted" only routes that answer without a key', async () => {
    const clause = /\*\*What is trusted\.\*\*([\s\S]*?)\n\n/.exec(page);
    expect(clause).not.toBeNull();
    const named = routesIn(clause![1]!);
    expect(await refusedWithoutKey(named)).toEqual([]);
  });

  it('names under "Unauthenticated endpoints" only routes that answer without a key (/readyz and /docs), and /metrics needs the key by default', async () => {
    const bullet = /\*Unauthenticated endpoints\.\*([\s\S]*?)\n- \*/.exec(page);
    expect(bullet).not.toBeNull();
    const named = routesIn(bullet![1]!);
    expect(named).toEqual(expect.arrayContaining(['/readyz', '/docs']));
    expect(await refusedWithoutKey(named)).toEqual([]);
    expect((await api.app.request('/metrics')).status).toBe(401);
  });
});
