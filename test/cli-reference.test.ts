// The CLI agrees with its reference (docs/cli.md) and its own `--help`: every exit code and the
// HTTP statuses that lead to it are in both.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT, exitCodeOfStatus } from '../cli/errors';
import { helpText } from '../cli/run';

const REFERENCE = readFileSync(join(import.meta.dirname, '..', 'docs', 'cli.md'), 'utf8');

/** The rows of the reference's exit code table: code → its meaning. */
function exitTable(): Map<number, string> {
  const section = REFERENCE.slice(REFERENCE.indexOf('## Exit codes'));
  const rows = [...section.matchAll(/^\| (\d+) \| (.*) \|$/gm)];
  return new Map(rows.map((r) => [Number(r[1]), r[2]!]));
}

describe('the synctide CLI against its reference and its help', () => {
  it('names every exit code in the reference and in --help, each with the HTTP error statuses that lead to it', () => {
    const table = exitTable();
    const help = helpText();
    const exitHelp = help.slice(help.indexOf('Exit codes:'));
    expect([...table.keys()].sort((a, b) => a - b)).toEqual(Object.values(EXIT).sort((a, b) => a - b));
    for (const code of Object.values(EXIT)) expect(exitHelp, `exit ${code} in --help`).toMatch(new RegExp(`(^|\\s)${code} `));
    // Every error status the API documents: the exit code it leads to names it (1 is "anything else").
    for (const status of [400, 401, 403, 404, 409, 410, 413, 415, 429, 500, 502, 503, 504]) {
      const code = exitCodeOfStatus(status);
      if (code === EXIT.failure) continue;
      expect(table.get(code), `exit ${code} of HTTP ${status} in the reference`).toContain(String(status));
      const line = exitHelp.split('\n').find((l) => new RegExp(`(^|\\s)${code} [a-z]`).test(l));
      expect(line?.slice(line.search(new RegExp(`(^|\\s)${code} [a-z]`))).split(/\s{3}/)[0], `exit ${code} of HTTP ${status} in --help`).toContain(String(status));
    }
  });
});
