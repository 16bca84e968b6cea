// The command line: finds the command by its words, parses its flags with node:util parseArgs
// (strict: an unknown flag or a missing value is a usage error), resolves the URL and key, runs it
// and maps every failure to a documented exit code. It writes only to the streams it is given.
import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { clientFor } from './api';
import type { Command, Flag, FlagValues } from './command';
import { connectionCommands } from './commands/connections';
import { jobCommands } from './commands/jobs';
import { recordCommands } from './commands/records';
import { tenantCommands } from './commands/tenants';
import { webhookCommands } from './commands/webhooks';
import { resolveSettings } from './config';
import { CliError, errorJson, EXIT, usage } from './errors';
import { fields, type Output } from './output';

export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export const COMMANDS: Command[] = [...connectionCommands, ...jobCommands, ...recordCommands, ...webhookCommands, ...tenantCommands];

const GLOBAL_FLAGS: Record<string, Flag> = {
  json: { type: 'boolean', description: 'Print JSON (lists and objects as one document; records tail one change a line; on stderr one object a line: errors, retries, the cursor)' },
  url: { type: 'string', value: '<url>', description: 'The API URL (else SYNCTIDE_URL, else the config file)' },
  config: { type: 'string', value: '<path>', description: 'The config file (else SYNCTIDE_CONFIG, else ~/.config/synctide/config.json)' },
  help: { type: 'boolean', short: 'h', description: 'Show help (of a command: synctide <command> --help)' },
  version: { type: 'boolean', description: 'Print the version' },
};

const EXIT_HELP = [
  'Exit codes:',
  '  0 ok   1 failure (5xx, unreachable)   2 usage (bad command line, no URL/key, 400 invalid_request, 413 too large)',
  '  3 auth (401/403)   4 not found (404)   5 conflict (409/410)   6 limited (429)',
  '  7 the job waited for failed or was cancelled   130 interrupted (Ctrl-C)',
];

const parseConfig = (flags: Record<string, Flag>): ParseArgsConfig['options'] =>
  Object.fromEntries(Object.entries(flags).map(([name, f]) => [name, { type: f.type, ...(f.multiple && { multiple: true }), ...(f.short && { short: f.short }) }]));

const flagLines = (flags: Record<string, Flag>) => {
  const rows = Object.entries(flags).map(([name, f]) => [`${f.short ? `-${f.short}, ` : ''}--${name}${f.value ? ` ${f.value}` : ''}`, f.description] as const);
  const width = Math.max(...rows.map(([left]) => left.length));
  return rows.map(([left, text]) => `  ${left.padEnd(width)}  ${text}`);
};

const usageLine = (c: Command) => `synctide ${c.words.join(' ')}${c.args ? ` ${c.args.join(' ')}` : ''}${c.flags ? ' [flags]' : ''}`;

/** True when the words of `c` begin with `prefix`. */
const startsWith = (c: Command, prefix: string[]) => prefix.every((w, i) => c.words[i] === w);

/** The help of the commands under `prefix` (all of them for an empty prefix). */
export function helpText(prefix: string[] = []): string {
  const shown = COMMANDS.filter((c) => startsWith(c, prefix));
  const rows = shown.map((c) => [c.words.join(' ') + (c.args ? ` ${c.args.join(' ')}` : ''), c.summary] as const);
  const width = Math.max(...rows.map(([left]) => left.length));
  return [
    'synctide: the Synctide API from a terminal, on the typed client.',
    '',
    `Usage: synctide ${prefix.length ? `${prefix.join(' ')} ` : ''}<command> [flags]`,
    '',
    'Commands:',
    ...rows.map(([left, text]) => `  ${left.padEnd(width)}  ${text}`),
    '  config'.padEnd(width + 2) + '  Where the URL and key come from (the key is never printed)',
    '',
    'Global flags:',
    ...flagLines(GLOBAL_FLAGS),
    '',
    'Environment: SYNCTIDE_URL, SYNCTIDE_API_KEY, SYNCTIDE_CONFIG. Config file: {"url": "…", "api_key": "…"}.',
    ...EXIT_HELP,
  ].join('\n');
}

/** The help of one command. */
export function commandHelp(c: Command): string {
  return [`Usage: ${usageLine(c)}`, '', c.summary, ...(c.flags ? ['', 'Flags:', ...flagLines(c.flags)] : []), '', 'Global flags:', ...flagLines(GLOBAL_FLAGS)].join('\n');
}

/** Writes a failure to stderr: a line, or with --json an `{"error": …}` document. */
function report(out: Output, err: CliError): void {
  if (out.json) out.stderr.write(`${JSON.stringify({ error: errorJson(err) })}\n`);
  else out.stderr.write(`synctide: ${err.message}\n`);
}

