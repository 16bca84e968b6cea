// The workflow bundle a worker loads (the one `npm run build` writes, here global set-up's): its
// inline source map keeps every mapping, and the source text of Synctide's own modules, but not
// that of dependencies, which every workflow thread would otherwise parse and hold.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { withoutDependencySources } from '../infra/workflow-bundle';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PREFIX = '//# sourceMappingURL=data:application/json;charset=utf-8;base64,';

interface SourceMap {
  mappings: string;
  sources: string[];
  sourcesContent: (string | null)[];
}

function inlineMap(code: string): SourceMap {
  const at = code.lastIndexOf(PREFIX);
  expect(at).toBeGreaterThan(0);
  return JSON.parse(Buffer.from(code.slice(at + PREFIX.length), 'base64').toString()) as SourceMap;
}

describe('workflow bundle', () => {
  it("keeps the mappings and Synctide's own sources, not the dependencies' source text", () => {
    const map = inlineMap(readFileSync(inject('workflowBundlePath'), 'utf8'));
    expect(map.mappings.length).toBeGreaterThan(1000);
    const dependencies = map.sources.filter((source) => source.includes('/node_modules/'));
    expect(dependencies.some((source) => source.includes('@temporalio/workflow'))).toBe(true);
    for (const source of dependencies) expect(map.sourcesContent[map.sources.indexOf(source)]).toBeNull();
    const own = path.join(ROOT, 'workflows/connection/workflow.ts');
    expect(map.sources).toContain(own);
    expect(map.sourcesContent[map.sources.indexOf(own)]).toBe(readFileSync(own, 'utf8'));
  });

  it('leaves the code and the mappings as they were', () => {
    const original = {
      version: 3,
      sources: ['/app/node_modules/lib/index.js', '/app/workflows/a.ts'],
      sourcesContent: ['dependency text', 'own text'],
      names: [],
      mappings: 'AAAA;AACA',
    };
    const code = `console.log(1);\n${PREFIX}${Buffer.from(JSON.stringify(original)).toString('base64')}`;
    const slim = withoutDependencySources(code);
    expect(slim.startsWith('console.log(1);\n')).toBe(true);
    expect(inlineMap(slim)).toEqual({ ...original, sourcesContent: [null, 'own text'] });
    expect(() => withoutDependencySources('console.log(1);')).toThrow(/no inline source map/);
  });
});
