// The shape of a command and the helpers that read its flags. A command names its words
// (`connections list`), its positional arguments and its flags; main.ts parses the command line
// with node:util parseArgs against them and calls `run`.
import { readFileSync } from 'node:fs';
import { text } from 'node:stream/consumers';
import type { SynctideClient } from './api';
import type { Settings } from './config';
import { CliError, EXIT, usage, type ExitCode } from './errors';
import type { Output } from './output';

export interface Flag {
  type: 'string' | 'boolean';
  multiple?: boolean;
  short?: string;
  /** What the value is, in help: `<id>`, `<seconds>`. */
  value?: string;
  description: string;
}

export type FlagValues = Record<string, string | boolean | string[] | undefined>;

export interface Context {
  client: SynctideClient;
  settings: Settings;
  out: Output;
  /** Aborted on Ctrl-C, so a command that waits or follows can stop and say where it was. */
  signal: AbortSignal;
}

export interface Command {
  words: string[];
  summary: string;
  /** Positional arguments, in order, as shown in help: `<connection-id>`. */
  args?: string[];
  flags?: Record<string, Flag>;
  /** Runs the command; answers its exit code (0 when it returns nothing). */
  run(ctx: Context, flags: FlagValues, args: string[]): Promise<ExitCode | void>;
}

/** A string flag's value, or undefined. */
export const str = (flags: FlagValues, name: string): string | undefined => {
  const v = flags[name];
  return typeof v === 'string' ? v : undefined;
};

/** A string flag that must be given. */
export function required(flags: FlagValues, name: string): string {
  const v = str(flags, name);
  if (v === undefined || v === '') throw usage(`--${name} is required`);
  return v;
}

/** A repeatable string flag's values (empty when not given); comma-separated values are split. */
export const list = (flags: FlagValues, name: string): string[] => {
  const v = flags[name];
  const values = Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
  return values.flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean);
};

/** An integer flag in [min, max], or undefined when not given. */
export function int(flags: FlagValues, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = str(flags, name);
  if (v === undefined) return undefined;
  if (!/^-?\d+$/.test(v) || Number(v) < min || Number(v) > max) throw usage(`--${name} must be an integer from ${min}${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max}`}`);
  return Number(v);
}

/** A number of seconds (fractions allowed) as milliseconds, or `fallback`. */
export function seconds(flags: FlagValues, name: string, fallback: number): number {
  const v = str(flags, name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw usage(`--${name} must be a positive number of seconds`);
  return Math.round(n * 1000);
}

/**
 * A JSON flag: the JSON itself, `@path` for a file, or `-` for stdin (for credentials: a secret
 * typed on a command line stays in shell history and `ps`). Never echoes what it failed to parse.
 */
export async function jsonFlag(flags: FlagValues, name: string, signal: AbortSignal, readStdin: (signal: AbortSignal) => Promise<string> = stdinText): Promise<unknown> {
  const v = str(flags, name);
  if (v === undefined) return undefined;
  let text: string;
  let from = `--${name}`;
  if (v === '-') {
    text = await readStdin(signal);
    from = `--${name} (stdin)`;
  } else if (v.startsWith('@')) {
    try {
      text = readFileSync(v.slice(1), 'utf8');
    } catch (err) {
      throw usage(`--${name}: cannot read ${v.slice(1)}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    from = `--${name} (${v.slice(1)})`;
  } else {
    text = v;
  }
  try {
    return JSON.parse(text);
  } catch {
    throw usage(`${from} is not valid JSON`);
  }
}

/**
 * All of stdin as text, read without blocking the process, so Ctrl-C (`signal`) stops the wait
 * (exit 130) and stdin is let go.
 */
async function stdinText(signal: AbortSignal): Promise<string> {
  const interrupted = () => new CliError('interrupted', EXIT.interrupted, 'interrupted');
  if (signal.aborted) throw interrupted();
  let stop = () => {};
  const aborted = new Promise<never>((_resolve, reject) => {
    stop = () => {
      process.stdin.destroy();
      reject(interrupted());
    };
    signal.addEventListener('abort', stop, { once: true });
  });
  try {
    return await Promise.race([text(process.stdin), aborted]);
  } finally {
    signal.removeEventListener('abort', stop);
  }
}

/** The common paging flags of list commands. */
export const PAGING: Record<string, Flag> = {
  limit: { type: 'string', value: '<n>', description: 'Items per page, 1 to 200 (the API refuses more)' },
  cursor: { type: 'string', value: '<cursor>', description: 'Start from this next_cursor' },
  all: { type: 'boolean', description: 'Follow next_cursor and list every page' },
};

interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/**
 * Reads one page, or every page with `--all`; answers the items and the cursor of the next page
 * (null when there is none or all were read).
 */
export async function pages<T>(flags: FlagValues, read: (query: { limit?: number; cursor?: string }) => Promise<Page<T>>): Promise<Page<T>> {
  const limit = int(flags, 'limit', 1);
  let cursor = str(flags, 'cursor');
  const items: T[] = [];
  for (;;) {
    const page = await read({ ...(limit !== undefined && { limit }), ...(cursor !== undefined && { cursor }) });
    items.push(...page.items);
    if (!flags.all || page.next_cursor === null) return { items, next_cursor: page.next_cursor };
    cursor = page.next_cursor;
  }
}
