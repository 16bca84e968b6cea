// `npm run docs:config`: writes the configuration table of docs/operations.md (between its
// config-table markers) from lib/config-docs.ts and the schemas' defaults.
import { readFileSync, writeFileSync } from 'node:fs';
import { configTable } from '../lib/config-docs';

const PAGE = new URL('../docs/operations.md', import.meta.url);
const START = '<!-- config-table:start (npm run docs:config) -->';
const END = '<!-- config-table:end -->';

/** The page with its table replaced by `table`; throws when the markers are missing. */
export function withConfigTable(page: string, table: string): string {
  const from = page.indexOf(START);
  const to = page.indexOf(END);
  if (from < 0 || to < from) throw new Error(`docs/operations.md: the markers ${START} … ${END} are missing`);
  return `${page.slice(0, from + START.length)}\n${table}\n${page.slice(to)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(PAGE, withConfigTable(readFileSync(PAGE, 'utf8'), configTable()));
  console.log('docs/operations.md: configuration table written');
}
