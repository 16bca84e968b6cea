// What a command prints: JSON for scripts (`--json`: one document, or one object a line for a
// stream), aligned tables and short lines for people. Results go to stdout; progress, hints and
// errors go to stderr, so `synctide … --json | jq` always reads clean JSON; with --json what goes to
// stderr is JSON too, one object a line (an error, a read made again, a cursor to resume from).
import type { Writable } from 'node:stream';

export interface Output {
  json: boolean;
  stdout: Writable & { isTTY?: boolean; columns?: number };
  stderr: Writable & { isTTY?: boolean; columns?: number };
}

/** Writes `value` as pretty JSON with `--json`, else the lines `human` gives. */
export function emit(out: Output, value: unknown, human: () => string | string[]): void {
  if (out.json) {
    out.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    return;
  }
  const text = human();
  const lines = Array.isArray(text) ? text : [text];
  if (lines.length > 0) out.stdout.write(`${lines.join('\n')}\n`);
}

/** A line on stderr (a hint, a warning, progress when not on a terminal) that --json leaves out. */
export function note(out: Output, line: string): void {
  out.stderr.write(`${line}\n`);
}

/**
 * Something a script may act on, said on stderr: with --json as one JSON object on a line of its
 * own (every line on stderr is one then, as stdout is JSON), else as the line `human` gives.
 */
export function notice(out: Output, value: Record<string, unknown>, human: () => string): void {
  out.stderr.write(`${out.json ? JSON.stringify(value) : human()}\n`);
}

/** Rows under a header, each column as wide as its widest cell; an empty list says so. */
export function table(header: string[], rows: string[][], empty = '(none)'): string[] {
  if (rows.length === 0) return [empty];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)];
}

/** `key: value` lines, keys aligned; undefined values are left out. */
export function fields(pairs: [string, string | number | boolean | null | undefined][]): string[] {
  const shown = pairs.filter(([, v]) => v !== undefined);
  const width = Math.max(...shown.map(([k]) => k.length));
  return shown.map(([k, v]) => `${`${k}:`.padEnd(width + 1)} ${v === null ? '-' : String(v)}`);
}

/** An ISO timestamp as `YYYY-MM-DD HH:MM:SS` (UTC), or `-`. */
export function when(iso: string | null | undefined): string {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '') : '-';
}

/** An integer with thousands separators. */
export function num(n: number): string {
  return n.toLocaleString('en-US');
}