/** Runs one command line; answers the process exit code. */
export async function run(argv: string[], io: Omit<Output, 'json'> & { env: NodeJS.ProcessEnv; signal: AbortSignal }): Promise<number> {
  // A first, lenient pass finds the command words (and --json, so even a usage error can be JSON).
  const loose = parseArgs({ args: argv, options: parseConfig(GLOBAL_FLAGS), strict: false, allowPositionals: true });
  const out: Output = { json: loose.values.json === true, stdout: io.stdout, stderr: io.stderr };
  const words = loose.positionals;
  try {
    if (words[0] === 'help') {
      const group = words.slice(1);
      if (group.length === 1 && group[0] === 'config') return showConfig(out, argv, io.env, true);
      if (group.length > 0 && !COMMANDS.some((c) => startsWith(c, group))) throw usage(`unknown command "${group.join(' ')}" (synctide --help lists them)`);
      io.stdout.write(`${helpText(group)}\n`);
      return EXIT.ok;
    }
    if (words.length === 0) {
      if (loose.values.version) {
        io.stdout.write(out.json ? `${JSON.stringify({ version: VERSION })}\n` : `synctide ${VERSION}\n`);
        return EXIT.ok;
      }
      if (loose.values.help) {
        io.stdout.write(`${helpText()}\n`);
        return EXIT.ok;
      }
      // No command: a usage error; the help text for a person, a JSON error for a script.
      if (out.json) throw usage('no command given (synctide --help lists them)');
      io.stderr.write(`${helpText()}\n`);
      return EXIT.usage;
    }
    if (words[0] === 'config') return showConfig(out, argv, io.env, loose.values.help === true);
    const command = [...COMMANDS].sort((a, b) => b.words.length - a.words.length).find((c) => c.words.every((w, i) => words[i] === w));
    if (!command) {
      // The group named: the longest run of leading words that some command begins with
      // (`tenants keys`, `tenants`); given alone, it lists its commands.
      let depth = 0;
      while (depth < words.length && COMMANDS.some((c) => startsWith(c, words.slice(0, depth + 1)))) depth++;
      const group = words.slice(0, depth);
      if (group.length > 0 && words.length === group.length) {
        if (loose.values.help) {
          io.stdout.write(`${helpText(group)}\n`);
          return EXIT.ok;
        }
        const name = group.join(' ');
        throw usage(`${name} needs a command: ${[...new Set(COMMANDS.filter((c) => startsWith(c, group)).map((c) => c.words.slice(depth).join(' ')))].join(', ')} (synctide ${name} --help)`);
      }
      throw usage(`unknown command "${words.join(' ')}" (synctide --help lists them)`);
    }
    let parsed: ReturnType<typeof parseArgs>;
    try {
      parsed = parseArgs({ args: argv, options: parseConfig({ ...GLOBAL_FLAGS, ...command.flags }), strict: true, allowPositionals: true });
    } catch (err) {
      throw usage(`${(err as Error).message.replace(/\. To specify a positional argument.*$/s, '')} (synctide ${command.words.join(' ')} --help)`);
    }
    if (parsed.values.help) {
      io.stdout.write(`${commandHelp(command)}\n`);
      return EXIT.ok;
    }
    const args = parsed.positionals.slice(command.words.length);
    const expected = command.args ?? [];
    if (args.length !== expected.length) {
      throw usage(`${args.length < expected.length ? `missing ${expected.slice(args.length).join(' ')}` : `unexpected argument "${args[expected.length]}"`}; usage: ${usageLine(command)}`);
    }
    if (args.some((a) => a === '')) throw usage(`an argument is empty; usage: ${usageLine(command)}`);
    const settings = resolveSettings({ url: parsed.values.url as string | undefined, config: parsed.values.config as string | undefined }, io.env);
    const client = clientFor(settings, VERSION, io.signal);
    const code = await command.run({ client, settings, out, signal: io.signal }, parsed.values as FlagValues, args);
    return code ?? EXIT.ok;
  } catch (err) {
    if (err instanceof CliError) {
      report(out, err);
      return err.exitCode;
    }
    report(out, new CliError(err instanceof Error ? err.message : String(err), EXIT.failure));
    return EXIT.failure;
  }
}

/** `synctide config`: where the URL and the key come from; the key itself never. */
function showConfig(out: Output, argv: string[], env: NodeJS.ProcessEnv, help: boolean): number {
  if (help) {
    out.stdout.write(`Usage: synctide config\n\nWhere the URL and key come from (the key is never printed).\n\nGlobal flags:\n${flagLines(GLOBAL_FLAGS).join('\n')}\n`);
    return EXIT.ok;
  }
  let values: FlagValues;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: argv, options: parseConfig(GLOBAL_FLAGS), strict: true, allowPositionals: true }) as { values: FlagValues; positionals: string[] });
  } catch (err) {
    throw usage(`${(err as Error).message.replace(/\. To specify a positional argument.*$/s, '')} (synctide config --help)`);
  }
  // `config` takes no argument: one more is a mistake, as for every other command.
  if (positionals.length > 1) throw usage(`unexpected argument "${positionals[1]}"; usage: synctide config`);
  const settings = resolveSettings({ url: values.url as string | undefined, config: values.config as string | undefined }, env);
  const shown = { url: settings.url, url_from: settings.sources.url, api_key: 'set', api_key_from: settings.sources.apiKey, config_file: settings.file ?? null };
  if (out.json) out.stdout.write(`${JSON.stringify(shown, null, 2)}\n`);
  else out.stdout.write(`${fields([['url', `${settings.url} (from ${settings.sources.url})`], ['api key', `set (from ${settings.sources.apiKey})`], ['config file', settings.file ?? 'none']]).join('\n')}\n`);
  return EXIT.ok;
}
