// The CLI agrees with its reference (docs/cli.md) and its own `--help`: every exit code and the
// HTTP statuses that lead to it are in both, every flag of every command is in the reference, and a
// command line the reference calls wrong is exit 2. The command line runs in-process (`run`), with
// no API behind it: nothing here sends a request.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { EXIT, exitCodeOfStatus } from '../cli/errors';
import { COMMANDS, helpText, run } from '../cli/run';

const REFERENCE = readFileSync(join(import.meta.dirname, '..', 'docs', 'cli.md'), 'utf8');

/** The rows of the reference's exit code table: code → its meaning. */
function exitTable(): Map<number, string> {
  const section = REFERENCE.slice(REFERENCE.indexOf('## Exit codes'));
  const rows = [...section.matchAll(/^\| (\d+) \| (.*) \|$/gm)];
  return new Map(rows.map((r) => [Number(r[1]), r[2]!]));
}

/** Runs one command line in-process with no API configured (`env` besides its URL and key); its exit code and output. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await run(args, { stdout, stderr, env: { SYNCTIDE_URL: 'http://127.0.0.1:9', SYNCTIDE_API_KEY: 'k', ...env }, signal: new AbortController().signal });
  return { code, stdout: out, stderr: err };
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

  it('refuses an argument `config` does not take with exit 2, as every other command does', async () => {
    const extra = await cli(['config', 'extra']);
    expect(extra.code, extra.stderr).toBe(EXIT.usage);
    expect(extra.stdout).toBe('');
    expect(extra.stderr).toBe('synctide: unexpected argument "extra"; usage: synctide config\n');
    const shown = await cli(['config']);
    expect(shown.code, shown.stderr).toBe(EXIT.ok);
  });

  it('refuses a SYNCTIDE_RETRY_WAIT_MS that is not a whole number of milliseconds from 1 to 600000 with exit 2, and names it in the reference', async () => {
    expect(REFERENCE).toContain('`SYNCTIDE_RETRY_WAIT_MS`');
    for (const value of ['soon', '0', '1.5', '-3', '600001']) {
      const refused = await cli(['config'], { SYNCTIDE_RETRY_WAIT_MS: value });
      expect({ value, code: refused.code, stderr: refused.stderr }).toEqual({
        value,
        code: EXIT.usage,
        stderr: 'synctide: SYNCTIDE_RETRY_WAIT_MS must be a whole number of milliseconds from 1 to 600000\n',
      });
    }
    for (const value of ['', '1', '600000']) expect((await cli(['config'], { SYNCTIDE_RETRY_WAIT_MS: value })).code, value).toBe(EXIT.ok);
  });

  it('names every flag of every command in the reference', () => {
    const missing = COMMANDS.flatMap((c) => Object.keys(c.flags ?? {}).filter((f) => !REFERENCE.includes(`--${f}`)).map((f) => `${c.words.join(' ')} --${f}`));
    expect(missing).toEqual([]);
  });
});
