// Test files run beside each other on one Postgres server (vitest.config.ts). A statement reading
// the server-wide views (pg_stat_activity, pg_locks) sees every file's sessions, so each one in a
// test file must read only its own database's sessions: `datname = current_database()` (or its
// own database named by a parameter), pg_locks' `database` of the current database, or sessions
// picked by a pid of its own.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const testDir = path.dirname(fileURLToPath(import.meta.url));
const VIEW = /pg_stat_activity|pg_locks/g;
/** What scopes a statement to the file's own sessions. */
const SCOPED = /current_database\(\)|datname\s*=\s*\$\d|\bpid\s*=\s*\$\d|\$\d\s*=\s*any\(pg_blocking_pids\(pid\)\)/;
const QUOTES = new Set(["'", '"', '`']);

/** The statements (string literals, comments left out) of `source` that read a server-wide view. */
function viewStatements(source: string): string[] {
  const statements: string[] = [];
  for (const match of source.matchAll(VIEW)) {
    const lineStart = source.lastIndexOf('\n', match.index) + 1;
    const line = source.slice(lineStart, match.index).trimStart();
    if (line.startsWith('//') || line.startsWith('*') || line.startsWith('/*')) continue;
    let open = match.index;
    while (open > 0 && !QUOTES.has(source[open]!)) open -= 1;
    const close = source.indexOf(source[open]!, match.index);
    statements.push(source.slice(open + 1, close));
  }
  return statements;
}

describe('statements of test files reading pg_stat_activity or pg_locks', () => {
  it('finds the statements of a file and tells a scoped one from one that would see other files', () => {
    const source = [
      '// a comment naming pg_stat_activity is no statement',
      "await q('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [pid]);",
      "await q(`select count(*) from pg_locks where relation = 'sync_jobs'::regclass and not granted`);",
    ].join('\n');
    const found = viewStatements(source);
    expect(found).toEqual(['select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', "select count(*) from pg_locks where relation = 'sync_jobs'::regclass and not granted"]);
    expect(found.map((s) => SCOPED.test(s))).toEqual([true, false]);
  });

  it('each read only the sessions of their own database', () => {
    const files = readdirSync(testDir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') && !f.endsWith('pg-views-scoped.test.ts'));
    const unscoped = files.flatMap((file) =>
      viewStatements(readFileSync(path.join(testDir, file), 'utf8'))
        .filter((statement) => !SCOPED.test(statement))
        .map((statement) => `${file}: ${statement.replace(/\s+/g, ' ').trim()}`),
    );
    expect(files.length).toBeGreaterThan(100);
    expect(unscoped).toEqual([]);
  });
});
